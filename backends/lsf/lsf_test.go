package lsf

import (
	"bytes"
	"context"
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
	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

type harness struct {
	f     *fakelsf.Server
	b     *Backend
	creds *testutil.Creds
	logs  *testutil.SyncBuffer
}

// newHarness runs the fake over TLS, as the samples' https://host:8443 does;
// the client trusts the fake's certificate as a CA bundle would.
func newHarness(t testing.TB) *harness {
	t.Helper()
	f := fakelsf.New(t, true)
	h := &harness{f: f, creds: testutil.NewCreds(map[string]string{"username": f.User, "password": f.Pass + "\n"}), logs: &testutil.SyncBuffer{}}
	h.b = h.newBackend(t)
	return h
}

func (h *harness) newBackend(t testing.TB) *Backend {
	be, err := New(backends.Config{URL: h.f.URL, Credentials: h.creds, HTTPClient: h.f.Client(),
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	return be.(*Backend)
}

const key = "br-0123456789abcdef0123"

func testJob(script string) backends.Job {
	return backends.Job{Name: "hello", Key: key, Script: script}
}

var ctx = context.Background()

func (h *harness) submit(t *testing.T, job backends.Job) (string, *fakelsf.Submit) {
	t.Helper()
	id, err := h.b.Submit(ctx, job)
	require.NoError(t, err)
	h.f.Mu.Lock()
	defer h.f.Mu.Unlock()
	return id, h.f.Submits[len(h.f.Submits)-1]
}

func jobID(t *testing.T, id string) int {
	n := int(idNum(id))
	require.NotZero(t, n)
	return n
}

func TestHappyPath(t *testing.T) {
	h := newHarness(t)
	script := "#!/bin/bash\necho \"hello <world> & 'friends'\"\n"
	job := testJob(script)
	job.Properties = []byte(`{"queue":"normal","outputFile":"out.txt","runLimitMinute":30}`)
	job.Parameters = []byte(`{"n":1}`)
	require.NoError(t, h.b.Validate(job))
	id, s := h.submit(t, job)
	assert.Equal(t, "1234", id)
	assert.Equal(t, "generic", s.App)
	assert.Equal(t, "umask 077 && chmod 700 ./"+key+".sh && ./"+key+".sh", s.Params["COMMANDTORUN"].Value, "the job's files are its owner's only")
	assert.Equal(t, key+"-hello", s.Params["JOB_NAME"].Value)
	assert.Equal(t, "normal", s.Params["QUEUE"].Value)
	assert.Equal(t, "out.txt", s.Params["OUTPUT_FILE"].Value)
	assert.Equal(t, "30", s.Params["RUNLIMITMINUTE"].Value)
	assert.Equal(t, fakelsf.Param{Value: key + ".sh,upload", Typ: "file"}, s.Params[key+".sh"])
	assert.Equal(t, script, string(s.Files[key+".sh"]), "the script arrives byte for byte")
	assert.Equal(t, `{"n":1}`, string(s.Files["bridge-parameters.json"]))

	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Pending, st.State)
	assert.Equal(t, "PEND", st.Raw)
	assert.False(t, st.SubmitTime.IsZero())

	now := time.Now().UTC().Truncate(time.Second)
	h.f.Set(jobID(t, id), func(j *fakelsf.Job) { j.Status, j.Start = "RUN", now })
	st, err = h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Running, st.State)
	assert.Equal(t, now, st.StartTime)

	h.f.Set(jobID(t, id), func(j *fakelsf.Job) {
		z := 0
		j.Status, j.End, j.ExitStatus = "DONE", now.Add(time.Minute), &z
		j.Outputs[j.Cwd+"/out.txt"] = []byte("result\x00\xff")
		j.Outputs["/abs/path/x.log"] = []byte("log")
	})
	st, err = h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Done, st.State)
	require.NotNil(t, st.ExitCode)
	assert.Equal(t, 0, *st.ExitCode)
	assert.Equal(t, now.Add(time.Minute), st.EndTime)

	var out bytes.Buffer
	require.NoError(t, h.b.FetchOutput(ctx, id, "out.txt", &out))
	assert.Equal(t, "result\x00\xff", out.String())
	out.Reset()
	require.NoError(t, h.b.FetchOutput(ctx, id, "/abs/path/x.log", &out))
	assert.Equal(t, "log", out.String())
	err = h.b.FetchOutput(ctx, id, "missing.txt", &out)
	assert.ErrorIs(t, err, backends.ErrNotFound)

	assert.Equal(t, 1, h.f.Logons, "one logon serves every request")
	assert.NotContains(t, h.logs.String(), h.f.Pass)
}

