package ray

// Fuzz targets for what the ray backend reads from outside: JobDetails and
// the plain-text (traceback) errors, through the real HTTP code, the log
// endpoint with offsets, and jobproperties (buildRequest, Validate).
// Invariants: a mapped state is one of backends.States (DONE only for
// SUCCEEDED, an unknown state never final unless Ray gave an end time), a
// pending job has no start time, error texts are bounded, log offsets only
// grow and count exactly the bytes written, a find adopts only the key, and
// the submit request carries the key and bridge-runner's variables.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

type fzCreds = testutil.MapCreds

type fzTransport = testutil.RoundTripFunc

func fzResponse(status int, body []byte) *http.Response { return testutil.Response(status, "", body) }

var fzInvalidField = testutil.RequireFieldError

const fzKey = "br-0123456789abcdef0123"

var fzDetailSeeds = []string{
	`{"type":"SUBMISSION","job_id":"02000000","submission_id":"` + fzKey + `","driver_info":{"id":"02000000","node_ip_address":"10.0.0.1","pid":"123"},"status":"SUCCEEDED","entrypoint":"python x.py","message":"Job finished successfully.","error_type":null,"start_time":1700000000000,"end_time":1700000005000,"metadata":{"job_name":"x"},"runtime_env":{},"driver_exit_code":0}`,
	`{"type":"SUBMISSION","job_id":null,"submission_id":"` + fzKey + `","status":"PENDING","message":"Job has not started yet.","start_time":1700000000000}`,
	`{"submission_id":"` + fzKey + `","status":"RUNNING","message":"Job is currently running."}`,
	`{"submission_id":"` + fzKey + `","status":"FAILED","message":"Job entrypoint command failed with exit code 3\nTraceback...","error_type":"JOB_ENTRYPOINT_COMMAND_ERROR","driver_exit_code":3,"end_time":1700000005000}`,
	`{"submission_id":"` + fzKey + `","status":"STOPPED","message":"Job was intentionally stopped."}`,
	`{"submission_id":"other","status":"RETRYING","end_time":0}`,
	`{"submission_id":"` + fzKey + `","status":"ARCHIVED","end_time":1700000005000}`,
	`{"logs":"line 1\nline 2\n"}`,
	`Traceback (most recent call last):
  File "x.py", line 1, in <module>
ValueError: Job with submission_id ` + fzKey + ` already exists. Please use a different submission_id.`,
	`Job ` + fzKey + ` does not exist`,
	`Unauthorized: Missing authentication token`,
	``,
}

// FuzzRayAnswers: every request is answered with the fuzzer's status and body.
func FuzzRayAnswers(f *testing.F) {
	for _, s := range fzDetailSeeds {
		f.Add(uint16(200), []byte(s), int64(0))
	}
	f.Add(uint16(404), []byte(`Job x does not exist`), int64(3))
	f.Add(uint16(500), []byte(fzDetailSeeds[8]), int64(0))
	f.Add(uint16(400), []byte(fzDetailSeeds[8]), int64(0))
	f.Add(uint16(401), []byte(`Unauthorized: Missing authentication token`), int64(0))
	f.Add(uint16(403), []byte(`Forbidden: Invalid authentication token`), int64(0))
	f.Add(uint16(200), []byte(`{"logs":"abc"}`), int64(10))
	f.Add(uint16(200), []byte(`{"logs":"abcdef"}`), int64(-4))
	f.Fuzz(func(t *testing.T, status uint16, body []byte, offset int64) {
		if status < 100 || status > 999 {
			status = 200
		}
		tr := fzTransport(func(*http.Request) *http.Response { return fzResponse(int(status), body) })
		be, err := New(backends.Config{URL: "http://ray.test:8265", HTTPClient: &http.Client{Transport: tr},
			Credentials: fzCreds{"token": "SECRET-ray-token-9f8e7d"}})
		if err != nil {
			t.Fatal(err)
		}
		b := be.(*Backend)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()

		r := &response{status: int(status), body: body}
		if txt := r.text(); txt == "" || len(txt) > 2003 {
			t.Fatalf("error text of %d bytes", len(txt))
		}

		fzCheckSubmit(t, ctx, b, status, r)
		fzCheckStatus(t, ctx, b, status, body)
		found, err := b.FindByKey(ctx, fzKey)
		if err == nil && found != "" && found != fzKey {
			t.Fatalf("FindByKey adopted %q", found)
		}
		_ = b.Cancel(ctx, fzKey)

		fzCheckLogs(t, ctx, b, offset)
	})
}

