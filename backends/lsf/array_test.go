package lsf

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

var _ backends.ArraySubmitter = (*Backend)(nil)

func (h *harness) submitArray(t *testing.T, job backends.Job, spec string) (string, *fakelsf.Submit) {
	t.Helper()
	a, err := backends.ParseArray(spec)
	require.NoError(t, err)
	id, err := h.b.SubmitArray(ctx, job, a)
	require.NoError(t, err)
	h.f.Mu.Lock()
	defer h.f.Mu.Unlock()
	return id, h.f.Submits[len(h.f.Submits)-1]
}

// TestArraySubmitStatusAndKey: the array 0-4%2 is LSF's elements 1-5 at
// most 2 at once; its elements' states come back by array index from one
// GET ws/jobs/{id}, and FindByKey finds the array from an element.
func TestArraySubmitStatusAndKey(t *testing.T) {
	h := newHarness(t)
	id, s := h.submitArray(t, testJob("#!/bin/sh\necho $BRIDGE_TASK_INDEX\n"), "0-4%2")
	n := jobID(t, id)
	assert.Equal(t, key+"-hello[1-5]%2", s.Params["JOB_NAME"].Value)
	assert.Equal(t, "/bin/sh ./"+key+"-task.sh", s.Params["COMMANDTORUN"].Value)
	assert.Contains(t, string(s.Files[key+"-task.sh"]), "umask 077 && chmod 700 ./"+key+".sh && ./"+key+".sh\n")
	require.Len(t, h.f.JobByID(n).Elems, 5)
	assert.Equal(t, 2, h.f.JobByID(n).MaxParallel)

	ip := func(i int) *int { return &i }
	h.f.SetElem(n, 1, func(j *fakelsf.Job) { j.Status, j.ExitStatus = "DONE", ip(0) })
	h.f.SetElem(n, 2, func(j *fakelsf.Job) { j.Status = "RUN" })
	h.f.SetElem(n, 3, func(j *fakelsf.Job) { j.Status, j.ExitStatus = "EXIT", ip(3) })
	before := h.f.Count("GET /platform/ws/jobs/")
	tasks, err := h.b.ArrayStatus(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 1, h.f.Count("GET /platform/ws/jobs/")-before, "one request per ArrayStatus")
	require.Len(t, tasks, 5)
	assert.Equal(t, backends.Done, tasks[0].State)
	assert.Equal(t, backends.Running, tasks[1].State)
	assert.Equal(t, backends.Failed, tasks[2].State)
	assert.Equal(t, ip(3), tasks[2].ExitCode)
	assert.Equal(t, backends.Pending, tasks[3].State)
	assert.Equal(t, backends.Pending, tasks[4].State)

	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Running, st.State, "an array with a running element is going")

	found, err := h.newBackend(t).FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, id, found, "the array's id, not an element's")

	h.f.JobKey = "Job" // and in XML
	tasks, err = h.b.ArrayStatus(ctx, id)
	require.NoError(t, err)
	assert.Len(t, tasks, 5)
}

// TestArrayTaskScriptSetsTheIndex runs the task script as LSF would, with
// LSB_JOBINDEX set: BRIDGE_TASK_INDEX is the array index.
func TestArrayTaskScriptSetsTheIndex(t *testing.T) {
	h := newHarness(t)
	job := testJob("#!/bin/sh\n")
	job.ScriptPath, job.Script = "echo task=$BRIDGE_TASK_INDEX lsf=$LSB_JOBINDEX", ""
	_, s := h.submitArray(t, job, "1,3,8-15")
	assert.Equal(t, key+"-hello[2,4,9-16]", s.Params["JOB_NAME"].Value)
	cmd := exec.Command("/bin/sh", "-c", string(s.Files[key+"-task.sh"]))
	cmd.Env = []string{"LSB_JOBINDEX=9", "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	require.NoError(t, err)
	assert.Equal(t, "task=8 lsf=9\n", string(out))
}

// TestArrayCancel: a kill of the array's id kills every element still
// going; a second is no error.
func TestArrayCancel(t *testing.T) {
	h := newHarness(t)
	id, _ := h.submitArray(t, testJob("#!/bin/sh\n"), "0-2")
	n := jobID(t, id)
	ip := func(i int) *int { return &i }
	h.f.SetElem(n, 1, func(j *fakelsf.Job) { j.Status, j.ExitStatus = "DONE", ip(0) })
	h.f.SetElem(n, 2, func(j *fakelsf.Job) { j.Status = "RUN" })
	require.NoError(t, h.b.Cancel(ctx, id))
	tasks, err := h.b.ArrayStatus(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Done, tasks[0].State)
	assert.Equal(t, backends.Killed, tasks[1].State)
	assert.Equal(t, backends.Killed, tasks[2].State)
	require.NoError(t, h.b.Cancel(ctx, id), "cancelling an ended array")
	assert.Equal(t, 2, h.f.Count("POST /platform/ws/jobs/kill"))
}

// TestArrayRefused: an array the fake's bsub refuses (here a name LSF
// cannot take) is bad input, as is an empty one; an unknown array id is
// not found.
func TestArrayRefused(t *testing.T) {
	h := newHarness(t)
	_, err := h.b.SubmitArray(ctx, testJob("#!/bin/sh\n"), backends.Array{})
	testutil.RequireFieldError(t, err, "array")
	job := testJob("#!/bin/sh\n")
	job.Inputs = []backends.InputFile{{Name: key + "-task.sh", Size: 0}}
	a, _ := backends.ParseArray("0-1")
	_, err = h.b.SubmitArray(ctx, job, a)
	testutil.RequireFieldError(t, err, "jobdata.additionalData")
	// LSF itself refuses element 0: the mapping never sends it.
	h.f.Mu.Lock()
	assert.Error(t, (&fakelsf.Job{Name: "x[0-3]"}).MakeArray())
	h.f.Mu.Unlock()
	// Past MAX_JOB_ARRAY_SIZE's default: LSF refuses it, the error says why.
	a, _ = backends.ParseArray("0-1000")
	_, err = h.b.SubmitArray(ctx, testJob("#!/bin/sh\n"), a)
	testutil.RequireFieldError(t, err, "array")
	assert.ErrorContains(t, err, "MAX_JOB_ARRAY_SIZE")
	// 0-999 is elements 1-1000: it fits.
	a, _ = backends.ParseArray("0-999")
	id, err := h.b.SubmitArray(ctx, testJob("#!/bin/sh\n"), a)
	require.NoError(t, err)
	assert.Len(t, h.f.JobByID(jobID(t, id)).Elems, 1000)
	// A specification over 255 characters is refused before sending.
	var odd []string
	for i := 0; i < 200; i += 2 {
		odd = append(odd, strconv.Itoa(i))
	}
	a, _ = backends.ParseArray(strings.Join(odd, ","))
	_, err = h.b.SubmitArray(ctx, testJob("#!/bin/sh\n"), a)
	testutil.RequireFieldError(t, err, "array")
	assert.ErrorContains(t, err, "255")
	_, err = h.b.ArrayStatus(ctx, "99999")
	assert.ErrorIs(t, err, backends.ErrNotFound)
	_, err = h.b.ArrayStatus(ctx, "1234[1]")
	assert.ErrorIs(t, err, backends.ErrNotFound)
	h.f.Mu.Lock()
	assert.Len(t, h.f.Jobs, 1, "only 0-999 was taken")
	assert.Len(t, h.f.Submits, 2, "the 255-character one was not sent")
	h.f.Mu.Unlock()
}