func TestScriptWithoutShebangAndRemoteScript(t *testing.T) {
	h := newHarness(t)
	_, s := h.submit(t, testJob("echo hi\n"))
	assert.Equal(t, "umask 077 && /bin/sh ./"+key+".sh", s.Params["COMMANDTORUN"].Value)

	job := backends.Job{Key: key, ScriptPath: "/home/u/run.sh --fast"}
	_, s = h.submit(t, job)
	assert.Equal(t, "umask 077 && /home/u/run.sh --fast", s.Params["COMMANDTORUN"].Value)
	assert.Equal(t, key, s.Params["JOB_NAME"].Value)
	assert.Empty(t, s.Files)
}

func TestIBMSampleAliases(t *testing.T) {
	h := newHarness(t)
	job := testJob("#!/bin/sh\necho $PWD\n")
	// samples/core/operator/job1lsf.yaml of IBM/Bridge-Operator
	job.Properties = []byte(`{"NodesNumber": "1", "Queue": "normal", "RunLimitHour": "1", "RunLimitMinute": "0",
	 "ErrorFileName": "sample.err", "OutputFileName": "sample.out"}`)
	_, s := h.submit(t, job)
	want := map[string]string{"QUEUE": "normal", "RUNLIMITHOUR": "1", "RUNLIMITMINUTE": "0", "ERROR_FILE": "sample.err",
		"OUTPUT_FILE": "sample.out", "EXTRA_PARAMS": "-nnodes 1"}
	for k, v := range want {
		assert.Equal(t, v, s.Params[k].Value, k)
	}
}

func TestExtraParamsAndCustomParams(t *testing.T) {
	h := newHarness(t)
	job := testJob("#!/bin/sh\n")
	job.Properties = []byte(`{"extraParams":"-R \"span[hosts=1]\" -n 4","numnodes":2,"jobName":"sim <1> & co","params":{"MY_PARAM":"a<b>&c","N":3}}`)
	_, s := h.submit(t, job)
	assert.Equal(t, `-R "span[hosts=1]" -n 4 -nnodes 2`, s.Params["EXTRA_PARAMS"].Value)
	assert.Equal(t, key+"-sim <1> & co", s.Params["JOB_NAME"].Value, "values are XML-escaped on the wire")
	assert.Equal(t, "a<b>&c", s.Params["MY_PARAM"].Value)
	assert.Equal(t, "3", s.Params["N"].Value)
}

func TestInputsAreUploaded(t *testing.T) {
	h := newHarness(t)
	job := testJob("#!/bin/sh\n")
	for _, in := range []struct{ name, data string }{{"data/a.csv", "1,2\n"}, {"b.bin", "\x00\x01"}} {
		data := in.data
		job.Inputs = append(job.Inputs, backends.InputFile{Name: in.name, Size: int64(len(data)),
			Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(data)), nil }})
	}
	assert.True(t, h.b.StagesInputs())
	_, s := h.submit(t, job)
	assert.Equal(t, "1,2\n", string(s.Files["a.csv"]))
	assert.Equal(t, "\x00\x01", string(s.Files["b.bin"]))
	assert.Equal(t, fakelsf.Param{Value: "a.csv,upload", Typ: "file"}, s.Params["a.csv"])

	dup := testJob("#!/bin/sh\n")
	dup.Inputs = []backends.InputFile{{Name: "x/a"}, {Name: "y/a"}}
	assert.ErrorIs(t, h.b.Validate(dup), backends.ErrInvalid)
}

