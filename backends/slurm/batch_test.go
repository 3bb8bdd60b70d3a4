package slurm

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

var _ backends.StatusBatcher = (*Backend)(nil)
var _ backends.StatusBatcher = (*SSHBackend)(nil)

// TestStatusManyFake: on every API version, StatusMany says of each job
// what Status says (State and Raw), leaves out unknown, vanished and
// malformed ids, and costs one request: GET jobs/ before v0.0.40, GET
// jobs/state/ from v0.0.40 on, which says PENDING of a held job (Status
// says SUSPENDED: jobs/state/ has no reason to tell them apart).
func TestStatusManyFake(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		ctx := context.Background()
		set := map[string]func(id string){
			"done":    func(id string) { h.f.set(id, "None", u32(0), "COMPLETED") },
			"failed":  func(id string) { h.f.set(id, "NonZeroExitCode", u32(3<<8), "FAILED") },
			"running": func(id string) { h.f.set(id, "None", nil, "RUNNING") },
			"held":    func(id string) { h.f.set(id, "JobHeldUser", nil, "PENDING") },
			"ending":  func(id string) { h.f.set(id, "None", nil, "COMPLETED", "COMPLETING") },
			"requeue": func(id string) { h.f.set(id, "None", nil, "PENDING", "REQUEUED") },
			"gone":    func(id string) { h.f.set(id, "None", u32(0), "COMPLETED"); h.f.vanish(id) },
		}
		ids := map[string]string{}
		for name, fn := range set {
			id, err := h.b.Submit(ctx, testJob(hello))
			require.NoError(t, err)
			fn(id)
			ids[name] = id
		}
		asked := []string{ids["done"], ids["failed"], ids["running"], ids["held"], ids["ending"], ids["requeue"], ids["gone"], "99999999", "abc", "0", ids["done"]}
		before := len(h.f.reqs())
		got, err := h.b.StatusMany(ctx, asked)
		require.NoError(t, err)
		reqs := h.f.reqs()[before:]

		absent := map[string]bool{"gone": true}
		for name, id := range ids {
			if absent[name] {
				assert.NotContains(t, got, id, name)
				continue
			}
			want, err := h.b.Status(ctx, id)
			require.NoError(t, err)
			require.Contains(t, got, id, name)
			if name == "held" && v >= 40 {
				assert.Equal(t, backends.Suspended, want.State)
				assert.Equal(t, backends.Pending, got[id].State, "a coarse summary of a held job")
				continue
			}
			assert.Equal(t, want.State, got[id].State, name)
			assert.Equal(t, want.Raw, got[id].Raw, name)
		}
		left := 0
		for _, a := range absent {
			if a {
				left++
			}
		}
		assert.Len(t, got, len(ids)-left)
		require.Len(t, reqs, 1, "%q", reqs)
		if v < 40 {
			assert.Equal(t, backends.Suspended, got[ids["held"]].State)
			assert.Equal(t, "GET /slurm/"+v.String()+"/jobs/", reqs[0])
			return
		}
		assert.True(t, strings.HasPrefix(reqs[0], "GET /slurm/"+v.String()+"/jobs/state/?"), reqs[0])
		q, err := url.ParseQuery(strings.SplitN(reqs[0], "?", 2)[1])
		require.NoError(t, err)
		assert.Len(t, q["job_id"], 8, "each valid id once, in job_id repeated")
		assert.Equal(t, backends.Pending, got[ids["requeue"]].State, "a flag decides: no reason needed")
		assert.Equal(t, "COMPLETED,COMPLETING", got[ids["ending"]].Raw)
		assert.Equal(t, backends.Running, got[ids["ending"]].State)
	})
}

// TestStatusManyChunks: 450 ids make three GET jobs/state/, none naming
// more than 200; the jobs among them are found whichever chunk they are in.
func TestStatusManyChunks(t *testing.T) {
	h := newHarness(t, "24.11.7", "/")
	ctx := context.Background()
	var ids, jobs []string
	for i := 0; i < 3; i++ {
		id, err := h.b.Submit(ctx, testJob(hello))
		require.NoError(t, err)
		h.f.set(id, "None", nil, "RUNNING")
		jobs = append(jobs, id)
	}
	for i := 0; len(ids) < 447; i++ {
		ids = append(ids, fmt.Sprint(50000+i))
	}
	ids = append([]string{jobs[0]}, ids...)
	ids = append(ids[:300], append([]string{jobs[1]}, ids[300:]...)...)
	ids = append(ids, jobs[2])
	before := len(h.f.reqs())
	got, err := h.b.StatusMany(ctx, ids)
	require.NoError(t, err)
	reqs := h.f.reqs()[before:]
	require.Len(t, reqs, 3)
	assert.Equal(t, len(reqs), h.b.StatusManyRequests(len(ids)), "the cost it tells the watcher is the requests it sent")
	for _, r := range reqs {
		q, err := url.ParseQuery(strings.SplitN(r, "?", 2)[1])
		require.NoError(t, err)
		assert.LessOrEqual(t, len(q["job_id"]), stateChunk)
		assert.Less(t, len(r), 4096, "the URL stays short")
	}
	assert.Len(t, got, 3)
	for _, id := range jobs {
		assert.Equal(t, backends.Running, got[id].State)
	}
}

