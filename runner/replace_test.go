package runner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// movingTargets: on a the job waits an hour (its own jobproperties), on b
// it runs at once.
const movingTargets = `[{"name":"a","backend":"fakea","resourceURL":"https://a.example.org:6820","jobproperties":{"pending":"1h","run":"50ms"}},` +
	`{"name":"b","backend":"fakeb","resourceURL":"https://b.example.org:6820","credentials":"b","jobproperties":{"run":"50ms"}}]`

// movingInvoker places the job on a (ordered: a is first and fits), with
// replaceAfter 1s; b is full until freeB.
func (tc *twoClusters) movingInvoker(targets string) *runner.Invoker {
	tc.a.SetLoad(loadOf(0, 4, 3), nil)
	tc.b.SetLoad(loadOf(0, 4, 3), nil)
	spec := &record.Spec{Targets: targets, Placement: record.PolicyOrdered, ResourceURL: "https://a.example.org:6820",
		JobScript: "#!/bin/sh\ntrue\n", UpdateInterval: "0.2", ReplaceAfter: "1"}
	iv := tc.harness.invoker(spec)
	iv.Backend.Credentials = runner.DirCredentials{Dir: tc.creds, Secrets: &runner.Secrets{}}
	return iv
}

func (tc *twoClusters) freeB() { tc.b.SetLoad(loadOf(4, 4, 0), nil) }

// requireMovedOnce: the job ran once, on b; a's job was cancelled while
// it waited and never started; the record says so.
func (tc *twoClusters) requireMovedOnce(t *testing.T, iv *runner.Invoker) {
	t.Helper()
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, "b", iv.Result().Target)
	require.Len(t, tc.a.Jobs(), 1, "one job on a")
	require.Len(t, tc.b.Jobs(), 1, "one job on b")
	aj, bj := tc.a.Jobs()[0], tc.b.Jobs()[0]
	require.NotNil(t, aj.Cancelled, "a's job was cancelled")
	assert.True(t, aj.Cancelled.Before(aj.Submitted.Add(aj.Pending)), "a's job never started")
	assert.NotEqual(t, aj.Key, bj.Key, "the moved job has a key of its own")
	d := tc.record()
	assert.Equal(t, bj.ID, d[record.KeyID])
	assert.Empty(t, d[record.KeyMove])
	moves, err := record.ParseMoves(d[record.KeyMoves])
	require.NoError(t, err)
	require.Len(t, moves, 1)
	assert.Equal(t, record.Moved{Target: "a", ID: aj.ID, To: "b", At: moves[0].At, Evidence: moves[0].Evidence}, moves[0])
	assert.Contains(t, moves[0].Evidence, "cancelled while QUEUED")
	p, _ := record.ParsePlaced(d[record.KeyPlacement])
	require.NotNil(t, p)
	assert.Equal(t, "b", p.Target)
}

func TestReplaceMovesAWaitingJobOnce(t *testing.T) {
	tc := newTwoClusters(t)
	iv := tc.movingInvoker(movingTargets)
	go func() { // b frees up once the job waits on a
		require.Eventually(t, func() bool { return len(tc.a.Jobs()) == 1 }, 10*time.Second, 10*time.Millisecond)
		tc.freeB()
	}()
	require.NoError(t, iv.Run(context.Background()))
	tc.requireMovedOnce(t, iv)
	assert.Equal(t, 1, tc.a.Count("cancelifpending"))
	assert.Zero(t, tc.a.Count("cancel"), "a's job was never cancelled but through CancelIfPending")
}