func TestPropertiesRefused(t *testing.T) {
	h := newHarness(t)
	for _, props := range []string{
		`[1]`, `{"partition":"x"}`, `{"runLimitMinute":75}`, `{"runLimitHour":"-1"}`, `{"RunLimitHour":"x"}`,
		`{"Queue":"a","queue":"b"}`, `{"kill":"true"}`, `{"COMMANDTORUN":"ls"}`,
		`{"params":{"bad id":"x"}}`, `{"params":{"QUEUE":"x"}}`, `{"queue":{"a":1}}`, `{"numNodes":0}`, `{"queue":"a\nb"}`,
	} {
		job := testJob("#!/bin/sh\n")
		job.Properties = []byte(props)
		err := h.b.Validate(job)
		require.ErrorIs(t, err, backends.ErrInvalid, props)
		var fe *backends.FieldError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "jobproperties", fe.Field, props)
		_, err = h.b.Submit(ctx, job)
		assert.ErrorIs(t, err, backends.ErrInvalid, props)
	}
	assert.Empty(t, h.f.Submits, "nothing was submitted")

	err := h.b.Validate(backends.Job{Key: key})
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "jobdata.jobScript", fe.Field)
}

// IBM's pod sent pastid and inputfiledirectory to upload inputs through an
// old job; a migrated record keeps them, so they are accepted and unused.
func TestIBMUploadPropertiesAreAcceptedAndUnused(t *testing.T) {
	h := newHarness(t)
	job := testJob("#!/bin/sh\n")
	job.Properties = []byte(`{"queue":"normal","pastid":"12","inputfiledirectory":"/tmp/in"}`)
	require.NoError(t, h.b.Validate(job))
	_, s := h.submit(t, job)
	assert.Equal(t, "normal", s.Params["QUEUE"].Value)
	for id, p := range s.Params {
		assert.NotContains(t, p.Value, "/tmp/in", id)
		assert.NotContains(t, []string{"pastid", "inputfiledirectory", "PASTID"}, id)
	}
}

func TestStateMapping(t *testing.T) {
	h := newHarness(t)
	id, _ := h.submit(t, testJob("#!/bin/sh\n"))
	n := jobID(t, id)
	ip := func(i int) *int { return &i }
	for _, c := range []struct {
		status, info string
		exit         *int
		want         backends.State
		wantExit     *int
	}{
		{"PEND", "", nil, backends.Pending, nil},
		{"WAIT", "", nil, backends.Pending, nil},
		{"PROV", "", nil, backends.Pending, nil},
		{"RUN", "", nil, backends.Running, nil},
		{"PSUSP", "", nil, backends.Suspended, nil},
		{"USUSP", "", nil, backends.Suspended, nil},
		{"SSUSP", "", nil, backends.Suspended, nil},
		{"DONE", "", ip(0), backends.Done, ip(0)},
		{"DONE", "", nil, backends.Done, ip(0)},
		{"EXIT", "", ip(3), backends.Failed, ip(3)},
		{"EXIT", "", ip(768), backends.Failed, ip(3)},
		{"EXIT", "TERM_RUNLIMIT", ip(140), backends.Failed, ip(140)},
		{"EXIT", "TERM_MEMLIMIT", ip(137), backends.Failed, ip(137)},
		{"EXIT", "TERM_OWNER", ip(130), backends.Killed, ip(130)},
		{"EXIT", "TERM_ADMIN", ip(130), backends.Killed, ip(130)},
		{"EXIT", "TERM_FORCE_OWNER", ip(137), backends.Killed, ip(137)},
		{"EXIT", "14", ip(130), backends.Killed, ip(130)},
		{"EXIT", "", ip(130), backends.Killed, ip(130)},
		{"ZOMBI", "", nil, backends.Killed, nil},
		{"UNKWN", "", nil, backends.Unknown, nil},
	} {
		h.f.Set(n, func(j *fakelsf.Job) { j.Status, j.ExitInfo, j.ExitStatus = c.status, c.info, c.exit })
		st, err := h.b.Status(ctx, id)
		require.NoError(t, err, c.status)
		assert.Equal(t, c.want, st.State, "%s %s %v", c.status, c.info, c.exit)
		assert.Equal(t, c.status, st.Raw)
		assert.Equal(t, c.wantExit, st.ExitCode, "%s %s", c.status, c.info)
		if c.info != "" {
			assert.Equal(t, c.info, st.Reason)
		}
	}
	h.f.Set(n, func(j *fakelsf.Job) { j.Status = "WEIRD" })
	_, err := h.b.Status(ctx, id)
	assert.ErrorContains(t, err, "WEIRD")
}

