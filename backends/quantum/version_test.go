package quantum

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
)

// day is a moment of date d (YYYY-MM-DD), noon UTC.
func day(t *testing.T, d string) time.Time {
	tm, err := time.Parse(time.DateOnly, d)
	require.NoError(t, err)
	return tm.Add(12 * time.Hour)
}

// Every request of a job with no api_version carries the live version.
func TestDefaultAPIVersionIsTheLiveOne(t *testing.T) {
	h := newHarness(t)
	id, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)
	h.f.Set(id, func(j *fakequantum.Job) { j.Status = "Completed" })
	_, err = h.b.Status(ctx, id) // GET /jobs/{id} and /metrics
	require.NoError(t, err)
	require.NoError(t, h.b.FetchOutput(ctx, id, "results", io.Discard))
	for i, hd := range h.f.Headers {
		if h.f.Requests[i] != "POST /identity/token" {
			assert.Equal(t, "2026-04-15", hd.Get("IBM-API-Version"), h.f.Requests[i])
		}
	}
	assert.NotContains(t, h.logs.String(), "sunset")
}

// A pinned 2025-05-01, five weeks before its sunset: sent as asked, the job
// runs, and the user is told in the log (once) and in every status message.
func TestPinnedVersionNearItsSunsetIsWarnedAbout(t *testing.T) {
	h := newHarness(t)
	h.b.now = func() time.Time { return day(t, "2026-11-25") }
	job := samplerJob()
	job.Properties = []byte(`{"program_id":"sampler","backend":"ibm_torino","api_version":"2025-05-01"}`)
	require.NoError(t, h.b.Validate(job))
	id, err := h.b.Submit(ctx, job)
	require.NoError(t, err, "a deprecated version is no reason to fail")
	assert.Equal(t, "2025-05-01", h.f.Headers[len(h.f.Headers)-1].Get("IBM-API-Version"), "the override is kept")
	assert.Equal(t, 1, strings.Count(h.logs.String(), "level=WARN"), h.logs.String())
	assert.Contains(t, h.logs.String(), "IBM-API-Version 2025-05-01 (jobproperties' api_version) is deprecated and reaches its sunset on 2027-01-01 (in 37 days): remove api_version from jobproperties to use 2026-04-15")

	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Pending, st.State)
	assert.Equal(t, "IBM Quantum job "+id+" is Queued; note: IBM-API-Version 2025-05-01 (jobproperties' api_version) is deprecated and reaches its sunset on 2027-01-01 (in 37 days): remove api_version from jobproperties to use 2026-04-15", st.Message)
	h.f.Set(id, func(j *fakequantum.Job) { j.Status, j.Reason, j.ReasonCode = "Failed", "Error in transpilation", 1517 })
	st, err = h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(st.Message, "Error in transpilation; note: IBM-API-Version 2025-05-01"), st.Message)
}

// Past the sunset the service refuses the version (by the fake's clock); the
// backend warned first, and the refusal names the header.
func TestPinnedVersionPastItsSunset(t *testing.T) {
	h := newHarness(t)
	after := day(t, "2027-01-02")
	h.b.now = func() time.Time { return after }
	h.f.Now = func() time.Time { return after }
	job := samplerJob()
	job.Properties = []byte(`{"program_id":"sampler","backend":"ibm_torino","api_version":"2025-05-01"}`)
	_, err := h.b.Submit(ctx, job)
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "jobproperties", fe.Field)
	assert.Contains(t, fe.Msg, "IBM-API-Version")
	assert.Contains(t, h.logs.String(), "IBM-API-Version 2025-05-01 (jobproperties' api_version) passed its sunset on 2027-01-01; the service may refuse it")
}

func TestVersionWarning(t *testing.T) {
	for _, c := range []struct{ v, now, want string }{
		{"", "2026-11-25", ""},
		{"2026-04-15", "2030-01-01", ""},
		{"2027-06-01", "2026-11-25", ""}, // newer than known: the service decides
		{"2026-03-15", "2026-11-25", ""}, // 110 days left
		{"2026-03-15", "2026-12-25", "sunset on 2027-03-15 (in 80 days)"},
		{"2026-02-01", "2026-11-25", "sunset on 2027-02-01 (in 68 days)"},
		{"2025-05-01", "2027-01-01", "passed its sunset on 2027-01-01"},
		{"2024-01-01", "2026-11-25", "IBM-API-Version 2024-01-01 (jobproperties' api_version) was not among the versions IBM Quantum accepted on 2026-11-25"},
	} {
		got := versionWarning(c.v, day(t, c.now))
		if c.want == "" {
			assert.Empty(t, got, c.v)
		} else {
			assert.Contains(t, got, c.want, c.v)
		}
	}
}

// The fake speaks 2026-04-15: what that version dropped is gone, and the
// backend reads its answers (times from /metrics without usage).
func TestWireShape20260415(t *testing.T) {
	h := newHarness(t)
	id, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)
	h.f.Set(id, func(j *fakequantum.Job) { j.Status = "Completed" })
	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, st.SubmitTime.Add(2*time.Second), st.StartTime)
	assert.Equal(t, st.SubmitTime.Add(5*time.Second), st.EndTime)

	get := func(path string) (int, map[string]json.RawMessage) {
		tok, err := h.b.bearer(ctx, h.f.APIKey)
		require.NoError(t, err)
		req, _ := http.NewRequest(http.MethodGet, h.f.URL+"/api/v1"+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Service-CRN", h.f.CRN)
		req.Header.Set("IBM-API-Version", "2026-04-15")
		resp, err := h.f.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var m map[string]json.RawMessage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		return resp.StatusCode, m
	}
	code, m := get("/jobs/" + id + "/transpiled_circuits")
	assert.Equal(t, http.StatusNotFound, code, "dropped on 2026-02-01")
	assert.Contains(t, m, "errors")
	code, m = get("/jobs/" + id + "/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, m, "usage")
	assert.NotContains(t, m, "bss")
	assert.JSONEq(t, "2500000000", string(m["circuits_execution_time_ns"]))
	_, m = get("/jobs/" + id)
	assert.NotContains(t, m, "usage")
	assert.NotContains(t, m, "bss")
	_, m = get("/jobs?tags=" + key)
	assert.NotContains(t, string(m["jobs"]), `"usage"`)
	assert.NotContains(t, string(m["jobs"]), `"bss"`)

	var out bytes.Buffer
	require.NoError(t, h.b.FetchOutput(ctx, id, "metrics", &out))
	assert.Contains(t, out.String(), `"circuits_execution_time_ns"`)
	err = h.b.FetchOutput(ctx, id, "transpiled_circuits", io.Discard)
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe, "not offered: the service dropped it")
	assert.Equal(t, "s3upload.files", fe.Field)
}
