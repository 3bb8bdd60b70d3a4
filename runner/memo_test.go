package runner_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
)

// remembering is the fake backend plus a memo: it "learns" on its first
// submit, as the slurm backend learns the API version.
type remembering struct {
	*fake.Backend
	mu       sync.Mutex
	learnt   string
	recalled []string
}

func (r *remembering) Submit(ctx context.Context, j backends.Job) (string, error) {
	r.mu.Lock()
	r.learnt = "api=v0.0.42"
	r.mu.Unlock()
	return r.Backend.Submit(ctx, j)
}

func (r *remembering) Remember() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.learnt
}

func (r *remembering) Recall(m string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recalled = append(r.recalled, m)
}

// The memo rides on the record writes invoke makes anyway (no write of its
// own), and a later invoke or cleanup of the same job gets it back.
func TestBackendMemoIsKeptAndRecalled(t *testing.T) {
	cs := &countingStore{Store: record.NewFileStore(t.TempDir(), "job")}
	h := newHarness(t, cs)
	var made []*remembering
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) {
		r := &remembering{Backend: h.fake}
		made = append(made, r)
		return r, nil
	}))
	h.reg = reg
	iv := h.invoker(h.spec(`{"run":"50ms"}`))
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "api=v0.0.42", h.record()[record.KeyBackendMemo])
	assert.Empty(t, made[0].recalled, "a fresh record has no memo")
	assert.LessOrEqual(t, cs.updates.Load(), int64(5), "no write of its own")

	require.NoError(t, h.invoker(h.spec(`{"run":"50ms"}`)).Run(context.Background()))
	require.Len(t, made, 2)
	assert.Equal(t, []string{"api=v0.0.42"}, made[1].recalled)
	assert.Equal(t, 1, h.fake.Count("submit"), "the second invoke re-reports, it does not submit")
}
