package runner_test

import (
	"context"
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

// TestSlowAnswersSpaceThePolls: a step whose status requests are answered
// slowly asks less often: after an answer that took L, the next poll
// waits at least 4 L, not the poll interval (here 20 ms growing to 0.5 s).
// Before, 500 steps polling a slow slurmrestd 24.11 at their interval
// kept it overloaded until 253 of them gave up.
func TestSlowAnswersSpaceThePolls(t *testing.T) {
	const answer = 300 * time.Millisecond
	be := &slowStatusBackend{Backend: fake.New(), answer: answer}
	iv := busyInvoker(t, nil, 20*time.Second)
	iv.Registry = backends.NewRegistry()
	require.NoError(t, iv.Registry.Register("busy", func(backends.Config) (backends.Backend, error) { return be, nil }))
	iv.Spec.JobProperties = `{"run":"4s"}`
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	be.mu.Lock()
	defer be.mu.Unlock()
	require.GreaterOrEqual(t, len(be.polls), 2)
	for i := 1; i < len(be.polls); i++ {
		// From one request's start to the next: its answer (L) and then
		// at least 4 L of waiting.
		assert.GreaterOrEqual(t, be.polls[i].Sub(be.polls[i-1]), 5*answer-50*time.Millisecond, "poll %d came too soon after a slow answer", i)
	}
	t.Logf("%d polls for a job of 4 s answered in %s each", len(be.polls), answer)
}
