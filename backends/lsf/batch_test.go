package lsf

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
)

// batchJobs submits one job per state and sets it; "left" has left mbatchd
// (only its history knows it).
func batchJobs(t *testing.T, h *harness) map[string]string {
	t.Helper()
	ip := func(i int) *int { return &i }
	states := map[string]func(j *fakelsf.Job){
		"pend":   func(j *fakelsf.Job) {},
		"run":    func(j *fakelsf.Job) { j.Status = "RUN" },
		"ssusp":  func(j *fakelsf.Job) { j.Status = "SSUSP" },
		"done":   func(j *fakelsf.Job) { j.Status, j.ExitStatus = "DONE", ip(0) },
		"failed": func(j *fakelsf.Job) { j.Status, j.ExitStatus, j.ExitInfo = "EXIT", ip(768), "TERM_RUNLIMIT" },
		"killed": func(j *fakelsf.Job) { j.Status, j.ExitStatus, j.ExitInfo = "EXIT", ip(130), "TERM_OWNER" },
		"zombi":  func(j *fakelsf.Job) { j.Status = "ZOMBI" },
		"left":   func(j *fakelsf.Job) { j.Status, j.ExitStatus, j.Left = "DONE", ip(0), true },
	}
	ids := map[string]string{}
	for name, set := range states {
		job := testJob("#!/bin/sh\n")
		job.Name = name
		id, err := h.b.Submit(ctx, job)
		require.NoError(t, err)
		h.f.Set(jobID(t, id), set)
		ids[name] = id
	}
	return ids
}

// TestStatusManyMatchesStatus: one GET ws/jobs/{ids} reports every listed
// job with the State and Raw (and exit code and reason) Status gives; the
// unknown, the malformed and the job that left mbatchd are left out.
func TestStatusManyMatchesStatus(t *testing.T) {
	h := newHarness(t)
	ids := batchJobs(t, h)
	var ask []string
	for _, id := range ids {
		ask = append(ask, id, id) // duplicates are asked once
	}
	ask = append(ask, "999999", "0", "12a", "")
	before := h.f.Count("GET ")
	got, err := h.b.StatusMany(ctx, ask)
	require.NoError(t, err)
	assert.Equal(t, 1, h.f.Count("GET ")-before, "one request for all")
	assert.Equal(t, 1, h.f.Count("GET /platform/ws/jobs/"), "no single-job read")
	assert.Zero(t, h.f.Count("GET /platform/ws/jobhistory"))
	assert.Len(t, got, len(ids)-1)
	assert.NotContains(t, got, ids["left"])
	assert.NotContains(t, got, "999999")
	for name, id := range ids {
		if name == "left" {
			continue
		}
		want, err := h.b.Status(ctx, id)
		require.NoError(t, err, name)
		require.Contains(t, got, id, name)
		assert.Equal(t, want.State, got[id].State, name)
		assert.Equal(t, want.Raw, got[id].Raw, name)
		assert.Equal(t, want.ExitCode, got[id].ExitCode, name)
		assert.Equal(t, want.Reason, got[id].Reason, name)
	}
	assert.Equal(t, backends.Failed, got[ids["failed"]].State)
	assert.Equal(t, backends.Killed, got[ids["killed"]].State)
	assert.Equal(t, backends.Suspended, got[ids["ssusp"]].State)
	st, err := h.b.Status(ctx, ids["left"])
	require.NoError(t, err)
	assert.Equal(t, backends.Done, st.State, "the history still tells Status")
}

