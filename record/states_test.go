package record_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestStateTable: every contract state has one row with every fact, in
// contract order, and the facts agree with each other and with backends. A
// state added to backends.States without its row (its exit code above all)
// fails here instead of exiting 75.
func TestStateTable(t *testing.T) {
	require.Len(t, record.States, len(backends.States), "one row per state of backends.States")
	ibm := map[string]bool{}
	for i, f := range record.States {
		assert.Equal(t, backends.States[i], f.State, "row %d is out of contract order", i)
		assert.NotEmpty(t, f.IBM, "%s has no IBM word", f.State)
		assert.NotEmpty(t, f.Reason, "%s has no condition reason", f.State)
		assert.NotEmpty(t, f.Meaning, "%s has no meaning", f.State)
		assert.Contains(t, []string{record.StepSucceeded, record.StepFailed}, f.Step, "%s: how does its step end?", f.State)
		assert.False(t, ibm[f.IBM], "IBM word %s twice", f.IBM)
		ibm[f.IBM] = true
		assert.Equal(t, f.State.Final(), f.Final, "%s: backends and the table disagree on final", f.State)
		assert.Equal(t, f.Exit == record.ExitDone, f.Step == record.StepSucceeded, "%s: only exit 0 succeeds a step", f.State)
		if f.Final {
			assert.NotEqual(t, record.ExitTempFail, f.Exit, "final %s must not exit 75 (a retry would only read it back)", f.State)
		} else {
			assert.Equal(t, record.ExitTempFail, f.Exit, "%s is not final: following stopped early, a retry re-attaches", f.State)
		}
		got, ok := record.Facts(f.State)
		assert.True(t, ok && got == f, "Facts(%s)", f.State)
		assert.Equal(t, f.State, record.StateOf(f.IBM), "IBM's %s reads as %s", f.IBM, f.State)
		assert.Equal(t, f.IBM, record.IBMWord(f.State))
	}
	seen := map[int]backends.State{}
	for _, f := range record.States {
		if f.Final {
			assert.Empty(t, seen[f.Exit], "%s and %s share exit %d", f.State, seen[f.Exit], f.Exit)
			seen[f.Exit] = f.State
		}
	}
}

func TestExitCodesComeFromTheTable(t *testing.T) {
	assert.Equal(t, record.ExitKilled, record.ExitCode(backends.Killed, backends.CategoryCancelled))
	assert.Equal(t, record.ExitKilled, record.ExitCode("KILL", ""), "IBM's word")
	assert.Equal(t, record.ExitInfra, record.ExitCode(backends.Failed, backends.CategoryInfrastructure))
	assert.Equal(t, record.ExitDone, record.ExitCode(backends.Done, backends.CategoryInfrastructure), "DONE is never a failure")
	assert.Equal(t, record.ExitTempFail, record.ExitCode(backends.Running, ""))
	assert.Equal(t, record.ExitTempFail, record.ExitCode("LOST", ""), "no state: a temporary failure")
	assert.Equal(t, []int{1, 2, 3, 4, 5}, record.OutcomeExits())
	assert.Equal(t, backends.State("LOST"), record.StateOf("LOST"))
}