// TestStatusManyErrors: a busy slurmrestd is transient, refused
// credentials are ErrAuth (as for Status), and a server without
// jobs/state/ (a plain 404) is read with GET jobs/ from then on.
func TestStatusManyErrors(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "24.11.7", "/")
	id, err := h.b.Submit(ctx, testJob(hello))
	require.NoError(t, err)
	h.f.set(id, "None", nil, "RUNNING")

	h.f.addFault(&fault{path: "/jobs/state", status: 503, body: "<html>busy secret</html>", contentType: "text/html", times: 1})
	failed, err := h.b.StatusMany(ctx, []string{id})
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Nil(t, failed)
	assert.NotContains(t, err.Error(), "secret")
	assert.NotContains(t, err.Error(), id, "the message names the endpoint, not the ids")

	h.creds.Set("token", mintJWT([]byte("not the cluster's key, 32 bytes."), "bridge", time.Now().Add(time.Hour)))
	_, err = h.b.StatusMany(ctx, []string{id})
	require.ErrorIs(t, err, backends.ErrAuth)
	h.creds.Set("token", h.f.goodToken())

	// Before v0.0.40, the list; its failure is classified as Status's.
	old := newHarness(t, "22.05.8", "/")
	old.f.addFault(&fault{path: "/jobs", status: 502, body: "bad gateway", contentType: "text/plain", times: 1})
	failed, err = old.b.StatusMany(ctx, []string{"5"})
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Nil(t, failed)

	h.f.addFault(&fault{path: "/jobs/state", status: 404, body: "Unable find requested URL. Please view /openapi/v3 for API reference.", contentType: "text/plain"})
	before := len(h.f.reqs())
	got, err := h.b.StatusMany(ctx, []string{id})
	require.NoError(t, err)
	assert.Equal(t, backends.Running, got[id].State)
	got, err = h.b.StatusMany(ctx, []string{id})
	require.NoError(t, err)
	assert.Equal(t, backends.Running, got[id].State)
	reqs := h.f.reqs()[before:]
	assert.Equal(t, []string{"GET /slurm/v0.0.42/jobs/state/?job_id=" + id, "GET /slurm/v0.0.42/jobs/", "GET /slurm/v0.0.42/jobs/"}, reqs)
	assert.Equal(t, 1, h.b.StatusManyRequests(450), "one GET jobs/ for any number of ids")

	got, err = h.b.StatusMany(ctx, []string{"x", ""})
	require.NoError(t, err)
	assert.Empty(t, got)
}

// TestParseBatchLines: squeue's and sacct's lines, with the ids asked for
// only, the first word of "CANCELLED by 1001", a held job SUSPENDED.
func TestParseBatchLines(t *testing.T) {
	out := map[string]backends.Status{}
	parseBatchLines("7|RUNNING|None\n8|PENDING|JobHeldUser\n9|CANCELLED by 1001|None\n10_2|COMPLETING|None\n11|FAILED|NonZeroExitCode\nbogus\n12||x\n99|RUNNING|None\n",
		[]string{"7", "8", "9", "10_2", "11", "12"}, out)
	want := map[string]backends.State{"7": backends.Running, "8": backends.Suspended, "9": backends.Killed, "10_2": backends.Running, "11": backends.Failed}
	require.Len(t, out, len(want))
	for id, st := range want {
		assert.Equal(t, st, out[id].State, id)
	}
	assert.Equal(t, "CANCELLED", out["9"].Raw)
	assert.Equal(t, "NonZeroExitCode", out["11"].Reason)
	for _, bad := range []string{"1;rm", "1,2", "-1", "1_", "_1", "12345678901", "1 2"} {
		assert.False(t, batchID().MatchString(bad), bad)
	}
}
