package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// startRunning starts iv under ctx and waits until the record says RUNNING.
func (h *harness) startRunning(ctx context.Context, iv *runner.Invoker) <-chan error {
	done := make(chan error, 1)
	go func() { done <- iv.Run(ctx) }()
	require.Eventually(h.t, func() bool {
		rec, err := h.store.Get(context.Background())
		return err == nil && rec.Data[record.KeyJobStatus] == "RUNNING"
	}, time.Minute, 10*time.Millisecond)
	return done
}

func waitRun(t *testing.T, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("invoke did not end within %s", within)
	}
	return nil
}

// requirePendingCancel: the record and the result say what is true after a
// cancel the backend never accepted: the job's last known state, kill=true
// kept, a message saying the cancel is pending, and no server text.
func (h *harness) requirePendingCancel(iv *runner.Invoker, err error) {
	t := h.t
	require.ErrorIs(t, err, backends.ErrTransient, "exit 75: a retry finishes the cancel")
	rec := h.record()
	assert.Equal(t, "RUNNING", rec[record.KeyJobStatus], "not KILLED: the cancel never reached the backend")
	assert.Equal(t, "true", rec[record.KeyKill], "kill=true stays for the retry or cleanup")
	assert.Contains(t, rec[record.KeyMessage], "not yet confirmed")
	assert.NotContains(t, rec[record.KeyMessage], "5ecret-detail", "no server text in the record")
	assert.Empty(t, rec[record.KeyEnd])
	assert.Equal(t, "RUNNING", iv.Result().Status)
	assert.NotContains(t, iv.Result().Message, "5ecret-detail", "no server text in the outputs")
	assert.Nil(t, h.fake.Jobs()[0].Cancelled)
}

// retryFinishesCancel: once the backend is back, the next invoke on the
// record cancels first and records KILLED.
func (h *harness) retryFinishesCancel(spec *record.Spec) {
	t := h.t
	h.fake.SetDown(false)
	again := h.invoker(spec)
	require.NoError(t, again.Run(context.Background()))
	assert.Equal(t, "KILLED", again.Result().Status)
	assert.Equal(t, "KILLED", h.record()[record.KeyJobStatus])
	assert.NotNil(t, h.fake.Jobs()[0].Cancelled, "the backend cancelled the job")
	assert.Equal(t, 1, h.fake.Count("submit"))
}

// TestSIGTERMDuringBackendOutageIsPendingNotKilled: issue 25 item 1. The
// old code wrote KILLED ("the backend did not accept it") and exited 3
// while the job ran on.
func TestSIGTERMDuringBackendOutageIsPendingNotKilled(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{"run":"60s"}`)
	iv := h.invoker(spec)
	iv.Grace = time.Second
	ctx, cancel := context.WithCancelCause(context.Background())
	done := h.startRunning(ctx, iv)
	h.fake.SetDown(true)
	start := time.Now()
	cancel(runner.ErrTerminated)
	err := waitRun(t, done, 5*time.Second)
	assert.Less(t, time.Since(start), 1500*time.Millisecond, "within the grace period")
	h.requirePendingCancel(iv, err)
	h.retryFinishesCancel(spec)
}

// TestKillDuringBackendOutageIsPendingNotKilled: kill=true while the
// backend is out of reach for longer than the retry budget.
func TestKillDuringBackendOutageIsPendingNotKilled(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{"run":"60s"}`)
	iv := h.invoker(spec)
	iv.RetryBudget, iv.CancelWait = time.Second, 200*time.Millisecond
	done := h.startRunning(context.Background(), iv)
	h.fake.SetDown(true)
	setKill(t, h.store)
	err := waitRun(t, done, 10*time.Second)
	h.requirePendingCancel(iv, err)
	h.retryFinishesCancel(spec)
}

// TestKillRidesOutAShortOutage: a backend back within the retry budget
// gets the cancel, and the job is KILLED.
func TestKillRidesOutAShortOutage(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"60s"}`))
	iv.RetryBudget, iv.CancelWait = 10*time.Second, 200*time.Millisecond
	done := h.startRunning(context.Background(), iv)
	h.fake.SetDown(true)
	setKill(t, h.store)
	time.Sleep(time.Second)
	h.fake.SetDown(false)
	require.NoError(t, waitRun(t, done, 10*time.Second))
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.NotNil(t, h.fake.Jobs()[0].Cancelled)
}

// downStore is a store whose API goes silent on demand (a blackholed
// kube-apiserver): reads and writes hang until their context ends.
type downStore struct {
	record.Store
	down atomic.Bool
}

func (s *downStore) hang(ctx context.Context) error {
	<-ctx.Done()
	return backends.Transient(ctx.Err())
}

func (s *downStore) Get(ctx context.Context) (*record.Record, error) {
	if s.down.Load() {
		return nil, s.hang(ctx)
	}
	return s.Store.Get(ctx)
}

func (s *downStore) Update(ctx context.Context, r *record.Record) (*record.Record, error) {
	if s.down.Load() {
		return nil, s.hang(ctx)
	}
	return s.Store.Update(ctx, r)
}

// TestSIGTERMWithTheRecordStoreDownEndsWithinGrace: issue 25 item 6. The
// job is cancelled at once, but the record cannot be written: invoke must
// stop retrying at the grace deadline and return KILLED (its outputs are
// written by the caller), leaving the record to the next invoke or cleanup. The old
// code retried the write for the whole retry budget (119 s against a real
// apiserver; forever against one that never answers).
func TestSIGTERMWithTheRecordStoreDownEndsWithinGrace(t *testing.T) {
	store := &downStore{Store: record.NewFileStore(t.TempDir(), "job")}
	h := newHarness(t, store)
	iv := h.invoker(h.spec(`{"run":"60s"}`))
	iv.Grace, iv.RetryBudget = time.Second, time.Minute
	ctx, cancel := context.WithCancelCause(context.Background())
	done := h.startRunning(ctx, iv)
	store.down.Store(true)
	start := time.Now()
	cancel(runner.ErrTerminated)
	err := waitRun(t, done, 10*time.Second)
	took := time.Since(start)
	t.Logf("SIGTERM to return with the store down: %s (grace 1s)", took.Round(time.Millisecond))
	assert.Less(t, took, 1300*time.Millisecond, "within the grace period")
	// Issue 37: the backend confirmed the cancel, so KILLED (exit 3) is
	// true though the record could not say so; the old code exited 75 with
	// an empty status output.
	require.NoError(t, err, "exit 3: the job is KILLED whether or not the record says so")
	assert.NotNil(t, h.fake.Jobs()[0].Cancelled, "the job was cancelled")
	assert.Equal(t, "KILLED", iv.Result().Status, "the backend confirmed the cancel")
	store.down.Store(false)
	assert.Equal(t, "RUNNING", h.record()[record.KeyJobStatus], "the record keeps its last state for cleanup")
}