func TestHistoryFallback(t *testing.T) {
	h := newHarness(t)
	ids := map[string]string{}
	for _, name := range []string{"done", "failed", "killed", "forgotten"} {
		job := testJob("#!/bin/sh\n")
		job.Name = name
		id, err := h.b.Submit(ctx, job)
		require.NoError(t, err)
		ids[name] = id
	}
	require.NoError(t, h.b.Cancel(ctx, ids["killed"]))
	h.f.Set(jobID(t, ids["done"]), func(j *fakelsf.Job) { z := 0; j.Status, j.ExitStatus = "DONE", &z })
	h.f.Set(jobID(t, ids["failed"]), func(j *fakelsf.Job) { c := 2; j.Status, j.ExitStatus = "EXIT", &c })
	for _, id := range ids {
		h.f.Set(jobID(t, id), func(j *fakelsf.Job) { j.Left = true })
	}
	h.f.Set(jobID(t, ids["forgotten"]), func(j *fakelsf.Job) { j.Forgotten = true })

	st, err := h.b.Status(ctx, ids["done"])
	require.NoError(t, err)
	assert.Equal(t, backends.Done, st.State)
	st, err = h.b.Status(ctx, ids["failed"])
	require.NoError(t, err)
	assert.Equal(t, backends.Failed, st.State)
	require.NotNil(t, st.ExitCode)
	assert.Equal(t, 2, *st.ExitCode)
	st, err = h.b.Status(ctx, ids["killed"])
	require.NoError(t, err)
	assert.Equal(t, backends.Killed, st.State)
	_, err = h.b.Status(ctx, ids["forgotten"])
	assert.ErrorIs(t, err, backends.ErrNotFound)
	assert.Positive(t, h.f.Count("GET /platform/ws/jobhistory"))
}

func TestTokenExpiryAndRefresh(t *testing.T) {
	h := newHarness(t)
	id, _ := h.submit(t, testJob("#!/bin/sh\n"))
	assert.Equal(t, 1, h.f.Logons)

	// The server expires the token early: the refused request is sent again
	// after a new logon, transparently.
	h.f.ExpireTokens()
	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Pending, st.State)
	assert.Equal(t, 2, h.f.Logons)

	// Before the expiry embedded in the token, the client logs on again
	// without waiting for a refusal.
	before := h.f.Count("GET")
	h.b.now = func() time.Time { return time.Now().Add(59*time.Minute + 30*time.Second) }
	_, err = h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 3, h.f.Logons)
	assert.Equal(t, before+1, h.f.Count("GET"), "no refused request")

	// 403 counts as a refusal too; a refusal of a fresh token is ErrAuth.
	h.f.AddFault(&fakelsf.Fault{Method: "GET", Path: "/ws/jobs/" + id, Status: 403, Body: `{"message":"Access denied"}`})
	_, err = h.b.Status(ctx, id)
	assert.ErrorIs(t, err, backends.ErrAuth)
	assert.Equal(t, 4, h.f.Logons)
}

func TestBadCredentials(t *testing.T) {
	h := newHarness(t)
	h.creds.Set("password", "wrong-password")
	_, err := h.b.Submit(ctx, testJob("#!/bin/sh\n"))
	require.ErrorIs(t, err, backends.ErrAuth)
	assert.NotContains(t, err.Error(), "wrong-password")
	assert.Empty(t, h.f.Submits)

	h.creds.Set("username", "")
	_, err = h.b.Status(ctx, "1")
	assert.ErrorIs(t, err, backends.ErrInvalid)
	h.creds.Delete("password")
	assert.ErrorIs(t, h.b.Validate(testJob("#!/bin/sh\n")), backends.ErrInvalid)

	// A rotated Secret is picked up at the next logon.
	h.creds.Set("username", h.f.User)
	h.creds.Set("password", h.f.Pass)
	_, err = h.b.Submit(ctx, testJob("#!/bin/sh\n"))
	require.NoError(t, err)
}

func TestKill(t *testing.T) {
	h := newHarness(t)
	id, _ := h.submit(t, testJob("#!/bin/sh\n"))
	h.f.Set(jobID(t, id), func(j *fakelsf.Job) { j.Status = "RUN" })
	require.NoError(t, h.b.Cancel(ctx, id))
	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Killed, st.State)
	assert.Equal(t, 1, h.f.Count("POST /platform/ws/jobs/kill"))

	// Cancelling a job that has ended is not an error.
	require.NoError(t, h.b.Cancel(ctx, id))
	// An unknown job is.
	assert.ErrorIs(t, h.b.Cancel(ctx, "999999"), backends.ErrNotFound)
	assert.ErrorIs(t, h.b.Cancel(ctx, "0"), backends.ErrNotFound)
}

