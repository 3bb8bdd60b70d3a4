package quantum

// Fuzz targets for what the quantum backend reads from outside: JobResponse
// and the error container (and IAM's answers), through the real HTTP code,
// and jobproperties, jobParameters and the circuit (buildSubmit, Validate).
// Invariants: a mapped state is one of backends.States (DONE only for
// Completed, 1305 never KILLED), errors are classified (429 and 5xx
// transient, 401/403 ErrAuth), a submit never reports a malformed id, a find
// adopts only a job carrying the key, refusals name their field, and the
// submit body carries the key as its first tag.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

type fzCreds = testutil.MapCreds

type fzTransport = testutil.RoundTripFunc

var fzResponse = testutil.Response

var fzInvalidField = testutil.RequireFieldError

const fzKey = "br-0123456789abcdef0123"

var fzJobSeeds = []string{
	`{"id":"c5dge2d3rn7breq27i9g","backend":"ibm_torino","state":{"status":"Completed"},"status":"Completed","created":"2025-01-01T00:00:00.123Z","tags":["` + fzKey + `"]}`,
	`{"id":"c5dge2d3rn7breq27i9g","state":{"status":"Cancelled","reason":"Ran too long","reason_code":1305,"reason_solution":"raise cost"}}`,
	`{"id":"x","state":{"status":"Cancelled","reasonCode":"1305"}}`,
	`{"id":"x","status":"Cancelled - Ran too long"}`,
	`{"id":"x","state":{"status":"Failed","reason":"Error in circuit","reason_code":1517}}`,
	`{"id":"x","state":{"status":"Queued"},"status":"Queued"}`,
	`{"id":"x","state":{"status":"Running"}}`,
	`{"id":"x","status":"Cancelled"}`,
	`{"id":"x","state":{"status":"Teleported"}}`,
	`{"id":"x","state":{"reason_code":null}}`,
	`{"jobs":[{"id":"j1","tags":["` + fzKey + `"],"created":"2025-01-02T00:00:00Z"},{"id":"j0","tags":["other"],"created":"2025-01-01T00:00:00Z"}]}`,
	`[{"id":"j1","tags":["` + fzKey + `"]}]`,
	`{"id":"c5dge2d3rn7breq27i9g","backend":"ibm_torino"}`,
}

// FuzzJobResponse decodes GET /jobs/{id} answers and maps them.
func FuzzJobResponse(f *testing.F) {
	for _, s := range fzJobSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var j jobResponse
		if json.Unmarshal(body, &j) != nil {
			return
		}
		st, err := j.status()
		if err != nil {
			return
		}
		if !st.State.Valid() {
			t.Fatalf("state %q", st.State)
		}
		l := strings.ToLower(strings.TrimSpace(st.Raw))
		if st.State == backends.Done && l != "completed" {
			t.Fatalf("DONE from %q", st.Raw)
		}
		if st.State == backends.Killed && st.Reason == ranTooLong {
			t.Fatal("reason 1305 (ran too long) reported as KILLED")
		}
		if st.Reason == "null" {
			t.Fatal("reason \"null\"")
		}
		if !st.SubmitTime.IsZero() && st.SubmitTime.Location() != time.UTC {
			t.Fatal("submit time not UTC")
		}
	})
}