// TestReplaceStaysWhenNoOtherTargetStartsIt: b stays full: the job waits
// on a, probed again at most every replaceAfter/2, and runs there.
func TestReplaceStaysWhenNoOtherTargetStartsIt(t *testing.T) {
	tc := newTwoClusters(t)
	iv := tc.movingInvoker(`[{"name":"a","backend":"fakea","resourceURL":"https://a.example.org:6820","jobproperties":{"pending":"3s","run":"50ms"}},` +
		`{"name":"b","backend":"fakeb","resourceURL":"https://b.example.org:6820","credentials":"b","jobproperties":{"run":"50ms"}}]`)
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, "a", iv.Result().Target)
	assert.Empty(t, tc.b.Jobs())
	assert.Zero(t, tc.a.Count("cancelifpending"))
	// 2 s of waiting past replaceAfter (1 s) at most every 0.45 s, plus
	// the placement's probe: a ceiling, generous for a busy machine.
	assert.LessOrEqual(t, tc.b.Count("probe"), 1+5)
	assert.GreaterOrEqual(t, tc.b.Count("probe"), 2, "b was probed again while the job waited")
}

// TestReplaceStaysWhenTheJobStartsDuringTheCancel: the job starts on a
// while the cancel is in flight: it stays, runs once, on a.
func TestReplaceStaysWhenTheJobStartsDuringTheCancel(t *testing.T) {
	tc := newTwoClusters(t)
	tc.a.StartOnCancel = true
	iv := tc.movingInvoker(movingTargets)
	go func() {
		require.Eventually(t, func() bool { return len(tc.a.Jobs()) == 1 }, 10*time.Second, 10*time.Millisecond)
		tc.freeB()
	}()
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, "a", iv.Result().Target)
	assert.Empty(t, tc.b.Jobs(), "nothing was submitted to b")
	require.Len(t, tc.a.Jobs(), 1)
	assert.Nil(t, tc.a.Jobs()[0].Cancelled)
	assert.Equal(t, 1, tc.a.Count("cancelifpending"), "a job found started is not asked again")
	assert.Empty(t, tc.record()[record.KeyMove])
}

// TestReplaceStaysWhileTheOldTargetIsDark: a cannot answer the cancel:
// the job stays on a (followed, not moved, never two), and runs there.
func TestReplaceStaysWhileTheOldTargetIsDark(t *testing.T) {
	tc := newTwoClusters(t)
	for range 1000 {
		tc.a.CancelIfPendingFaults = append(tc.a.CancelIfPendingFaults, backends.Transient(errors.New("dark 5ecret-detail")))
	}
	iv := tc.movingInvoker(`[{"name":"a","backend":"fakea","resourceURL":"https://a.example.org:6820","jobproperties":{"pending":"3s","run":"50ms"}},` +
		`{"name":"b","backend":"fakeb","resourceURL":"https://b.example.org:6820","credentials":"b","jobproperties":{"run":"50ms"}}]`)
	go func() {
		require.Eventually(t, func() bool { return len(tc.a.Jobs()) == 1 }, 10*time.Second, 10*time.Millisecond)
		tc.freeB()
	}()
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, "a", iv.Result().Target)
	assert.Empty(t, tc.b.Jobs(), "nothing was submitted to b")
	assert.GreaterOrEqual(t, tc.a.Count("cancelifpending"), 1)
	assert.Empty(t, tc.record()[record.KeyMove], "the move ended with the job")
	assert.NotContains(t, tc.logs.String(), "5ecret-detail")
}

// TestReplaceAfterIsChecked: a bad replaceAfter, or one with fewer than two
// targets, is exit 2 naming the field, and nothing is submitted.
func TestReplaceAfterIsChecked(t *testing.T) {
	for _, c := range []struct{ targets, after string }{
		{movingTargets, "soon"}, {movingTargets, "0.5"}, {movingTargets, "-3"},
		{`[{"name":"a","backend":"fakea","resourceURL":"https://a.example.org:6820"}]`, "10"},
	} {
		tc := newTwoClusters(t)
		iv := tc.movingInvoker(c.targets)
		iv.Spec.ReplaceAfter = c.after
		err := iv.Run(context.Background())
		var fe *backends.FieldError
		require.ErrorAs(t, err, &fe, "replaceAfter %q", c.after)
		assert.Equal(t, "replaceAfter", fe.Field)
		assert.True(t, errors.Is(err, backends.ErrInvalid))
		assert.Empty(t, tc.a.Jobs())
		assert.Empty(t, tc.b.Jobs())
	}
}
