package quantum

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

type harness struct {
	f     *fakequantum.Server
	b     *Backend
	creds *testutil.Creds
	logs  *testutil.SyncBuffer
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	f := fakequantum.New(t)
	h := &harness{f: f, logs: &testutil.SyncBuffer{}, creds: testutil.NewCreds(map[string]string{
		"username": f.CRN + "\n", "password": f.APIKey + "\n", "iam_url": f.URL + "/identity/token"})}
	h.b = h.newBackend(t)
	return h
}

func (h *harness) newBackend(t testing.TB) *Backend {
	be, err := New(backends.Config{URL: h.f.URL + "/api/v1/", Credentials: h.creds, HTTPClient: h.f.Client(),
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	return be.(*Backend)
}

const key = "br-0123456789abcdef0123"

const bell = `OPENQASM 3.0; include "stdgates.inc"; bit[2] c; h $0; cx $0,$1; c[0]=measure $0; c[1]=measure $1;`

var ctx = context.Background()

func samplerJob() backends.Job {
	return backends.Job{Name: "bell", Key: key, Properties: []byte(`{"program_id":"sampler","backend":"ibm_torino"}`),
		Parameters: []byte(`{"pubs":[["` + strings.ReplaceAll(bell, `"`, `\"`) + `",[],1024]],"options":{},"version":2}`)}
}

func TestHappyPath(t *testing.T) {
	h := newHarness(t)
	job := samplerJob()
	require.NoError(t, h.b.Validate(job))
	id, err := h.b.Submit(ctx, job)
	require.NoError(t, err)
	j := h.f.Jobs[id]
	require.NotNil(t, j)
	assert.Equal(t, "sampler", j.Program)
	assert.Equal(t, "ibm_torino", j.Backend)
	assert.Equal(t, []string{key}, j.Tags)
	assert.JSONEq(t, string(job.Parameters), string(j.Params))

	hd := h.f.Headers[len(h.f.Headers)-1]
	assert.True(t, strings.HasPrefix(hd.Get("Authorization"), "Bearer "))
	assert.Equal(t, h.f.CRN, hd.Get("Service-CRN"))
	assert.Equal(t, DefaultAPIVersion, hd.Get("IBM-API-Version"))

	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Pending, st.State)
	assert.Equal(t, "Queued", st.Raw)
	assert.False(t, st.SubmitTime.IsZero())

	h.f.Set(id, func(j *fakequantum.Job) { j.Status = "Running" })
	st, err = h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Running, st.State)

	h.f.Set(id, func(j *fakequantum.Job) { j.Status, j.Logs = "Completed", "2026-01-01T00:00:00Z INFO job started\n" })
	st, err = h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Done, st.State)
	assert.Equal(t, st.SubmitTime.Add(2*time.Second), st.StartTime, "times from the metrics")
	assert.Equal(t, st.SubmitTime.Add(5*time.Second), st.EndTime)

	for _, name := range Outputs {
		var out bytes.Buffer
		require.NoError(t, h.b.FetchOutput(ctx, id, name, &out), name)
		assert.NotEmpty(t, out.String(), name)
		if name == "results" {
			assert.True(t, json.Valid(out.Bytes()))
			assert.Contains(t, out.String(), `"__type__":"PrimitiveResult"`, "stored opaquely")
		}
	}
	err = h.b.FetchOutput(ctx, id, "interim_results", io.Discard)
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "s3upload.files", fe.Field)

	assert.Equal(t, 1, h.f.IAMCalls, "one IAM token serves every request")
	assert.NotContains(t, h.logs.String(), h.f.APIKey)
}