func TestKillFallsBackToUserCmd(t *testing.T) {
	h := newHarness(t)
	h.f.JacsKill = false
	id, _ := h.submit(t, testJob("#!/bin/sh\n"))
	require.NoError(t, h.b.Cancel(ctx, id))
	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Killed, st.State)
	id2, _ := h.submit(t, testJob("#!/bin/sh\n"))
	require.NoError(t, h.b.Cancel(ctx, id2))
	assert.Equal(t, 1, h.f.Count("POST /platform/ws/jobs/kill"), "the missing call is tried once")
	assert.Equal(t, 2, h.f.Count("POST /platform/ws/userCmd"))

	id3, _ := h.submit(t, testJob("#!/bin/sh\n"))
	h.f.AddFault(&fakelsf.Fault{Path: "/ws/userCmd", Status: 503, Body: `{"message":"busy"}`, Times: 1})
	assert.ErrorIs(t, h.b.Cancel(ctx, id3), backends.ErrTransient)
}

func TestFindByKeyAdoptsWithoutResubmitting(t *testing.T) {
	h := newHarness(t)
	other := testJob("#!/bin/sh\n")
	other.Key = "br-ffffffffffffffffffff"
	_, err := h.b.Submit(ctx, other)
	require.NoError(t, err)
	id, _ := h.submit(t, testJob("#!/bin/sh\n"))

	// A restarted invoke: a fresh backend (no session) finds the job.
	b2 := h.newBackend(t)
	found, err := b2.FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, id, found)
	assert.Len(t, h.f.Submits, 2, "nothing resubmitted")

	found, err = b2.FindByKey(ctx, "br-00000000000000000000")
	require.NoError(t, err)
	assert.Empty(t, found, "a 404 'no jobs match' is no job")

	// The key is a prefix of the name, never a substring match on another key.
	h.f.JobKey = "Job"
	found, err = b2.FindByKey(ctx, "br-0123456789abcdef012")
	require.NoError(t, err)
	assert.Empty(t, found)

	h.f.AddFault(&fakelsf.Fault{Method: "GET", Path: "/ws/jobs", Status: 502, Body: "bad gateway", ContentType: "text/plain", Times: 1})
	_, err = b2.FindByKey(ctx, key)
	assert.ErrorIs(t, err, backends.ErrTransient)
}

func TestJSONShapesTolerated(t *testing.T) {
	h := newHarness(t)
	h.f.IDAsString, h.f.JobKey, h.f.Arrays = true, "Job", true
	id, _ := h.submit(t, testJob("#!/bin/sh\n"))
	assert.Equal(t, "1234", id)
	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Pending, st.State)
	found, err := h.b.FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, id, found)
}

