package runner_test

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/runner"
)

// silentBackend is a backend that has gone silent (blackholed): Status and
// Cancel wait for their context, or for their request's own timeout, as an
// HTTP client's request does, and then fail.
type silentBackend struct {
	*fake.Backend
	ownTimeout time.Duration
}

func (s silentBackend) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return backends.Transient(ctx.Err())
	case <-time.After(s.ownTimeout):
		return backends.Transient(context.DeadlineExceeded)
	}
}

func (s silentBackend) Status(ctx context.Context, _ string) (backends.Status, error) {
	return backends.Status{}, s.wait(ctx)
}

func (s silentBackend) Cancel(ctx context.Context, _ string) error { return s.wait(ctx) }

// TestCleanupRetryBudgetIsACeilingOnASilentBackend: issue 37. cleanup's
// --retry-budget bounds all of it: with the backend silent, a 1 s budget
// ends cleanup (transient, the record kept with kill=true) within a little
// more than 1 s, although each request would wait 5 s on its own. The old
// code retried the cancel for the budget and then asked for the job's
// state under the request's own timeout (2 min became 150 s on the real
// Slurm; 1 s became 6 s here).
func TestCleanupRetryBudgetIsACeilingOnASilentBackend(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"60s"}`))
	iv.Detach = func(context.Context) (bool, string) { return true, "only this pod goes away" }
	ctx, stop := context.WithCancelCause(context.Background())
	done := h.startRunning(ctx, iv)
	stop(runner.ErrTerminated)
	require.ErrorIs(t, waitRun(t, done, 5*time.Second), backends.ErrTransient, "the job is left running")

	silent := backends.NewRegistry()
	require.NoError(t, silent.Register("fake", func(backends.Config) (backends.Backend, error) {
		return silentBackend{Backend: h.fake, ownTimeout: 5 * time.Second}, nil
	}))
	const budget = time.Second
	start := time.Now()
	res, err := (&runner.Cleaner{Store: h.store, Registry: silent, RetryBudget: budget, Wait: time.Second, SubmitLease: time.Second}).Run(context.Background())
	took := time.Since(start)
	t.Logf("cleanup with the backend silent, budget %s: %s: %v", budget, took.Round(time.Millisecond), err)
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Less(t, took, budget+time.Second, "the budget is a ceiling")
	assert.False(t, res.Deleted, "the job's end is not confirmed: the record stays")
	assert.Equal(t, "true", h.record()["kill"])
}

// silentLogs is the fake with a job output that can go silent: while dark,
// a read waits for its context or its own timeout, as a read over an SSH
// connection that stopped answering does.
type silentLogs struct {
	*fake.Backend
	dark       *atomic.Bool
	ownTimeout time.Duration
}

func (s silentLogs) ReadLogs(ctx context.Context, _ string, offset int64, _ io.Writer) (int64, error) {
	if !s.dark.Load() {
		return offset, nil
	}
	select {
	case <-ctx.Done():
		return offset, backends.Transient(ctx.Err())
	case <-time.After(s.ownTimeout):
		return offset, backends.Transient(context.DeadlineExceeded)
	}
}

// TestRetryBudgetBoundsTheJobOutputsReads: issue 37. The backend goes dark
// while invoke follows the job and reads its output: --retry-budget 1s ends
// invoke (75) about 1 s after the first failed poll, although a read of the
// output would wait 5 s on its own. The old code read the output under its
// own timeout only (30 s over SSH: a 60 s budget took 65-80 s).
func TestRetryBudgetBoundsTheJobOutputsReads(t *testing.T) {
	h := newHarness(t, nil)
	dark := &atomic.Bool{}
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) {
		return silentLogs{Backend: h.fake, dark: dark, ownTimeout: 5 * time.Second}, nil
	}))
	iv := h.invoker(h.spec(`{"run":"60s"}`))
	iv.Registry, iv.LogOut, iv.LogInterval = reg, &bytes.Buffer{}, 100*time.Millisecond
	iv.RetryBudget = time.Second
	done := h.startRunning(context.Background(), iv)
	h.fake.SetDown(true)
	dark.Store(true)
	start := time.Now()
	err := waitRun(t, done, 20*time.Second)
	took := time.Since(start)
	t.Logf("backend and its output dark, budget %s: invoke ended after %s: %v", iv.RetryBudget, took.Round(time.Millisecond), err)
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Less(t, took, iv.RetryBudget+1500*time.Millisecond, "the budget is a ceiling")
}