func TestInlineCircuitAndLegacyParams(t *testing.T) {
	h := newHarness(t)
	job := backends.Job{Key: key, Script: bell, Properties: []byte(`{"program":"sampler","backend_name":"ibm_kyiv","shots":100,"tags":["team-a"],"cost":600,"log_level":"INFO","private":true}`)}
	id, err := h.b.Submit(ctx, job)
	require.NoError(t, err)
	j := h.f.Jobs[id]
	assert.JSONEq(t, `{"pubs":[["`+strings.ReplaceAll(bell, `"`, `\"`)+`",[],100]],"version":2}`, string(j.Params))
	assert.Equal(t, []string{key, "team-a"}, j.Tags)
	assert.JSONEq(t, `600`, string(j.Body["cost"]))
	assert.JSONEq(t, `"INFO"`, string(j.Body["log_level"]))
	assert.JSONEq(t, `true`, string(j.Body["private"]))

	// The Bridge Operator's {"params":{…}} wrapper, and the program named by
	// a remote script.
	job = backends.Job{Key: "br-11111111111111111111", ScriptPath: "estimator", Properties: []byte(`{"backend":"ibm_torino"}`),
		Parameters: []byte(`{"params":{"pubs":[["c","ZZ"]],"version":2}}`)}
	id, err = h.b.Submit(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, "estimator", h.f.Jobs[id].Program)
	assert.JSONEq(t, `{"pubs":[["c","ZZ"]],"version":2}`, string(h.f.Jobs[id].Params))
}

