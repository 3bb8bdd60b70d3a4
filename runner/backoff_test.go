package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/runner"
)

// TestPendingCancelBacksOff: issue 37. A kill during an outage of the
// backend (every request refused) is asked again with growing, jittered
// delays, not every 250 ms: the old code sent about 80 cancels and 80
// status requests in 10 s (2,359 requests in a 5-minute outage on the real
// Slurm); with back-off from 250 ms to 5 s it is about 7 of each. The
// ceiling asserted is generous; the figures are logged.
func TestPendingCancelBacksOff(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{"run":"60s"}`)
	spec.UpdateInterval = "1"
	iv := h.invoker(spec)
	const outage = 10 * time.Second
	iv.RetryBudget, iv.CancelWait = outage, 200*time.Millisecond
	done := h.startRunning(context.Background(), iv)
	h.fake.SetDown(true)
	cancels, polls := h.fake.Count("cancel"), h.fake.Count("status")
	setKill(t, h.store)
	h.requirePendingCancel(iv, waitRun(t, done, outage+10*time.Second))
	cancels, polls = h.fake.Count("cancel")-cancels, h.fake.Count("status")-polls
	t.Logf("a kill during a %s outage: %d cancel and %d status requests", outage, cancels, polls)
	assert.LessOrEqual(t, cancels, 15, "cancels back off")
	assert.GreaterOrEqual(t, cancels, 4, "but are asked again while the budget lasts")
	assert.LessOrEqual(t, polls, 20, "status polls back off too")
	h.retryFinishesCancel(spec)
}

// TestSIGTERMCancelDuringOutageBacksOff: the same after SIGTERM, within a
// 5 s grace period: a few tries, not twenty.
func TestSIGTERMCancelDuringOutageBacksOff(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{"run":"60s"}`)
	iv := h.invoker(spec)
	iv.Grace = 5 * time.Second
	ctx, stop := context.WithCancelCause(context.Background())
	done := h.startRunning(ctx, iv)
	h.fake.SetDown(true)
	cancels := h.fake.Count("cancel")
	stop(runner.ErrTerminated)
	err := waitRun(t, done, 3*iv.Grace)
	cancels = h.fake.Count("cancel") - cancels
	t.Logf("SIGTERM during an outage, grace %s: %d cancel requests", iv.Grace, cancels)
	h.requirePendingCancel(iv, err)
	assert.LessOrEqual(t, cancels, 8, "cancels back off within the grace period")
	assert.GreaterOrEqual(t, cancels, 3)
	require.Equal(t, 1, h.fake.Count("submit"))
}
