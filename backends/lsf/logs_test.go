package lsf

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
)

// TestReadLogsDownloadsTheOutputFileWhileItRuns: the output file (outfile,
// with %J) is downloaded while the job runs, and each read writes only what
// is new; a restarted reader resumes at its offset.
func TestReadLogsDownloadsTheOutputFileWhileItRuns(t *testing.T) {
	h := newHarness(t)
	job := backends.Job{Name: "sim", Key: "br-logs", Script: "#!/bin/sh\necho hi\n", Properties: []byte(`{"outputFile":"out-%J.txt"}`)}
	id, _ := h.submit(t, job)
	n := jobID(t, id)

	var out bytes.Buffer
	off, err := h.b.ReadLogs(ctx, id, 0, &out)
	require.NoError(t, err, "no file yet is nothing new")
	assert.Zero(t, off)

	file := func(j *fakelsf.Job) string { return j.Cwd + "/out-" + strconv.Itoa(n) + ".txt" }
	h.f.Set(n, func(j *fakelsf.Job) { j.Status = "RUN"; j.Outputs[file(j)] = []byte("line 1\n") })
	off, err = h.b.ReadLogs(ctx, id, off, &out)
	require.NoError(t, err)
	h.f.Set(n, func(j *fakelsf.Job) { j.Outputs[file(j)] = append(j.Outputs[file(j)], "line 2 ü\n"...) })
	off, err = h.b.ReadLogs(ctx, id, off, &out)
	require.NoError(t, err)
	assert.Equal(t, "line 1\nline 2 ü\n", out.String(), "every byte once")
	assert.EqualValues(t, out.Len(), off)

	var again bytes.Buffer
	next, err := h.newBackend(t).ReadLogs(ctx, id, 7, &again)
	require.NoError(t, err)
	assert.Equal(t, "line 2 ü\n", again.String())
	assert.Equal(t, off, next)

	h.f.Mu.Lock()
	downloads := 0
	for _, r := range h.f.Requests {
		if r == "POST /platform/ws/jobfiles/download/"+id {
			downloads++
		}
	}
	h.f.Mu.Unlock()
	assert.Equal(t, 4, downloads, "one download per read")
}

func TestReadLogsWithoutOutputFile(t *testing.T) {
	h := newHarness(t)
	id, _ := h.submit(t, backends.Job{Name: "sim", Key: "br-nolog", Script: "#!/bin/sh\necho hi\n"})
	var out bytes.Buffer
	off, err := h.b.ReadLogs(ctx, id, 0, &out)
	require.NoError(t, err)
	assert.Zero(t, off)
	assert.Contains(t, h.logs.String(), "set outputFile in jobproperties")
}