func TestPropertiesRefused(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct{ props, params, script, path, field string }{
		{`[]`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"sampler"}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"backend":"ibm_torino"}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"hello-world","backend":"ibm_torino"}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"sampler","backend":"ibm_torino","partition":"x"}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"sampler","program":"sampler","backend":"ibm_torino"}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"sampler","backend":"ibm_torino","cost":20000}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"sampler","backend":"ibm_torino","api_version":"latest"}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"sampler","backend":"ibm_torino","iam_url":"iam.cloud.ibm.com"}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"sampler","backend":"ibm_torino","log_level":"LOUD"}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"sampler","backend":"ibm_torino","shots":10}`, `{"pubs":[]}`, "", "", "jobproperties"},
		{`{"program_id":"sampler","backend":"ibm_torino"}`, ``, "", "", "jobdata.jobParameters"},
		{`{"program_id":"sampler","backend":"ibm_torino"}`, `[1]`, "", "", "jobdata.jobParameters"},
		{`{"program_id":"sampler","backend":"ibm_torino"}`, ``, "print('hi')", "", "jobdata.jobScript"},
		{`{"program_id":"sampler","backend":"ibm_torino"}`, `{"pubs":[]}`, bell, "", "jobdata.jobScript"},
		{`{"program_id":"estimator","backend":"ibm_torino"}`, ``, bell, "", "jobdata.jobParameters"},
		{`{"backend":"ibm_torino"}`, `{"pubs":[]}`, "", "hello-world", "jobdata.jobScript"},
		{`{"program_id":"sampler","backend":"ibm_torino"}`, `{"pubs":[]}`, "", "estimator", "jobproperties"},
	} {
		job := backends.Job{Key: key, Properties: []byte(c.props), Parameters: []byte(c.params), Script: c.script, ScriptPath: c.path}
		err := h.b.Validate(job)
		var fe *backends.FieldError
		require.ErrorAs(t, err, &fe, "%+v", c)
		assert.Equal(t, c.field, fe.Field, "%+v: %v", c, err)
		_, err = h.b.Submit(ctx, job)
		assert.ErrorIs(t, err, backends.ErrInvalid)
	}
	assert.Empty(t, h.f.Jobs)
}

func TestStateMapping(t *testing.T) {
	h := newHarness(t)
	id, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)
	for _, c := range []struct {
		status, reason string
		code           any
		want           backends.State
		wantReason     string
	}{
		{"Queued", "", nil, backends.Pending, ""},
		{"Running", "", nil, backends.Running, ""},
		{"Completed", "", nil, backends.Done, ""},
		{"Failed", "Error running the job", 1517, backends.Failed, "1517"},
		{"Cancelled", "Job was cancelled by the user", nil, backends.Killed, ""},
		{"Cancelled", "Ran too long", 1305, backends.Failed, "1305"},
		{"Cancelled", "Ran too long", "1305", backends.Failed, "1305"},
		{"Cancelled - Ran too long", "", nil, backends.Failed, "1305"},
		{"CANCELLED", "", nil, backends.Killed, ""},
	} {
		h.f.Set(id, func(j *fakequantum.Job) { j.Status, j.Reason, j.ReasonCode = c.status, c.reason, c.code })
		st, err := h.b.Status(ctx, id)
		require.NoError(t, err, c.status)
		assert.Equal(t, c.want, st.State, "%+v", c)
		assert.Equal(t, c.status, st.Raw)
		assert.Equal(t, c.wantReason, st.Reason, "%+v", c)
		if c.reason != "" {
			assert.Contains(t, st.Message, c.reason)
		}
	}
	h.f.Set(id, func(j *fakequantum.Job) { j.Status = "Teleported" })
	_, err = h.b.Status(ctx, id)
	assert.ErrorContains(t, err, "Teleported")

	_, err = h.b.Status(ctx, "cnosuchjob0000000000")
	assert.ErrorIs(t, err, backends.ErrNotFound)
	assert.ErrorContains(t, err, "1291")
	assert.ErrorContains(t, err, "Job not found")
	_, err = h.b.Status(ctx, "../../x")
	assert.ErrorIs(t, err, backends.ErrNotFound)
}

func TestLegacyStatusAndReasonCodeSpelling(t *testing.T) {
	for body, want := range map[string]backends.Status{
		`{"id":"a","status":"Completed"}`: {State: backends.Done, Raw: "Completed"},
		`{"id":"a","status":"Cancelled - Ran too long"}`: {State: backends.Failed, Raw: "Cancelled - Ran too long", Reason: "1305",
			Message: "ran too long: the maximum execution time was reached", Category: backends.CategoryTimeout},
		`{"id":"a","state":{"status":"Cancelled","reasonCode":1305,"reason":"Ran too long"}}`: {State: backends.Failed, Raw: "Cancelled", Reason: "1305", Message: "Ran too long",
			Category: backends.CategoryTimeout},
	} {
		var j jobResponse
		require.NoError(t, json.Unmarshal([]byte(body), &j))
		st, err := j.status()
		require.NoError(t, err)
		assert.Equal(t, want, st, body)
	}
}

func TestTokenExpiryAndRefresh(t *testing.T) {
	h := newHarness(t)
	id, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)
	require.Equal(t, 1, h.f.IAMCalls)

	// Refreshed before it expires.
	h.b.now = func() time.Time { return time.Now().Add(56 * time.Minute) }
	_, err = h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 2, h.f.IAMCalls)
	assert.Zero(t, h.f.Count("401"))
	h.b.now = time.Now

	// Refused by the service (revoked early): a new token, the request again.
	before := h.f.Count("GET /api/v1/jobs/" + id)
	h.f.ExpireTokens()
	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Pending, st.State)
	assert.Equal(t, 3, h.f.IAMCalls)
	assert.Equal(t, before+2, h.f.Count("GET /api/v1/jobs/"+id))

	// A rotated API key gets a new token at once.
	h.f.Mu.Lock()
	h.f.APIKey = "rotated-key-abcdefgh"
	h.f.Mu.Unlock()
	h.creds.Set("password", "rotated-key-abcdefgh")
	_, err = h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 4, h.f.IAMCalls)

	// A refusal of a fresh token is ErrAuth.
	h.f.AddFault(&fakequantum.Fault{Method: "GET", Path: "/jobs/" + id, Status: 401, Body: `{"errors":[{"code":1010,"message":"Invalid token"}],"trace":"t"}`})
	_, err = h.b.Status(ctx, id)
	assert.ErrorIs(t, err, backends.ErrAuth)
}

func TestBadCredentials(t *testing.T) {
	h := newHarness(t)
	h.creds.Set("password", "wrong-key-123456")
	_, err := h.b.Submit(ctx, samplerJob())
	require.ErrorIs(t, err, backends.ErrAuth)
	assert.Contains(t, err.Error(), "BXNIM0415E")
	assert.NotContains(t, err.Error(), "wrong-key-123456")

	h.creds.Set("password", h.f.APIKey)
	h.creds.Set("username", "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:other::")
	_, err = h.b.Submit(ctx, samplerJob())
	assert.ErrorIs(t, err, backends.ErrAuth, "a wrong Service-CRN")

	h.creds.Set("username", "not-a-crn")
	assert.ErrorIs(t, h.b.Validate(samplerJob()), backends.ErrInvalid)
	assert.Empty(t, h.f.Jobs)
}

func TestKill(t *testing.T) {
	h := newHarness(t)
	id, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)
	h.f.Set(id, func(j *fakequantum.Job) { j.Status = "Running" })
	require.NoError(t, h.b.Cancel(ctx, id))
	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Killed, st.State)
	// Already ended: not an error.
	require.NoError(t, h.b.Cancel(ctx, id))
	assert.ErrorIs(t, h.b.Cancel(ctx, "cnosuchjob0000000000"), backends.ErrNotFound)
	h.f.AddFault(&fakequantum.Fault{Path: "/cancel", Status: 503, Body: `oops`, Times: 1})
	assert.ErrorIs(t, h.b.Cancel(ctx, id), backends.ErrTransient)
}

func TestFindByKeyAdoptsWithoutResubmitting(t *testing.T) {
	h := newHarness(t)
	other := samplerJob()
	other.Key = "br-ffffffffffffffffffff"
	_, err := h.b.Submit(ctx, other)
	require.NoError(t, err)
	id, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)

	b2 := h.newBackend(t) // a restarted invoke: no token yet
	found, err := b2.FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, id, found)
	assert.Len(t, h.f.Jobs, 2, "nothing resubmitted")
	assert.Contains(t, h.f.Requests, "GET /api/v1/jobs")

	found, err = b2.FindByKey(ctx, "br-00000000000000000000")
	require.NoError(t, err)
	assert.Empty(t, found)

	// A server that ignores the filter cannot make it adopt a stranger.
	h.f.IgnoreTags = true
	found, err = b2.FindByKey(ctx, "br-00000000000000000000")
	require.NoError(t, err)
	assert.Empty(t, found)
	found, err = b2.FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, id, found)

	h.f.AddFault(&fakequantum.Fault{Method: "GET", Path: "/jobs", Status: 500, Body: `{"errors":[{"code":5000,"message":"Internal error"}],"trace":"x"}`, Times: 1})
	_, err = b2.FindByKey(ctx, key)
	assert.ErrorIs(t, err, backends.ErrTransient)
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 5; i++ {
		job := samplerJob()
		job.Key = "br-" + strings.Repeat(string(rune('a'+i)), 20)
		_, err := h.b.Submit(ctx, job)
		require.NoError(t, err)
	}
	_, err := h.b.Submit(ctx, samplerJob())
	require.ErrorIs(t, err, backends.ErrTransient)
	var rl *RateLimitError
	require.ErrorAs(t, err, &rl)
	assert.Greater(t, rl.RetryAfter, 50*time.Second)
	assert.LessOrEqual(t, rl.RetryAfter, 61*time.Second)
	assert.Contains(t, err.Error(), "Retry-After: ")
	assert.Contains(t, err.Error(), "code 1008")
}

func TestTransientAndErrorAnswers(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault fakequantum.Fault
		want  error
		text  string
	}{
		{"500", fakequantum.Fault{Status: 500, Body: `{"errors":[{"code":5000,"message":"Internal error"}],"trace":"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}`}, backends.ErrTransient,
			"HTTP 500 from IBM Quantum: Internal error (code 5000) [trace 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0; IBM support can look it up]"},
		{"500 odd trace", fakequantum.Fault{Status: 500, Body: `{"errors":[{"code":5000,"message":"Internal error"}],"trace":"abc"}`}, backends.ErrTransient, "Internal error (code 5000)"},
		{"502 text", fakequantum.Fault{Status: 502, Body: `Bad Gateway`}, backends.ErrTransient, "HTTP 502 from IBM Quantum (body not in the documented error shape, not shown)"},
		{"503", fakequantum.Fault{Status: 503, Body: ``}, backends.ErrTransient, "HTTP 503 from IBM Quantum (body not in the documented error shape, not shown)"},
		{"429 date", fakequantum.Fault{Status: 429, Body: `{"errors":[{"code":"rate_limited","message":"Too many requests"}]}`, RetryAfter: "7"}, backends.ErrTransient, "Retry-After: 7s"},
		{"dropped", fakequantum.Fault{Drop: true}, backends.ErrTransient, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			id, err := h.b.Submit(ctx, samplerJob())
			require.NoError(t, err)
			fl := c.fault
			fl.Method, fl.Path = "GET", "/jobs/"+id
			h.f.AddFault(&fl)
			_, err = h.b.Status(ctx, id)
			require.ErrorIs(t, err, c.want)
			assert.ErrorContains(t, err, c.text)
			fl2 := c.fault
			fl2.Method, fl2.Path = "POST", "/api/v1/jobs"
			h.f.AddFault(&fl2)
			job := samplerJob()
			job.Key = "br-22222222222222222222"
			_, err = h.b.Submit(ctx, job)
			assert.ErrorIs(t, err, c.want)
		})
	}

	h := newHarness(t)
	job := samplerJob()
	job.Properties = []byte(`{"program_id":"sampler","backend":"ibm_nowhere"}`)
	_, err := h.b.Submit(ctx, job)
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "jobproperties", fe.Field)
	assert.Contains(t, fe.Msg, "code not_found", "string codes are reported")

	h.f.AddFault(&fakequantum.Fault{Method: "POST", Path: "/api/v1/jobs", Status: 400, Body: `{"errors":[{"code":1104,"message":"Invalid params: bad pub"}],"trace":"t"}`, Times: 1})
	_, err = h.b.Submit(ctx, samplerJob())
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "jobdata.jobParameters", fe.Field)

	h.f.AddFault(&fakequantum.Fault{Method: "POST", Path: "/api/v1/jobs", Status: 409, Body: `{"errors":[{"code":1352,"message":"Usage exceeds instance limit"}],"trace":"t"}`, Times: 1})
	_, err = h.b.Submit(ctx, samplerJob())
	require.Error(t, err)
	assert.NotErrorIs(t, err, backends.ErrTransient)
	assert.NotErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "Usage exceeds instance limit")

	h.f.AddFault(&fakequantum.Fault{Method: "POST", Path: "/api/v1/jobs", Status: 200, Body: `{"backend":"ibm_torino"}`, Times: 1})
	_, err = h.b.Submit(ctx, samplerJob())
	assert.ErrorContains(t, err, "without a job id")

	id, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)
	h.f.AddFault(&fakequantum.Fault{Method: "GET", Path: "/jobs/" + id, Status: 200, Body: `{"id":`, Times: 1})
	_, err = h.b.Status(ctx, id)
	assert.ErrorContains(t, err, "cannot read")

	h.f.AddFault(&fakequantum.Fault{Path: "/identity/token", Status: 503, Body: `{"errorCode":"BXNIM0001E","errorMessage":"down"}`, Times: 1})
	h.b.mu.Lock()
	h.b.token = ""
	h.b.mu.Unlock()
	_, err = h.b.Status(ctx, id)
	assert.ErrorIs(t, err, backends.ErrTransient, "IAM down is transient")
}

