package main

import (
	"errors"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/runner"
)

// Exit codes of bridge-runner. They are a documented contract: Argo's
// retryStrategy.expression can retry exactly ExitTempFail.
const (
	ExitDone     = 0  // the job is DONE
	ExitFailed   = 1  // the job FAILED remotely
	ExitInvalid  = 2  // invalid input or configuration; nothing was submitted
	ExitKilled   = 3  // the job was KILLED (kill flag, SIGTERM, cancelled remotely)
	ExitUnknown  = 4  // UNKNOWN: we lost track of the job
	ExitTempFail = 75 // temporary failure after retries, or an evicted pod; a retry re-attaches
)

// exitCode is the one place where outcomes become exit codes.
func exitCode(res *runner.Result, err error) int {
	if err != nil {
		if errors.Is(err, backends.ErrInvalid) {
			return ExitInvalid
		}
		return ExitTempFail
	}
	if res == nil {
		return ExitDone
	}
	switch backends.State(res.Status) {
	case backends.Done:
		return ExitDone
	case backends.Failed:
		return ExitFailed
	case backends.Killed:
		return ExitKilled
	case backends.Unknown:
		return ExitUnknown
	}
	return ExitTempFail // not final: following stopped early
}

// usageError marks command-line mistakes (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string   { return e.err.Error() }
func (e usageError) Unwrap() []error { return []error{e.err, backends.ErrInvalid} }
