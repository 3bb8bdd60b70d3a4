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

// TestReadTaskLogsDownloadsEachElementsFile: an array's task i reads the
// file bsub -o names for LSF's element i+1 (%J the array's id, %I the
// element), with the job files download of the array's id, from its
// offset on; a task whose file is not there yet is ErrNotFound; an
// outputFile without %I (every element writes one file) is refused naming
// the field and the fix. The output file's name is asked once per array.
func TestReadTaskLogsDownloadsEachElementsFile(t *testing.T) {
	h := newHarness(t)
	job := backends.Job{Name: "sim", Key: "br-task-logs", Script: "#!/bin/sh\necho hi\n", Properties: []byte(`{"outputFile":"out.%J.%I"}`)}
	id, _ := h.submitArray(t, job, "0-2")
	n := jobID(t, id)
	for e := 1; e <= 3; e++ {
		h.f.SetElem(n, e, func(j *fakelsf.Job) {
			j.Status = "RUN"
			j.Outputs[j.OutputPath()] = []byte("element " + strconv.Itoa(j.Index) + "\n")
		})
	}
	h.f.SetElem(n, 3, func(j *fakelsf.Job) { delete(j.Outputs, j.OutputPath()) })

	for task := 0; task <= 1; task++ {
		var out bytes.Buffer
		next, err := h.b.ReadTaskLogs(ctx, id, task, 0, &out)
		require.NoError(t, err)
		assert.Equal(t, "element "+strconv.Itoa(task+1)+"\n", out.String(), "task %d is LSF's element %d", task, task+1)
		assert.EqualValues(t, out.Len(), next)
		var rest bytes.Buffer
		again, err := h.b.ReadTaskLogs(ctx, id, task, 8, &rest)
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(task+1)+"\n", rest.String(), "from the offset on")
		assert.Equal(t, next, again)
	}
	_, err := h.b.ReadTaskLogs(ctx, id, 2, 0, &bytes.Buffer{})
	require.ErrorIs(t, err, backends.ErrNotFound, "task 2 has written nothing yet")

	h.f.Mu.Lock()
	lists, downloads := 0, 0
	for _, r := range h.f.Requests {
		switch r {
		case "GET /platform/ws/jobs/" + id:
			lists++
		case "POST /platform/ws/jobfiles/download/" + id:
			downloads++
		}
	}
	h.f.Mu.Unlock()
	assert.Equal(t, 1, lists, "the output file's name is asked once")
	assert.Equal(t, 5, downloads, "one download per read")

	one := backends.Job{Name: "sim", Key: "br-one-file", Script: "#!/bin/sh\necho hi\n", Properties: []byte(`{"outputFile":"out.%J"}`)}
	id2, _ := h.submitArray(t, one, "0-2")
	_, err = h.b.ReadTaskLogs(ctx, id2, 0, 0, &bytes.Buffer{})
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.ErrorContains(t, err, "outputFile")
	assert.ErrorContains(t, err, "%I")
}

// TestReadTaskErrsDownloadsEachElementsErrorFile: with an errorFile that
// names each element's file (%I), task i's standard error is the file
// bsub -e names for LSF's element i+1, downloaded as its output is (the
// capability backends.TaskErrReader); without errorFile, or with the
// outputFile's own name, it is in the output already (ErrNotFound:
// nothing to add); an errorFile without %I is refused naming the field
// and the fix.
func TestReadTaskErrsDownloadsEachElementsErrorFile(t *testing.T) {
	h := newHarness(t)
	er, ok := any(h.b).(backends.TaskErrReader)
	require.True(t, ok, "LSF reads its tasks' standard error (a backends.TaskErrReader)")
	job := backends.Job{Name: "sim", Key: "br-task-errs", Script: "#!/bin/sh\necho hi\n", Properties: []byte(`{"outputFile":"out.%J.%I","errorFile":"err.%J.%I"}`)}
	id, _ := h.submitArray(t, job, "0-1")
	n := jobID(t, id)
	for e := 1; e <= 2; e++ {
		h.f.SetElem(n, e, func(j *fakelsf.Job) {
			j.Status = "RUN"
			j.Outputs[j.OutputPath()] = []byte("out " + strconv.Itoa(j.Index) + "\n")
			j.Outputs[j.ErrorPath()] = []byte("err " + strconv.Itoa(j.Index) + "\n")
		})
	}
	for task := 0; task <= 1; task++ {
		var out bytes.Buffer
		next, err := er.ReadTaskErrs(ctx, id, task, 0, &out)
		require.NoError(t, err)
		assert.Equal(t, "err "+strconv.Itoa(task+1)+"\n", out.String(), "task %d's standard error is LSF's element %d's", task, task+1)
		assert.EqualValues(t, out.Len(), next)
		out.Reset()
		_, err = h.b.ReadTaskLogs(ctx, id, task, 0, &out)
		require.NoError(t, err)
		assert.Equal(t, "out "+strconv.Itoa(task+1)+"\n", out.String(), "task %d's output is apart from its error", task)
	}

	for props, want := range map[string]error{
		`{"outputFile":"out.%J.%I"}`:                              backends.ErrNotFound,
		`{"outputFile":"out.%J.%I","errorFile":"out.%J.%I"}`:      backends.ErrNotFound,
		`{"outputFile":"out.%J.%I","errorFile":"err.%J"}`:         backends.ErrInvalid,
		`{"outputFile":"out.%J.%I","errorFile":"/abs/err.%J.%I"}`: nil,
	} {
		j := backends.Job{Name: "sim", Key: "br-task-errs-2", Script: "#!/bin/sh\necho hi\n", Properties: []byte(props)}
		id2, _ := h.submitArray(t, j, "0-1")
		h.f.SetElem(jobID(t, id2), 1, func(j *fakelsf.Job) { j.Outputs[j.ErrorPath()] = []byte("abs\n") })
		var out bytes.Buffer
		_, err := er.ReadTaskErrs(ctx, id2, 0, 0, &out)
		if want == nil {
			require.NoError(t, err, props)
			assert.Equal(t, "abs\n", out.String(), props)
			continue
		}
		require.ErrorIs(t, err, want, props)
		if want == backends.ErrInvalid {
			assert.ErrorContains(t, err, "errorFile")
			assert.ErrorContains(t, err, "%I")
		}
	}
}