func TestPerRequestTimeout(t *testing.T) {
	h := newHarness(t)
	id, err := h.b.Submit(ctx, samplerJob())
	require.NoError(t, err)
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	be, err := New(backends.Config{URL: slow.URL + "/api/v1", Credentials: h.creds, HTTPClient: slow.Client()})
	require.NoError(t, err)
	b := be.(*Backend)
	b.requestTimeout = 100 * time.Millisecond
	start := time.Now()
	_, err = b.Status(ctx, id)
	assert.ErrorIs(t, err, backends.ErrTransient)
	assert.Less(t, time.Since(start), time.Second)
}

func TestURLAndDefaults(t *testing.T) {
	be, err := New(backends.Config{})
	require.NoError(t, err)
	assert.Equal(t, DefaultURL, be.(*Backend).base)
	be, err = New(backends.Config{URL: "https://eu-de.quantum.cloud.ibm.com/api/v1/"})
	require.NoError(t, err)
	assert.Equal(t, "https://eu-de.quantum.cloud.ibm.com/api/v1", be.(*Backend).base)
	for _, u := range []string{"quantum.cloud.ibm.com", "ftp://x", "https://x/?a=1"} {
		_, err := New(backends.Config{URL: u})
		assert.ErrorIs(t, err, backends.ErrInvalid, u)
	}
}

