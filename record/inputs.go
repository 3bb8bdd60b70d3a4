package record

import (
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// KFP parameter types of the step inputs. KFP checks a pipeline's arguments
// against them at compile time: a String input refuses False or 5 from
// Python. Argo parameters are untyped strings, and the KFP launcher renders a
// Boolean as true/false and an Integer as its digits, which is what the flags
// parse.
const (
	TypeString  = "String"
	TypeBoolean = "Boolean"
	TypeInteger = "Integer"
)

// Type is the field's KFP component input type: its type tag, else String.
// update-interval also takes durations such as 1m on the command line and
// in Argo; from KFP it is whole seconds.
func (f Field) Type() string {
	if f.KFPType != "" {
		return f.KFPType
	}
	return TypeString
}

// Input is an invoke setting that is not part of the job description. One
// entry here is the flag --<Flag>, the environment variable BRIDGE_<FLAG>,
// the KFP input and the Argo parameter <flag in snake_case> of the invoke and
// bridge-job components and templates; the tests of components/ and
// workflows/ prove that they agree with this table.
type Input struct {
	Flag    string
	Default string
	Type    string // KFP type
	Help    string
}

// InputName is the KFP component input and Argo parameter name.
func (in Input) InputName() string { return Snake(in.Flag) }

// Bool parses a Boolean input's value, naming the flag when it is not one.
func (in Input) Bool(v string) (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, backends.Invalid(in.Flag, "is %q; use true or false", v)
	}
	return b, nil
}

// ExitZero makes invoke exit 0 whenever the job reached a final state. KFP's
// launcher publishes no output of a task that exited non-zero, and an Argo
// DAG template sets its outputs only when it succeeds, so a workflow can
// branch on a failed job's status only if the step succeeds.
var ExitZero = Input{
	Flag:    "exit-zero",
	Default: "false",
	Type:    TypeBoolean,
	Help: "exit 0 whenever the job reached a final state (DONE, FAILED, KILLED or UNKNOWN), so that the step succeeds " +
		"and its outputs always exist: branch on the status output. Invalid input (exit 2) and temporary failures " +
		"(exit 75, retried) still fail the step",
}

// InvokeInputs lists the invoke settings that components and templates expose.
var InvokeInputs = []Input{ExitZero, Resubmit}

// Snake is s with its dashes as underscores: a flag name as a KFP input
// or Argo parameter name.
func Snake(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}
