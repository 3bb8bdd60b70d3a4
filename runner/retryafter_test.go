package runner_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// busyBackend answers the first busy[op] calls of op as a server that
// says 503 with Retry-After: wait, and records when each call came.
type busyBackend struct {
	backends.Backend
	wait time.Duration

	mu    sync.Mutex
	busy  map[string]int
	calls map[string][]time.Time
}

func (b *busyBackend) answer(op string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls[op] = append(b.calls[op], time.Now())
	if b.busy[op] == 0 {
		return nil
	}
	b.busy[op]--
	return httpx.WithRetryAfter(backends.Transient(errors.New("HTTP 503 from the server (body not shown)")), b.wait)
}

func (b *busyBackend) Submit(ctx context.Context, job backends.Job) (string, error) {
	if err := b.answer("submit"); err != nil {
		return "", err
	}
	return b.Backend.Submit(ctx, job)
}

func (b *busyBackend) Status(ctx context.Context, id string) (backends.Status, error) {
	if err := b.answer("status"); err != nil {
		return backends.Status{}, err
	}
	return b.Backend.Status(ctx, id)
}

func (b *busyBackend) times(op string) []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.calls[op]...)
}

func busyInvoker(t *testing.T, be *busyBackend, budget time.Duration) *runner.Invoker {
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("busy", func(backends.Config) (backends.Backend, error) { return be, nil }))
	return &runner.Invoker{JobName: "job", Store: record.NewFileStore(t.TempDir(), "job"), Registry: reg,
		Spec:    &record.Spec{Backend: "busy", JobScript: "#!/bin/sh\ntrue\n", JobProperties: `{"run":"100ms"}`, UpdateInterval: "0.5"},
		Log:     slog.New(slog.DiscardHandler),
		MinPoll: 20 * time.Millisecond, SubmitLease: time.Minute, RetryBudget: budget, CancelWait: time.Second, Grace: time.Second}
}

// TestRetryAfterIsWaitedFor: a submit and a status read answered 503 with
// Retry-After are tried again no sooner than the server asked (issue 25
// item 7: six submits in 8 s against Retry-After: 30).
func TestRetryAfterIsWaitedFor(t *testing.T) {
	be := &busyBackend{Backend: fake.New(), wait: 1500 * time.Millisecond,
		busy: map[string]int{"submit": 1, "status": 1}, calls: map[string][]time.Time{}}
	iv := busyInvoker(t, be, 20*time.Second)
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	for _, op := range []string{"submit", "status"} {
		calls := be.times(op)
		require.GreaterOrEqual(t, len(calls), 2, op)
		assert.GreaterOrEqual(t, calls[1].Sub(calls[0]), be.wait, "%s: the second request waited for Retry-After", op)
	}
}

// TestRetryAfterBeyondTheBudgetEndsAtOnce: a Retry-After longer than the
// retry budget left is not waited out nor ignored: no second request, and
// invoke ends transient (exit 75) at once, naming the wait.
func TestRetryAfterBeyondTheBudgetEndsAtOnce(t *testing.T) {
	for _, op := range []string{"submit", "status"} {
		t.Run(op, func(t *testing.T) {
			be := &busyBackend{Backend: fake.New(), wait: 30 * time.Second, busy: map[string]int{op: 1000}, calls: map[string][]time.Time{}}
			iv := busyInvoker(t, be, 3*time.Second)
			start := time.Now()
			err := iv.Run(context.Background())
			require.ErrorIs(t, err, backends.ErrTransient)
			assert.Less(t, time.Since(start), 3*time.Second, "not waited out")
			assert.Len(t, be.times(op), 1, "no second request before the server's 30 s")
			assert.Contains(t, err.Error(), "the server asked to wait 30s before trying again (Retry-After)")
			assert.Contains(t, iv.Result().Message, "Retry-After")
		})
	}
}
