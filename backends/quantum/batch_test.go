package quantum

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
)

// TestStatusManyMatchesStatus: active and ended jobs are read from the two
// lists with the State, Raw and Reason Status gives; unknown and malformed
// ids are left out.
func TestStatusManyMatchesStatus(t *testing.T) {
	h := newHarness(t)
	submitted, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)
	ids := map[string]string{
		"submitted": submitted,
		"queued":    h.f.AddJob("Queued", "", nil),
		"running":   h.f.AddJob("Running", "", nil),
		"completed": h.f.AddJob("Completed", "", nil),
		"failed":    h.f.AddJob("Failed", "Error running the job", 1517),
		"cancelled": h.f.AddJob("Cancelled", "Job was cancelled by the user", nil),
		"too long":  h.f.AddJob("Cancelled", "Ran too long", 1305),
		"legacy":    h.f.AddJob("Cancelled - Ran too long", "", nil),
	}
	for range 5 {
		h.f.AddJob("Completed", "", nil) // someone else's
	}
	ask := []string{"cnosuchjob0000000000", "../../x", ""}
	for _, id := range ids {
		ask = append(ask, id, id)
	}
	before := h.f.Count("GET ")
	got, err := h.b.StatusMany(ctx, ask)
	require.NoError(t, err)
	assert.Equal(t, 2, h.f.Count("GET ")-before, "the active list, then the ended one")
	assert.Equal(t, 2, h.f.ListCalls())
	assert.Len(t, got, len(ids))
	for name, id := range ids {
		want, err := h.b.Status(ctx, id)
		require.NoError(t, err, name)
		require.Contains(t, got, id, name)
		assert.Equal(t, want.State, got[id].State, name)
		assert.Equal(t, want.Raw, got[id].Raw, name)
		assert.Equal(t, want.Reason, got[id].Reason, name)
		assert.Equal(t, want.Category, got[id].Category, name)
	}
	assert.Equal(t, backends.Failed, got[ids["too long"]].State)
	assert.Equal(t, backends.Killed, got[ids["cancelled"]].State)

	// All asked jobs active: the first list has them all, one request.
	before = h.f.ListCalls()
	got, err = h.b.StatusMany(ctx, []string{ids["queued"], ids["running"], ids["submitted"]})
	require.NoError(t, err)
	assert.Equal(t, 1, h.f.ListCalls()-before)
	assert.Len(t, got, 3)
	h.f.Mu.Lock()
	q := h.f.Lists[len(h.f.Lists)-1]
	h.f.Mu.Unlock()
	assert.Equal(t, "true", q.Get("pending"))
	assert.Equal(t, "50", q.Get("limit"))
	assert.Equal(t, "true", q.Get("exclude_params"))

	// Nothing valid to ask: no request.
	before = h.f.ListCalls()
	got, err = h.b.StatusMany(ctx, []string{"../x", ""})
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, before, h.f.ListCalls())
}

// TestStatusManyReadsOnlyTheNewestPages: behind 120 newer active jobs, an
// old active job is on no page read (left out, for Status to tell); one
// 60 jobs deep is on the second page. Each list stops at listPages pages,
// or earlier at its end.
func TestStatusManyReadsOnlyTheNewestPages(t *testing.T) {
	h := newHarness(t)
	old := h.f.AddJob("Running", "", nil)
	var newer []string
	for range 120 {
		newer = append(newer, h.f.AddJob("Queued", "", nil))
	}
	done := h.f.AddJob("Completed", "", nil)
	before := h.f.ListCalls()
	got, err := h.b.StatusMany(ctx, []string{old, done})
	require.NoError(t, err)
	assert.Equal(t, 3, h.f.ListCalls()-before, "two pages of active jobs, one (short) of ended ones")
	assert.Equal(t, map[string]backends.Status{done: {State: backends.Done, Raw: "Completed", SubmitTime: got[done].SubmitTime}}, got)
	st, err := h.b.Status(ctx, old)
	require.NoError(t, err)
	assert.Equal(t, backends.Running, st.State)

	before = h.f.ListCalls()
	got, err = h.b.StatusMany(ctx, []string{newer[60]}) // the 60th newest
	require.NoError(t, err)
	assert.Equal(t, 2, h.f.ListCalls()-before)
	assert.Equal(t, backends.Pending, got[newer[60]].State)
	h.f.Mu.Lock()
	assert.Equal(t, "50", h.f.Lists[len(h.f.Lists)-1].Get("offset"))
	h.f.Mu.Unlock()

	for range 150 {
		h.f.AddJob("Failed", "", nil)
	}
	before = h.f.ListCalls()
	got, err = h.b.StatusMany(ctx, []string{old, "cnosuchjob0000000000"})
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, 2*listPages, h.f.ListCalls()-before, "the bound")
}

func TestStatusManyErrors(t *testing.T) {
	h := newHarness(t)
	id := h.f.AddJob("Running", "", nil)
	h.f.AddFault(&fakequantum.Fault{Method: "GET", Path: "/api/v1/jobs", Status: 503, Body: "upstream secret-ish text", RetryAfter: "7", Times: 1})
	_, err := h.b.StatusMany(ctx, []string{id})
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.NotContains(t, err.Error(), "secret-ish")
	assert.Contains(t, err.Error(), "GET /jobs: HTTP 503 from IBM Quantum")

	h.f.AddFault(&fakequantum.Fault{Method: "GET", Path: "/api/v1/jobs", Status: 429, Body: `{"errors":[{"code":1008,"message":"Too many requests"}],"trace":"0f3c1a2b-1111-2222-3333-444455556666"}`, Times: 1})
	_, err = h.b.StatusMany(ctx, []string{id})
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Contains(t, err.Error(), "Too many requests")

	h.f.AddFault(&fakequantum.Fault{Method: "GET", Path: "/api/v1/jobs", Status: 200, Body: `{"jobs":"secret-ish`, Times: 1})
	_, err = h.b.StatusMany(ctx, []string{id})
	require.Error(t, err)
	assert.Equal(t, "GET /jobs: cannot read the answer: not the documented job list (body not in the documented error shape, not shown)", err.Error())

	// An expired token is replaced once; a CRN refused is ErrAuth.
	h.f.ExpireTokens()
	got, err := h.b.StatusMany(ctx, []string{id})
	require.NoError(t, err)
	assert.Equal(t, backends.Running, got[id].State)
	h.f.Mu.Lock()
	h.f.CRN = "crn:v1:other"
	h.f.Mu.Unlock()
	_, err = h.b.StatusMany(ctx, []string{id})
	require.ErrorIs(t, err, backends.ErrAuth)

	// A bare array is read too.
	h.f.AddFault(&fakequantum.Fault{Method: "GET", Path: "/api/v1/jobs", Status: http.StatusOK, Body: `[{"id":"` + id + `","state":{"status":"Completed"}}]`, Times: 1})
	got, err = h.b.StatusMany(ctx, []string{id})
	require.NoError(t, err)
	assert.Equal(t, backends.Done, got[id].State)
}