func TestIAMURLAndAPIVersionFromProperties(t *testing.T) {
	h := newHarness(t)
	h.creds.Set("iam_url", "https://127.0.0.1:1/unused") // jobproperties wins
	job := samplerJob()
	job.Properties = []byte(`{"program_id":"sampler","backend":"ibm_torino","iam_url":"` + h.f.URL + `/identity/token","api_version":"2026-04-15"}`)
	require.NoError(t, h.b.Validate(job))
	_, err := h.b.Submit(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, "2026-04-15", h.f.Headers[len(h.f.Headers)-1].Get("IBM-API-Version"))

	job.Key = "br-33333333333333333333"
	job.Properties = []byte(`{"program_id":"sampler","backend":"ibm_torino","api_version":"2020-01-01"}`)
	_, err = h.b.Submit(ctx, job)
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe, "the service refuses an unknown API version")
	assert.Contains(t, fe.Msg, "IBM-API-Version")
}

// TestReferenceExamples feeds the literal examples of backend-apis.md §4 to
// the fake and to the client.
func TestReferenceExamples(t *testing.T) {
	h := newHarness(t)
	t.Run("IAM request accepted by the fake, answer read by the client", func(t *testing.T) { refIAMToken(t, h) })
	t.Run("submit example accepted by the fake", func(t *testing.T) { refSubmitExample(t, h) })
	t.Run("answers read by the client", refAnswers)
}

