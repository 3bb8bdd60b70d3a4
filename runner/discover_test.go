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

// slowDiscoveryBackend must learn something from the server before its
// first submit, as the slurm backend learns slurmrestd's API version: the
// first Submit learns it itself (taking learn, unless Prepare did), as a
// daemon swamped by a burst of steps answers the discovery requests late.
type slowDiscoveryBackend struct {
	backends.Backend
	learn time.Duration

	mu      sync.Mutex
	known   bool
	submits int
}

func (b *slowDiscoveryBackend) Prepare(ctx context.Context) error {
	b.mu.Lock()
	known := b.known
	b.mu.Unlock()
	if known {
		return nil
	}
	t := time.NewTimer(b.learn)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return backends.Transient(ctx.Err())
	}
	b.mu.Lock()
	b.known = true
	b.mu.Unlock()
	return nil
}

func (b *slowDiscoveryBackend) Submit(ctx context.Context, job backends.Job) (string, error) {
	b.mu.Lock()
	b.submits++
	b.mu.Unlock()
	if err := b.Prepare(ctx); err != nil {
		return "", err
	}
	return b.Backend.Submit(ctx, job)
}

// TestDiscoveryIsOutsideTheSubmitWindow: what a backend must ask before
// its first submit is asked before the submit intent is claimed, within the
// retry budget, not inside the submit's window (here 1.2 s of a 1.5 s
// lease). 500 steps at once on slurmrestd 22.05 (bench/conns_test.go) took
// 15 s for the nine version pings, leaving the submit 4 s of its 19 s: 43
// exited 75 and most of their submits, queued, still started a job.
func TestDiscoveryIsOutsideTheSubmitWindow(t *testing.T) {
	be := &slowDiscoveryBackend{Backend: fake.New(), learn: 2 * time.Second}
	iv := busyInvoker(t, nil, 20*time.Second)
	iv.Registry = backends.NewRegistry()
	require.NoError(t, iv.Registry.Register("busy", func(backends.Config) (backends.Backend, error) { return be, nil }))
	iv.SubmitLease = 1500 * time.Millisecond
	require.NoError(t, iv.Run(context.Background()), "a discovery longer than the submit window ends the step")
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, 1, be.submits, "one submit, sent once the backend knew what it needed")
}
