package main

import (
	"github.com/spf13/cobra"

	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// invokeInputs holds the values of record.InvokeInputs, bound to flags of
// the same names (and so to BRIDGE_* environment variables).
type invokeInputs struct {
	values   map[string]*string
	exitZero bool
	resubmit string
}

// bindInvokeInputs adds a flag for each of record.InvokeInputs to cmd and
// checks their values before the command runs (a bad value exits 2 with
// nothing submitted).
func bindInvokeInputs(cmd *cobra.Command) *invokeInputs {
	in := &invokeInputs{values: map[string]*string{}}
	for _, i := range record.InvokeInputs {
		in.values[i.Flag] = cmd.Flags().String(i.Flag, i.Default, i.Help)
	}
	cmd.PreRunE = func(*cobra.Command, []string) (err error) {
		if in.exitZero, err = record.ExitZero.Bool(*in.values[record.ExitZero.Flag]); err != nil {
			return err
		}
		in.resubmit, err = runner.ParseResubmit(*in.values[record.Resubmit.Flag])
		return err
	}
	return in
}

// exit is the process's exit code for the outcome code: with --exit-zero, a
// job that reached a final state ends the step successfully (its outcome is
// in the status output).
func (in *invokeInputs) exit(code int) int {
	switch code {
	case ExitFailed, ExitKilled, ExitUnknown, ExitInfra:
		if in.exitZero {
			return ExitDone
		}
	}
	return code
}