// refIAMToken: IAM request accepted by the fake, answer read by the client.
func refIAMToken(t *testing.T, h *harness) {
	resp, err := h.f.Client().Post(h.f.URL+"/identity/token", "application/x-www-form-urlencoded",
		strings.NewReader("grant_type=urn:ibm:params:oauth:grant-type:apikey&apikey="+h.f.APIKey))
	require.NoError(t, err)
	var tok map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
	resp.Body.Close()
	for _, k := range []string{"access_token", "refresh_token", "token_type", "expires_in", "expiration", "scope"} {
		assert.Contains(t, tok, k)
	}
	var t2 tokenAnswer
	require.NoError(t, json.Unmarshal([]byte(`{"access_token":"…","refresh_token":"not_supported","token_type":"Bearer","expires_in":3600,"expiration":1900000000,"scope":"ibm_openid"}`), &t2))
	assert.Equal(t, int64(3600), t2.ExpiresIn)
	assert.Equal(t, int64(1900000000), t2.Expiration)
}

// refSubmitExample: submit example accepted by the fake.
func refSubmitExample(t *testing.T, h *harness) {
	b, err := h.b.bearer(ctx, h.f.APIKey)
	require.NoError(t, err)
	body := `{"program_id":"sampler","backend":"ibm_torino",
 "params":{"pubs":[["OPENQASM 3.0; include \"stdgates.inc\"; bit[2] c; h $0; cx $0,$1; c[0]=measure $0; c[1]=measure $1;",[],1024]],
           "options":{},"version":2}}`
	req, _ := http.NewRequest("POST", h.f.URL+"/api/v1/jobs", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b)
	req.Header.Set("Service-CRN", h.f.CRN)
	req.Header.Set("IBM-API-Version", "2025-05-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.f.Client().Do(req)
	require.NoError(t, err)
	var out map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "ibm_torino", out["backend"])
	assert.NotEmpty(t, out["id"])
	// Without the optional IBM-API-Version the latest is used.
	req, _ = http.NewRequest("GET", h.f.URL+"/api/v1/jobs/"+out["id"], nil)
	req.Header.Set("Authorization", "Bearer "+b)
	req.Header.Set("Service-CRN", h.f.CRN)
	resp, err = h.f.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
}

