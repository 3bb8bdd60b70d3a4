package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestFutureDatedIntentIsWaitedOutOnce: another machine's intent dated an
// hour ahead (a clock that runs ahead, or a hand edit) is judged by when
// this invoker first saw it, on its own clock: it is waited out for one
// lease, then taken over; it does not make invoke wait for an hour.
func TestFutureDatedIntentIsWaitedOutOnce(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	spec := h.spec(`{"run":"50ms"}`)
	rec, err := runner.EnsureRecord(ctx, h.store, *spec, time.Second)
	require.NoError(t, err)
	next := rec.Clone()
	next.Data[record.KeyIntent] = "elsewhere/1/1@" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	_, err = h.store.Update(ctx, next)
	require.NoError(t, err)

	iv := h.invoker(spec)
	iv.SubmitLease = time.Second
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, iv.Run(rctx), "taken over within the lease, not after the intent's own time")
	assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the lease, counted from first sight, is respected")
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, 1, h.fake.Count("submit"))
}

// TestRetryBudgetIsACeilingForSubmit: a backend that keeps failing
// transiently is given up on within --retry-budget, even when the submit
// lease is longer (it used to be retried for four fifths of the lease).
func TestRetryBudgetIsACeilingForSubmit(t *testing.T) {
	h := newHarness(t, nil)
	for range 100 {
		h.fake.SubmitFaults = append(h.fake.SubmitFaults, backends.Transient(assert.AnError))
	}
	iv := h.invoker(h.spec(`{"run":"50ms"}`))
	iv.RetryBudget = 300 * time.Millisecond
	iv.SubmitLease = 30 * time.Second
	start := time.Now()
	err := iv.Run(context.Background())
	took := time.Since(start)
	require.ErrorIs(t, err, backends.ErrTransient, "exit 75: a retry re-attaches")
	assert.LessOrEqual(t, h.fake.Count("submit"), 3, "200 ms, 400 ms ... backoff: at most 3 attempts fit in 300 ms")
	assert.Less(t, took, 10*time.Second, "bounded by the 300 ms budget, not by the 24 s of the lease")
}
