package slurm

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestLoadFromAMeasureIsTheProbe: a step judging its job against the
// measure a cluster's agent published gets the Load its own probe gets
// (for a named partition, the default one, an array, and an unknown
// partition, which is invalid input either way), and sends nothing; a
// measure it cannot read is neither invalid nor transient (it probes).
func TestLoadFromAMeasureIsTheProbe(t *testing.T) {
	h := newHarness(t, "26.05.0", "/")
	ctx := context.Background()
	_, err := h.b.Submit(ctx, testJob(hello)) // a job in the queue
	require.NoError(t, err)
	m, err := h.b.MeasureLoad(ctx)
	require.NoError(t, err)
	assert.NotContains(t, m, "\n", "one line")
	arr := &backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 9}}, MaxParallel: 2}
	sent := len(h.f.reqs())
	for _, c := range []struct {
		props string
		array *backends.Array
	}{{`{"partition":"debug"}`, nil}, {`{}`, nil}, {`{"cpus_per_task":2}`, arr}, {`{"partition":"no-such"}`, nil}} {
		job := testJob(hello)
		job.Properties = []byte(c.props)
		before := len(h.f.reqs())
		want, werr := h.b.ProbeLoad(ctx, job, c.array)
		assert.Greater(t, len(h.f.reqs()), before, "the probe asks")
		sent = len(h.f.reqs())
		got, gerr := h.b.LoadFrom(m, job, c.array)
		assert.Equal(t, sent, len(h.f.reqs()), "%s: LoadFrom sends nothing", c.props)
		assert.Equal(t, want, got, c.props)
		assert.Equal(t, werr != nil, gerr != nil, c.props)
		if werr != nil {
			assert.ErrorIs(t, gerr, backends.ErrInvalid, c.props)
		}
	}
	for _, bad := range []string{"", "{}", `{"f":2,"p":[{"n":"debug"}]}`, "api=v0.0.45"} {
		_, err := h.b.LoadFrom(bad, testJob(hello), nil)
		require.Error(t, err, bad)
		assert.False(t, errors.Is(err, backends.ErrInvalid) || errors.Is(err, backends.ErrTransient), bad)
	}
}