// FuzzQuantumAnswers: IAM gives a token; the service answers every request
// with the fuzzer's status and body.
func FuzzQuantumAnswers(f *testing.F) {
	for _, s := range fzJobSeeds {
		f.Add(uint16(200), "application/json", []byte(s), "")
	}
	f.Add(uint16(404), "application/json", []byte(`{"errors":[{"code":1291,"message":"Job not found. Job ID: x","solution":"check the id","more_info":"https://cloud.ibm.com/apidocs/quantum-computing#error-handling"}],"trace":"abc-123"}`), "")
	f.Add(uint16(400), "application/json", []byte(`{"errors":[{"code":"not_found","message":"device not found"}]}`), "")
	f.Add(uint16(429), "application/json", []byte(`{"errors":[{"code":1352,"message":"too many"}]}`), "12")
	f.Add(uint16(429), "text/plain", []byte(`slow down`), "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(uint16(409), "application/json", []byte(`{"errors":[{"code":1217,"message":"Usage exceeds instance limit"}]}`), "")
	f.Add(uint16(401), "application/json", []byte(`{"errorCode":"BXNIM0415E","errorMessage":"Provided API key could not be found"}`), "")
	f.Add(uint16(503), "text/html", []byte(`<html>down</html>`), "")
	f.Add(uint16(200), "application/json", []byte(`{"id":"../x"}`), "")
	f.Add(uint16(204), "", []byte(``), "")
	f.Fuzz(func(t *testing.T, status uint16, ctype string, body []byte, retryAfter string) {
		if status < 100 || status > 999 {
			status = 200
		}
		b := fzAnswering(t, status, ctype, body, retryAfter)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		job := backends.Job{Name: "fuzz", Key: fzKey, Properties: json.RawMessage(`{"program_id":"sampler","backend":"ibm_torino"}`),
			Script: "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;"}
		id, err := b.Submit(ctx, job)
		switch {
		case err == nil:
			if !validJobID(id) || status < 200 || status > 299 {
				t.Fatalf("Submit reported %q from HTTP %d %q", id, status, body)
			}
		case errors.Is(err, backends.ErrInvalid):
			fzInvalidField(t, err, "jobproperties", "jobdata.jobParameters", "credentials", "resourceURL")
		}
		fzCheckClass(t, int(status), err)
		st, err := b.Status(ctx, "c5dge2d3rn7breq27i9g")
		if err == nil && !st.State.Valid() {
			t.Fatalf("Status gave %q", st.State)
		}
		if status == 404 && err != nil && !errors.Is(err, backends.ErrNotFound) {
			t.Fatalf("404 on a job is not ErrNotFound: %v", err)
		}
		fzCheckClass(t, int(status), err)
		_ = b.Cancel(ctx, "c5dge2d3rn7breq27i9g")
		fzCheckFind(t, ctx, b, body)
		_ = b.FetchOutput(ctx, "c5dge2d3rn7breq27i9g", "results", io.Discard)
	})
}

// fzCheckClass: a service error of a given status is classified as such.
func fzCheckClass(t *testing.T, status int, err error) {
	t.Helper()
	if err == nil || status < 400 {
		return
	}
	if strings.Contains(err.Error(), "SECRET-quantum-key-9f8e7d") {
		t.Fatalf("the API key is in the error: %v", err)
	}
	switch {
	case status == 429 || status >= 500 || status == 408:
		if !errors.Is(err, backends.ErrTransient) {
			t.Fatalf("HTTP %d is not transient: %v", status, err)
		}
	case status == 401 || status == 403:
		if !errors.Is(err, backends.ErrAuth) {
			t.Fatalf("HTTP %d is not ErrAuth: %v", status, err)
		}
	default:
		if errors.Is(err, backends.ErrTransient) {
			t.Fatalf("HTTP %d is transient: %v", status, err)
		}
	}
}

// FuzzQuantumJobProperties: jobproperties, jobParameters and the script.
func FuzzQuantumJobProperties(f *testing.F) {
	circuit := `OPENQASM 3.0; include "stdgates.inc"; bit[2] c; h $0; cx $0,$1; c[0]=measure $0; c[1]=measure $1;`
	for _, p := range []string{
		`{"program_id":"sampler","backend":"ibm_torino"}`,
		`{"program":"sampler","backend_name":"ibm_torino","shots":1024,"tags":["a","b"],"log_level":"INFO","cost":600,"private":true,"session_id":"s","calibration_id":"c","iam_url":"https://iam.test/x","api_version":"2025-05-01"}`,
		`{"programId":"estimator","backend":"ibm_kyiv"}`, `{"program_id":"custom","backend":"b"}`, `{"program_id":"sampler"}`,
		`{"program":"sampler","program_id":"sampler","backend":"b"}`, `{"program_id":"sampler","backend":"b","cost":0}`,
		`{"program_id":"sampler","backend":"b","shots":0}`, `{"program_id":"sampler","backend":"b","iam_url":"ftp://x"}`,
		`{"program_id":"sampler","backend":"b","api_version":"latest"}`, `{"program_id":"sampler","backend":"a/b"}`,
		`{"program_id":"sampler","backend":"b","tags":[""]}`, `{"program_id":"sampler","backend":"b","unknown":1}`, `[]`, ``,
	} {
		f.Add([]byte(p), circuit, "", []byte(nil))
	}
	f.Add([]byte(`{"backend":"ibm_torino"}`), "", "sampler", []byte(`{"pubs":[["`+"OPENQASM 3.0;"+`",[],100]],"version":2}`))
	f.Add([]byte(`{"backend":"ibm_torino","program_id":"estimator"}`), "", "", []byte(`{"params":{"pubs":[["c","Z"]],"version":2}}`))
	f.Add([]byte(`{"backend":"ibm_torino","program_id":"sampler"}`), circuit, "", []byte(`{"pubs":[]}`))
	f.Add([]byte(`{"backend":"ibm_torino","program_id":"sampler"}`), "print('not qasm')", "", []byte(nil))
	f.Add([]byte(`{"backend":"ibm_torino"}`), "", "custom_program", []byte(`{"pubs":[]}`))
	f.Fuzz(func(t *testing.T, props []byte, script, scriptPath string, params []byte) {
		job := backends.Job{Name: "fuzz", Key: fzKey, Properties: props, Script: script, ScriptPath: scriptPath, Parameters: params}
		be, err := New(backends.Config{Credentials: fzCreds{"crn": "crn:v1:x", "apikey": "k"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := be.(backends.Validator).Validate(job); err != nil {
			fzInvalidField(t, err, "jobproperties", "jobdata.jobScript", "jobdata.jobParameters")
			return
		}
		body, _, err := buildSubmit(job)
		if err != nil {
			t.Fatalf("Validate accepted what buildSubmit refuses: %v", err)
		}
		if body.ProgramID != "sampler" && body.ProgramID != "estimator" || body.Backend == "" {
			t.Fatalf("program %q backend %q", body.ProgramID, body.Backend)
		}
		if len(body.Tags) == 0 || body.Tags[0] != fzKey {
			t.Fatalf("tags %q do not start with the key", body.Tags)
		}
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatalf("the submit body does not encode: %v", err)
		}
		var back struct {
			Params map[string]json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(raw, &back); err != nil || back.Params["pubs"] == nil {
			t.Fatalf("params without pubs: %s (%v)", raw, err)
		}
	})
}

// fzAnswering is a backend whose every service request is answered with
// status, ctype and body (IAM hands out a token).
func fzAnswering(t *testing.T, status uint16, ctype string, body []byte, retryAfter string) *Backend {
	tr := fzTransport(func(r *http.Request) *http.Response {
		if r.URL.Host == "iam.test" {
			return fzResponse(200, "application/json", []byte(`{"access_token":"tok-abc","expires_in":3600}`))
		}
		resp := fzResponse(int(status), ctype, body)
		if retryAfter != "" {
			resp.Header.Set("Retry-After", retryAfter)
		}
		return resp
	})
	be, err := New(backends.Config{URL: "https://quantum.test/api/v1", HTTPClient: &http.Client{Transport: tr},
		Credentials: fzCreds{"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::", "apikey": "SECRET-quantum-key-9f8e7d", "iam_url": "https://iam.test/identity/token"}})
	if err != nil {
		t.Fatal(err)
	}
	return be.(*Backend)
}

// fzCheckFind: FindByKey adopts only a well-formed id from an answer that
// carries the key.
func fzCheckFind(t *testing.T, ctx context.Context, b *Backend, body []byte) {
	found, err := b.FindByKey(ctx, fzKey)
	if err == nil && found != "" && !validJobID(found) {
		t.Fatalf("FindByKey adopted %q", found)
	}
	if err == nil && found != "" && !bytes.Contains(body, []byte(fzKey)) {
		t.Fatalf("FindByKey adopted %q, which does not carry the key", found)
	}
}