// FuzzRayJobProperties: jobproperties and the script through Validate and
// the submit request.
func FuzzRayJobProperties(f *testing.F) {
	for _, p := range []string{
		`{"runtime_env":{"pip":["numpy"],"env_vars":{"A":"1"}},"entrypoint_num_cpus":1,"metadata":{"owner":"bridge"}}`,
		`{"working_dir":"s3://bucket/wd.zip","pip":["requests"],"env_vars":{"B":"2"},"entrypoint_memory":1000000,"entrypoint_resources":{"x":1},"python":"python3","args":["--n","3"]}`,
		`{"entrypoint":"echo hi"}`, `{"entrypoint":"echo","args":["x"]}`, `{"working_dir":"a","runtime_env":{"working_dir":"b"}}`,
		`{"env_vars":{"A":"1"},"runtime_env":{"env_vars":{"B":"2"}}}`, `{"runtime_env":{"env_vars":{"A":1}}}`,
		`{"env_vars":{"BRIDGE_JOB_KEY":"x"}}`, `{"entrypoint_num_cpus":-1}`, `{"entrypoint_resources":{"x":-1}}`,
		`{"python":"py\nthon"}`, `{"args":["a\u0000b"]}`, `{"unknown":1}`, `{"pip":null}`, `[]`, ``,
	} {
		f.Add([]byte(p), "print('hi')", "", []byte(`{"n":1}`))
	}
	f.Add([]byte(`{}`), "", "/opt/job.py", []byte(nil))
	f.Add([]byte(`{}`), "", "", []byte(nil))
	f.Add([]byte(`{}`), strings.Repeat("x", 130<<10), "", []byte(nil))
	f.Fuzz(func(t *testing.T, props []byte, script, scriptPath string, params []byte) {
		job := backends.Job{Name: "fuzz", Key: fzKey, Properties: props, Script: script, ScriptPath: scriptPath, Parameters: params}
		b := &Backend{}
		if err := b.Validate(job); err != nil {
			fzInvalidField(t, err, "jobproperties", "jobdata.jobScript", "jobdata.jobParameters", "jobdata.scriptMetadata")
			return
		}
		req, err := buildRequest(job)
		if err != nil {
			t.Fatalf("Validate accepted what buildRequest refuses: %v", err)
		}
		raw, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("the submit request does not encode: %v", err)
		}
		var back struct {
			Entrypoint   string `json:"entrypoint"`
			SubmissionID string `json:"submission_id"`
			RuntimeEnv   struct {
				EnvVars map[string]string `json:"env_vars"`
			} `json:"runtime_env"`
			Metadata map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("the submit request does not decode: %v", err)
		}
		if back.SubmissionID != fzKey || back.Entrypoint == "" || back.RuntimeEnv.EnvVars["BRIDGE_JOB_KEY"] != fzKey ||
			back.Metadata["submitted_by"] != "bridge-runner" {
			t.Fatalf("request %s", raw)
		}
	})
}

// fzCheckSubmit: a submit reports Ray's id only from a 200, names the field
// it refuses, and calls 429/5xx transient.
func fzCheckSubmit(t *testing.T, ctx context.Context, b *Backend, status uint16, r *response) {
	job := backends.Job{Name: "fuzz", Key: fzKey, Script: "print('hi')"}
	id, err := b.Submit(ctx, job)
	switch {
	case err == nil:
		if id != fzKey || status != 200 {
			t.Fatalf("Submit reported %q from HTTP %d", id, status)
		}
	case errors.Is(err, backends.ErrInvalid):
		fzInvalidField(t, err, "jobproperties", "resourceURL")
	case errors.Is(err, backends.ErrExists):
		if !isDuplicate(r) {
			t.Fatalf("ErrExists without Ray's duplicate message: %v", err)
		}
	}
	if err != nil && (status == 429 || status >= 500) && !errors.Is(err, backends.ErrTransient) && !errors.Is(err, backends.ErrExists) {
		t.Fatalf("HTTP %d on submit is not transient: %v", status, err)
	}
}

// fzCheckStatus: a status maps Ray's states faithfully.
func fzCheckStatus(t *testing.T, ctx context.Context, b *Backend, status uint16, body []byte) {
	st, err := b.Status(ctx, fzKey)
	if err == nil {
		if !st.State.Valid() {
			t.Fatalf("state %q", st.State)
		}
		var d jobDetails
		_ = json.Unmarshal(body, &d)
		if st.State == backends.Done && d.Status != raySucceeded {
			t.Fatalf("DONE from %q", d.Status)
		}
		if st.State == backends.Pending && !st.StartTime.IsZero() {
			t.Fatal("a pending job with a start time")
		}
		if st.State.Final() && d.Status != raySucceeded && d.Status != rayFailed && d.Status != rayStopped && st.EndTime.IsZero() {
			t.Fatalf("unknown state %q made final without an end time", d.Status)
		}
		if strings.Contains(st.Message, "\n") {
			t.Fatalf("a multi-line message %q", st.Message)
		}
	} else if status == 404 && !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("404 is not ErrNotFound: %v", err)
	}
}

// fzCheckLogs: the log offset moves by what was written, and not at all on
// failure.
func fzCheckLogs(t *testing.T, ctx context.Context, b *Backend, offset int64) {
	var out bytes.Buffer
	next, err := b.ReadLogs(ctx, fzKey, offset, &out)
	if err == nil {
		from := max(offset, 0)
		if next < from {
			t.Fatalf("log offset went back from %d to %d", offset, next)
		}
		if next-from != int64(out.Len()) {
			t.Fatalf("offset moved %d but %d bytes were written", next-from, out.Len())
		}
	} else if next != offset {
		t.Fatalf("a failed ReadLogs moved the offset from %d to %d", offset, next)
	}
}
