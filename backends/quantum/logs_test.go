package quantum

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
)

// TestReadLogsFromOffset: GET /jobs/{id}/logs while the job runs; each read
// writes only what is new, and a restarted reader resumes at its offset.
func TestReadLogsFromOffset(t *testing.T) {
	h := newHarness(t)
	id, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)

	var out bytes.Buffer
	off, err := h.b.ReadLogs(ctx, id, 0, &out)
	require.NoError(t, err)
	assert.Zero(t, off, "a queued job has no log yet")

	h.f.Set(id, func(j *fakequantum.Job) { j.Status, j.Logs = "Running", "2026-01-01T00:00:00Z INFO job started\n" })
	off, err = h.b.ReadLogs(ctx, id, off, &out)
	require.NoError(t, err)
	h.f.Set(id, func(j *fakequantum.Job) { j.Logs += "2026-01-01T00:00:01Z INFO transpiled ü\n" })
	off, err = h.b.ReadLogs(ctx, id, off, &out)
	require.NoError(t, err)
	want := "2026-01-01T00:00:00Z INFO job started\n2026-01-01T00:00:01Z INFO transpiled ü\n"
	assert.Equal(t, want, out.String(), "every byte once")
	assert.EqualValues(t, len(want), off)

	var again bytes.Buffer
	next, err := h.newBackend(t).ReadLogs(ctx, id, 10, &again)
	require.NoError(t, err)
	assert.Equal(t, want[10:], again.String())
	assert.Equal(t, off, next)
	assert.Equal(t, 4, h.f.Count("GET /api/v1/jobs/"+id+"/logs"), "one request per read")

	_, err = h.b.ReadLogs(ctx, "nope!", 0, &again)
	assert.Error(t, err, "a malformed id is no job")
}
