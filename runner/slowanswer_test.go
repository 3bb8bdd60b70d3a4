package runner_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
)

// slowStatusBackend answers every status request after answer, as a
// daemon with too much to do does.
type slowStatusBackend struct {
	backends.Backend
	answer time.Duration

	mu    sync.Mutex
	polls []time.Time
}

func (b *slowStatusBackend) Status(ctx context.Context, id string) (backends.Status, error) {
	b.mu.Lock()
	b.polls = append(b.polls, time.Now())
	b.mu.Unlock()
	t := time.NewTimer(b.answer)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return backends.Status{}, backends.Transient(ctx.Err())
	}
	return b.Backend.Status(ctx, id)
}

// runSlowStatus runs a job of run behind a backend answering every status
// request after answer, polling every 20 ms, and returns when each poll began.
func runSlowStatus(t *testing.T, answer time.Duration, run string) []time.Time {
	t.Helper()
	be := &slowStatusBackend{Backend: fake.New(), answer: answer}
	iv := busyInvoker(t, nil, 30*time.Second)
	iv.Registry = backends.NewRegistry()
	require.NoError(t, iv.Registry.Register("busy", func(backends.Config) (backends.Backend, error) { return be, nil }))
	iv.Spec.JobProperties = `{"run":"` + run + `"}`
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	be.mu.Lock()
	defer be.mu.Unlock()
	return slices.Clone(be.polls)
}

// TestSlowAnswersSpaceThePolls: a step whose status requests are answered
// slowly (over a second) asks less often: after an answer that took L,
// the next poll waits at least 4 L, not the poll interval (20 ms here).
// Before, 500 steps polling a slow slurmrestd 24.11 at their interval
// kept it overloaded until 253 of them gave up.
func TestSlowAnswersSpaceThePolls(t *testing.T) {
	const answer = 1200 * time.Millisecond
	polls := runSlowStatus(t, answer, "3s")
	require.GreaterOrEqual(t, len(polls), 2)
	for i := 1; i < len(polls); i++ {
		// From one request's start to the next: its answer (L) and then
		// at least 4 L of waiting.
		assert.GreaterOrEqual(t, polls[i].Sub(polls[i-1]), 5*answer-50*time.Millisecond, "poll %d came too soon after a slow answer", i)
	}
	t.Logf("%d polls for a job of 3 s answered in %s each", len(polls), answer)
}

// TestQuickAnswersKeepTheInterval: answers within a second (a daemon on a
// busy machine, not one we swamp) leave the polls at their interval, so
// detection is not slowed: a job of 2 s answered in 300 ms each is asked
// at least 4 times (one request's start to the next ~320 ms; with the
// 4 L rule it would be 1.5 s, 2 polls).
func TestQuickAnswersKeepTheInterval(t *testing.T) {
	polls := runSlowStatus(t, 300*time.Millisecond, "2s")
	assert.GreaterOrEqual(t, len(polls), 4, "polls were spaced although every answer took under a second")
}