// refAnswers: answers read by the client.
func refAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/identity/token":
			io.WriteString(w, `{"access_token":"tok","refresh_token":"not_supported","token_type":"Bearer","expires_in":3600,"expiration":`+
				jsonInt(time.Now().Add(time.Hour).Unix())+`,"scope":"ibm_openid"}`)
		case r.Method == "POST" && r.URL.Path == "/api/v1/jobs":
			io.WriteString(w, `{"id":"c5dge2d3rn7breq27i9g","backend":"ibm_torino"}`)
		case r.URL.Path == "/api/v1/jobs/c5dge2d3rn7breq27i9g/cancel":
			w.WriteHeader(204)
		case r.URL.Path == "/api/v1/jobs/c5dge2d3rn7breq27i9g":
			io.WriteString(w, `{"id":"c5dge2d3rn7breq27i9g","backend":"ibm_torino","state":{"status":"Cancelled","reason":"Ran too long","reason_code":1305,"reason_solution":"Increase the max execution time"},"status":"Cancelled","program":{"id":"sampler"},"created":"2026-01-02T03:04:05.678Z","tags":["br-0123456789abcdef0123"],"usage":{"seconds":10800}}`)
		case r.URL.Path == "/api/v1/jobs/c5dge2d3rn7breq27i9g/metrics":
			io.WriteString(w, `{"timestamps":{"created":"2026-01-02T03:04:05.678Z","running":"2026-01-02T03:05:00Z","finished":"2026-01-02T06:05:00Z"},"usage":{"quantum_seconds":10800,"seconds":10800}}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, `{"errors":[{"code":1291,"message":"Job not found. Job ID: x","solution":"…","more_info":"https://cloud.ibm.com/apidocs/quantum-computing#error-handling"}],"trace":"<uuid>"}`)
		}
	}))
	defer srv.Close()
	creds := testutil.NewCreds(map[string]string{"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::", "apikey": "k", "iam_url": srv.URL + "/identity/token"})
	be, err := New(backends.Config{URL: srv.URL + "/api/v1", Credentials: creds})
	require.NoError(t, err)
	id, err := be.Submit(ctx, samplerJob())
	require.NoError(t, err)
	assert.Equal(t, "c5dge2d3rn7breq27i9g", id)
	st, err := be.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Failed, st.State)
	assert.Equal(t, "1305", st.Reason)
	assert.Equal(t, "Ran too long (Increase the max execution time)", st.Message)
	assert.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC), st.SubmitTime)
	assert.Equal(t, time.Date(2026, 1, 2, 6, 5, 0, 0, time.UTC), st.EndTime)
	require.NoError(t, be.Cancel(ctx, id))
	_, err = be.Status(ctx, "x1")
	require.ErrorIs(t, err, backends.ErrNotFound)
	assert.Equal(t, "GET /jobs/x1: HTTP 404 from IBM Quantum: Job not found. Job ID: x (code 1291): job not found", err.Error())
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestSecretsStayOut(t *testing.T) {
	h := newHarness(t)
	h.f.AddFault(&fakequantum.Fault{Path: "/identity/token", Status: 400, Body: `{"errorCode":"BXNIM0415E","errorMessage":"Provided API key could not be found."}`, Times: 1})
	_, err := h.b.Submit(ctx, samplerJob())
	require.Error(t, err)
	assert.True(t, errors.Is(err, backends.ErrAuth))
	assert.NotContains(t, err.Error(), h.f.APIKey)
	assert.NotContains(t, h.logs.String(), h.f.APIKey)
}

// TestIBMPythonProgramIsToldToUsePrimitives: IBM's Quantum samples upload a
// Python program; custom programs are retired, and the message says what
// to do instead. An inline circuit without program_id names program_id.
func TestIBMPythonProgramIsToldToUsePrimitives(t *testing.T) {
	h := newHarness(t)
	err := h.b.Validate(backends.Job{Key: key, Properties: []byte(`{"backend":"ibm_torino"}`),
		Script: "from qiskit_ibm_runtime import QiskitRuntimeService\nprint('hello')\n"})
	testutil.RequireFieldError(t, err, "jobdata.jobScript")
	assert.Contains(t, err.Error(), "retired custom programs")
	assert.Contains(t, err.Error(), "sampler or estimator")
	err = h.b.Validate(backends.Job{Key: key, Properties: []byte(`{"backend":"ibm_torino"}`), Script: bell})
	testutil.RequireFieldError(t, err, "jobproperties")
	assert.Contains(t, err.Error(), "program_id is required with an inline OpenQASM circuit")
}