func TestTransientAndErrorAnswers(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault fakelsf.Fault
		want  error
		text  string
	}{
		{"500", fakelsf.Fault{Status: 500, Body: `{"message":"Exception occurred"}`}, backends.ErrTransient, "Exception occurred"},
		{"502 html", fakelsf.Fault{Status: 502, Body: "<html>proxy</html>", ContentType: "text/html"}, backends.ErrTransient, "502"},
		{"503", fakelsf.Fault{Status: 503, Body: `<error><message>Service unavailable</message></error>`, ContentType: "application/xml"}, backends.ErrTransient, "Service unavailable"},
		{"429", fakelsf.Fault{Status: 429, Body: `{"message":"slow down"}`, RetryAfter: "30"}, backends.ErrTransient, "Retry-After: 30"},
		{"dropped", fakelsf.Fault{Drop: true}, backends.ErrTransient, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			id, _ := h.submit(t, testJob("#!/bin/sh\n"))
			fl := c.fault
			fl.Method, fl.Path = "GET", "/ws/jobs/"+id
			h.f.AddFault(&fl)
			_, err := h.b.Status(ctx, id)
			require.ErrorIs(t, err, c.want)
			assert.ErrorContains(t, err, c.text)
			fl2 := c.fault
			fl2.Path = "/ws/jobs/submit"
			h.f.AddFault(&fl2)
			_, err = h.b.Submit(ctx, testJob("#!/bin/sh\n"))
			assert.ErrorIs(t, err, c.want)
		})
	}

	h := newHarness(t)
	h.f.AddFault(&fakelsf.Fault{Path: "/ws/jobs/submit", Status: 400, Body: `{"message":"Queue nosuch does not exist"}`, Times: 1})
	_, err := h.b.Submit(ctx, testJob("#!/bin/sh\n"))
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "jobproperties", fe.Field)
	assert.Contains(t, fe.Msg, "Queue nosuch does not exist")

	h.f.AddFault(&fakelsf.Fault{Path: "/ws/jobs/submit", Status: 200, Body: `{"message":"submitted?"}`, Times: 1})
	_, err = h.b.Submit(ctx, testJob("#!/bin/sh\n"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, backends.ErrTransient)
	assert.Contains(t, err.Error(), "without a job id")

	h.f.AddFault(&fakelsf.Fault{Path: "/ws/jobs/submit", Status: 200, Body: `{"id":0}`, Times: 1})
	_, err = h.b.Submit(ctx, testJob("#!/bin/sh\n"))
	assert.ErrorContains(t, err, "without a job id")

	id, _ := h.submit(t, testJob("#!/bin/sh\n"))
	h.f.AddFault(&fakelsf.Fault{Method: "GET", Path: "/ws/jobs/" + id, Status: 200, Body: `{"@total":"1","job":`, Times: 1})
	_, err = h.b.Status(ctx, id)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot read")

	h.f.AddFault(&fakelsf.Fault{Method: "GET", Path: "/ws/jobs/" + id, Status: 200, Body: `{"@total":"1","job":{"jobId":"` + id + `"}}`, Times: 1})
	_, err = h.b.Status(ctx, id)
	assert.ErrorContains(t, err, "without a jobStatus")

	_, err = h.b.Status(ctx, "12; rm -rf /")
	assert.ErrorIs(t, err, backends.ErrNotFound)
}

func TestPerRequestTimeout(t *testing.T) {
	h := newHarness(t)
	id, _ := h.submit(t, testJob("#!/bin/sh\n"))
	h.b.requestTimeout = 100 * time.Millisecond
	h.f.AddFault(&fakelsf.Fault{Method: "GET", Path: "/ws/jobs/" + id, Delay: 2 * time.Second, Status: 200, Times: 1})
	start := time.Now()
	_, err := h.b.Status(ctx, id)
	assert.ErrorIs(t, err, backends.ErrTransient)
	assert.Less(t, time.Since(start), time.Second)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = h.b.Status(cctx, id)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, backends.ErrTransient)
}

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://pac:8443":              "https://pac:8443/platform",
		"https://pac:8443/":             "https://pac:8443/platform",
		"https://pac:8443/platform/":    "https://pac:8443/platform",
		"http://pac/prefix/platform":    "http://pac/prefix/platform",
		"https://pac:8443/platform/ws/": "https://pac:8443/platform",
	} {
		got, err := parseURL(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "pac:8443", "ftp://pac", "https://u:p@pac/", "https://pac/?x=1"} {
		_, err := parseURL(in)
		assert.ErrorIs(t, err, backends.ErrInvalid, in)
	}
}

// TestReferenceExamples feeds the literal examples of backend-apis.md §2 to
// the fake and to the client.
func TestReferenceExamples(t *testing.T) {
	t.Run("logon request accepted by the fake", refLogonRequest)
	t.Run("logon answers read by the client", refLogonAnswers)
	t.Run("status answers", refStatusAnswers)
	t.Run("submit answers", refSubmitAnswers)
	t.Run("error bodies", refErrorBodies)
	t.Run("AppParam shape", refAppParamShape)
	t.Run("a hand-written submit accepted by the fake", refHandWrittenSubmit)
	t.Run("the fake refuses a raw quote in the cookie", refRawQuoteInCookie)
}

// refLogonRequest: logon request accepted by the fake.
func refLogonRequest(t *testing.T) {
	f := fakelsf.New(t, false)
	f.User, f.Pass = "u", "p"
	req, _ := http.NewRequest("POST", f.URL+"/platform/ws/logon", strings.NewReader(`<User><name>u</name><pass>p</pass></User>`))
	req.Header.Set("Content-Type", "application/xml")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	assert.Regexp(t, `^<User><token>u&#34;\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ&#34;[A-Za-z0-9+/=]+</token></User>$`, string(body))
	req, _ = http.NewRequest("POST", f.URL+"/platform/ws/logon", strings.NewReader(`<User><name></name><pass>p</pass></User>`))
	req.Header.Set("Content-Type", "application/xml")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 400, resp.StatusCode, "empty user")
}