func TestStatusManyShapes(t *testing.T) {
	h := newHarness(t)
	ids := batchJobs(t, h)
	for _, shape := range []struct {
		key    string
		arrays bool
	}{{"job", false}, {"Job", false}, {"job", true}, {"Job", true}} {
		h.f.Mu.Lock()
		h.f.JobKey, h.f.Arrays = shape.key, shape.arrays
		h.f.Mu.Unlock()
		one, err := h.b.StatusMany(ctx, []string{ids["run"]})
		require.NoError(t, err)
		assert.Equal(t, backends.Running, one[ids["run"]].State, "%+v", shape)
		two, err := h.b.StatusMany(ctx, []string{ids["run"], ids["done"]})
		require.NoError(t, err)
		assert.Len(t, two, 2, "%+v", shape)
		assert.Equal(t, "DONE", two[ids["done"]].Raw, "%+v", shape)
	}
	// An unknown state is left out, for Status to report.
	h.f.Set(jobID(t, ids["run"]), func(j *fakelsf.Job) { j.Status = "WEIRD" })
	got, err := h.b.StatusMany(ctx, []string{ids["run"], ids["pend"]})
	require.NoError(t, err)
	assert.Equal(t, []string{ids["pend"]}, keys(got))
	// None known: Application Center answers 404, which is an empty map.
	before := h.f.Count("GET ")
	got, err = h.b.StatusMany(ctx, []string{"777777", "888888"})
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, 1, h.f.Count("GET ")-before)
	// Nothing valid to ask: no request.
	got, err = h.b.StatusMany(ctx, []string{"x", "0"})
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, 1, h.f.Count("GET ")-before)
}

func keys(m map[string]backends.Status) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestStatusManyChunks: 250 ids are three requests of at most 100, each
// under the server's request-line limit; a single request for all would be
// refused.
func TestStatusManyChunks(t *testing.T) {
	h := newHarness(t)
	ids := batchJobs(t, h)
	var ask []string
	for i := range 250 {
		ask = append(ask, strconv.Itoa(100000000000+i)) // 12 digits, unknown
	}
	ask[7], ask[150], ask[249] = ids["run"], ids["done"], ids["pend"]
	before := h.f.Count("GET /platform/ws/jobs/")
	got, err := h.b.StatusMany(ctx, ask)
	require.NoError(t, err)
	assert.Equal(t, 3, h.f.Count("GET /platform/ws/jobs/")-before)
	assert.Len(t, got, 3)
	assert.Equal(t, backends.Running, got[ids["run"]].State)
	assert.Equal(t, backends.Done, got[ids["done"]].State)
	assert.Equal(t, backends.Pending, got[ids["pend"]].State)

	long := make([]string, 1000)
	for i := range long {
		long[i] = strconv.Itoa(100000000000 + i)
	}
	r := request{method: http.MethodGet, path: "/ws/jobs/" + strings.Join(long, ","), accept: "application/json"}
	_, err = h.b.do(ctx, r)
	require.Error(t, err, "the fake refuses a request line over 8 KB, as Tomcat does")
	assert.Equal(t, http.StatusBadRequest, asStatus(err).status)
}

func TestStatusManyErrors(t *testing.T) {
	h := newHarness(t)
	ids := batchJobs(t, h)
	ask := []string{ids["run"], ids["done"]}
	path := "/ws/jobs/" + ids["run"] + "," + ids["done"]

	h.f.AddFault(&fakelsf.Fault{Method: "GET", Path: path, Status: 502, ContentType: "text/plain", Body: "upstream secret-ish text", Times: 1})
	_, err := h.b.StatusMany(ctx, ask)
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.NotContains(t, err.Error(), "secret-ish")
	assert.Contains(t, err.Error(), "HTTP 502 from Application Center (body not in the documented error shape, not shown)")

	h.f.AddFault(&fakelsf.Fault{Method: "GET", Path: path, Status: 500, Body: `{"message":"mbatchd is down"}`, Times: 1})
	_, err = h.b.StatusMany(ctx, ask)
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Contains(t, err.Error(), "mbatchd is down", "the documented {\"message\"} shape is reported")

	h.f.AddFault(&fakelsf.Fault{Method: "GET", Path: path, Status: 200, Body: `<jobs><job>`, ContentType: "application/xml", Times: 1})
	_, err = h.b.StatusMany(ctx, ask)
	require.Error(t, err)
	assert.Equal(t, "GET /ws/jobs/{2 ids}: cannot read the answer: not well-formed XML (body not in the documented error shape, not shown)", err.Error())

	// A refused token is replaced once; refused again, ErrAuth.
	h.f.ExpireTokens()
	got, err := h.b.StatusMany(ctx, ask)
	require.NoError(t, err)
	assert.Len(t, got, 2)
	h.f.AddFault(&fakelsf.Fault{Method: "GET", Path: path, Status: 403, Body: `{"message":"Access denied"}`, Times: 2})
	_, err = h.b.StatusMany(ctx, ask)
	require.ErrorIs(t, err, backends.ErrAuth)
}