// refLogonAnswers: logon answers read by the client.
func refLogonAnswers(t *testing.T) {
	for _, answer := range []string{
		`<User><token>u"2015-12-08T14:35:51Z"57hG==</token></User>`,
		`{"token":"u\"2015-12-08T14:35:51Z\"57hG=="}`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/platform/ws/logon" {
				io.WriteString(w, answer)
				return
			}
			assert.Equal(t, "platform_token=u#quote#2015-12-08T14:35:51Z#quote#57hG==", r.Header.Get("Cookie"))
			io.WriteString(w, `{"@total":"1","job":{"jobId":"1234","jobStatus":"RUN","cwd":"/home/u/x"}}`)
		}))
		defer srv.Close()
		be, err := New(backends.Config{URL: srv.URL, Credentials: testutil.NewCreds(map[string]string{"username": "u", "password": "p"})})
		require.NoError(t, err)
		st, err := be.Status(ctx, "1234")
		require.NoError(t, err, answer)
		assert.Equal(t, backends.Running, st.State)
	}
}

// refStatusAnswers: status answers.
func refStatusAnswers(t *testing.T) {
	for _, body := range []string{
		`{"@total":"1","job":{"jobId":"1234","jobStatus":"RUN","cwd":"/home/u/…"}}`,
		`{"@total":"1","Job":{"jobId":1234,"jobStatus":"RUN","cwd":"/home/u/…"}}`,
		`<jobs total="1"><job><jobId>1234</jobId><jobName>x</jobName><jobStatus>RUN</jobStatus><exitStatus/><cwd>/home/u</cwd><outfile/><pendReason/><submitTimeGMT/><startTime/><endTime/></job></jobs>`,
		`<jobs total="1"><atom:link rel="self" href="http://www.example.org/platfom/ws/jobs/1234"/><job><jobId>1234</jobId><jobStatus>RUN</jobStatus></job></jobs>`,
	} {
		doc, err := decodeDoc([]byte(body))
		require.NoError(t, err, body)
		e := jobEntries(doc)
		require.Len(t, e, 1, body)
		assert.Equal(t, "1234", entryID(e[0]))
		st, err := mapJob(e[0])
		require.NoError(t, err)
		assert.Equal(t, backends.Running, st.State, body)
	}
}

// refSubmitAnswers: submit answers.
func refSubmitAnswers(t *testing.T) {
	for _, answer := range []string{`{"id":"1234"}`, `{"id":1234}`, `<job><id>1234</id></job>`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/platform/ws/logon" {
				io.WriteString(w, `{"token":"u\"2099-01-01T00:00:00Z\"x"}`)
				return
			}
			io.WriteString(w, answer)
		}))
		defer srv.Close()
		be, err := New(backends.Config{URL: srv.URL, Credentials: testutil.NewCreds(map[string]string{"username": "u", "password": "p"})})
		require.NoError(t, err)
		id, err := be.Submit(ctx, testJob("#!/bin/sh\n"))
		require.NoError(t, err, answer)
		assert.Equal(t, "1234", id)
	}
}

// refErrorBodies: error bodies.
func refErrorBodies(t *testing.T) {
	assert.Equal(t, "boom", errorMessage([]byte(`<error><message>boom</message></error>`)))
	assert.Equal(t, "boom", errorMessage([]byte(`{"message":"boom"}`)))
}

// refAppParamShape: AppParam shape.
func refAppParamShape(t *testing.T) {
	var buf bytes.Buffer
	sp := &spec{app: "generic", params: [][2]string{{"COMMANDTORUN", "a<b"}}, files: []file{{name: "s.sh", data: []byte("x")}}}
	require.NoError(t, writeSubmit(ctx, &buf, sp, "B", "B2"))
	s := buf.String()
	assert.Contains(t, s, "--B\r\nContent-Disposition: form-data; name=\"AppName\"\r\nContent-Id: <AppName>\r\n\r\ngeneric\r\n")
	assert.Contains(t, s, "Content-Type: multipart/mixed; boundary=B2\r\n")
	assert.Contains(t, s, "<AppParam><id>COMMANDTORUN</id><value>a&lt;b</value><type></type></AppParam>")
	assert.Contains(t, s, "<AppParam><id>s.sh</id><value>s.sh,upload</value><type>file</type></AppParam>")
	assert.Contains(t, s, "Content-Type: application/octet-stream\r\n")
	assert.True(t, strings.HasSuffix(s, "--B--\r\n"))
}

// refHandWrittenSubmit: a hand-written submit accepted by the fake.
func refHandWrittenSubmit(t *testing.T) {
	f := fakelsf.New(t, false)
	be, err := New(backends.Config{URL: f.URL, Credentials: testutil.NewCreds(map[string]string{"username": f.User, "password": f.Pass}), HTTPClient: f.Client()})
	require.NoError(t, err)
	tok, err := be.(*Backend).session(ctx)
	require.NoError(t, err)
	// The layout of the reference (and of the Bridge Operator's request).
	body := "--B\r\nContent-Disposition: form-data; name=\"AppName\"\r\nContent-ID: <AppName>\r\n\r\ngeneric\r\n" +
		"--B\r\nContent-Disposition: form-data; name=\"data\"\r\nContent-ID: <data>\r\nContent-Type: multipart/mixed; boundary=B2\r\n\r\n" +
		"--B2\r\nContent-Disposition: form-data; name=\"COMMANDTORUN\"\r\nContent-Type: application/xml; charset=UTF-8\r\n\r\n" +
		"<AppParam><id>COMMANDTORUN</id><value>./script</value><type></type></AppParam>\r\n" +
		"--B2\r\nContent-Disposition: form-data; name=\"script\"\r\nContent-Type: application/xml; charset=UTF-8\r\n\r\n" +
		"<AppParam><id>script</id><value>script,upload</value><type>file</type></AppParam>\r\n" +
		"--B2--\r\n\r\n" +
		"--B\r\nContent-Disposition: form-data; name=\"script\"\r\nContent-Type: application/octet-stream\r\nContent-ID: <script>\r\n\r\necho hi\r\n" +
		"--B--"
	req, _ := http.NewRequest("POST", f.URL+"/platform/ws/jobs/submit", strings.NewReader(body))
	req.Header.Set("Content-Type", "multipart/mixed; boundary=B")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Cookie", "platform_token="+tok)
	resp, err := f.Client().Do(req)
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, string(out))
	assert.JSONEq(t, `{"id":1234}`, string(out))
	assert.Equal(t, "echo hi", string(f.Submits[0].Files["script"]))
}

// refRawQuoteInCookie: the fake refuses a raw quote in the cookie.
func refRawQuoteInCookie(t *testing.T) {
	f := fakelsf.New(t, false)
	req, _ := http.NewRequest("GET", f.URL+"/platform/ws/jobs/1", nil)
	req.Header.Set("Cookie", `platform_token=u"2015-12-08T14:35:51Z"x`)
	resp, err := f.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 401, resp.StatusCode)
}

func TestErrorsDoNotLeakThePassword(t *testing.T) {
	h := newHarness(t)
	h.f.AddFault(&fakelsf.Fault{Path: "/ws/logon", Status: 500, Body: `{"message":"internal"}`, Times: 1})
	_, err := h.b.Status(ctx, "1")
	require.Error(t, err)
	assert.True(t, errors.Is(err, backends.ErrTransient))
	assert.NotContains(t, err.Error(), h.f.Pass)
	assert.NotContains(t, h.logs.String(), h.f.Pass)
}

// TestExitReasonCategories: LSF's exit reasons, by name or by number, give
// the failure category; a plain non-zero exit is the job's.
func TestExitReasonCategories(t *testing.T) {
	for info, want := range map[string]backends.Category{
		"TERM_PREEMPT": backends.CategoryInfrastructure, "1": backends.CategoryInfrastructure,
		"TERM_ZOMBIE": backends.CategoryInfrastructure, "TERM_RUNLIMIT": backends.CategoryTimeout,
		"12": backends.CategoryTimeout, "TERM_MEMLIMIT": backends.CategoryJob, "": backends.CategoryJob,
		"TERM_OWNER": backends.CategoryCancelled,
	} {
		st, err := mapJob(map[string]any{"jobStatus": "EXIT", "exitStatus": "1", "exitInfo": info})
		require.NoError(t, err)
		assert.Equal(t, want, st.FailureCategory(), "exitInfo %q", info)
	}
}
