package slurm

// Fuzz targets for what the slurm backend reads from outside: jobproperties
// and the script (buildJob, Validate), resourceURL, Slurm time strings, and
// slurmrestd's answers in every version's shape (job info, submit, cancel,
// error envelopes, ping), fed through the real HTTP code by a RoundTripper
// that answers with the fuzzer's bytes. Invariants, not just "no panic":
// a decoded state is one of backends.States, DONE only for COMPLETED, an
// exit code only at a final state, a submit never reports an id that is not
// a Slurm job id, refusals name their field.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

type fzCreds = testutil.MapCreds

type fzTransport = testutil.RoundTripFunc

var fzResponse = testutil.Response

var fzInvalidField = testutil.RequireFieldError

func fzHasState(st []string, want string) bool {
	for _, s := range st {
		if strings.ToUpper(strings.TrimSpace(s)) == want {
			return true
		}
	}
	return false
}

// fzCheckStatus asserts the invariants of a Status decoded from a job record.
func fzCheckStatus(t *testing.T, j *jobInfo, st backends.Status) {
	t.Helper()
	if !st.State.Valid() {
		t.Fatalf("state %q is not a contract state", st.State)
	}
	raw := states(j.JobState)
	if st.Raw != strings.Join(raw, ",") {
		t.Fatalf("raw state %q, want %q", st.Raw, strings.Join(raw, ","))
	}
	if st.State == backends.Done && !fzHasState(raw, "COMPLETED") {
		t.Fatalf("DONE without COMPLETED in %q", raw)
	}
	if st.State == backends.Killed && !fzHasState(raw, "CANCELLED") {
		t.Fatalf("KILLED without CANCELLED in %q", raw)
	}
	if st.ExitCode != nil && !st.State.Final() {
		t.Fatalf("an exit code at non-final state %s", st.State)
	}
	if !st.EndTime.IsZero() && !st.State.Final() {
		t.Fatalf("an end time at non-final state %s", st.State)
	}
	if st.State == backends.Pending && !st.StartTime.IsZero() {
		t.Fatal("a start time for a pending job")
	}
	for _, tm := range []time.Time{st.SubmitTime, st.StartTime, st.EndTime} {
		if !tm.IsZero() && (tm.Unix() <= 0 || tm.Location() != time.UTC) {
			t.Fatalf("time %v is not a positive UTC epoch", tm)
		}
	}
	if !strings.HasPrefix(st.Message, "Slurm job ") {
		t.Fatalf("message %q", st.Message)
	}
}

var fzJobInfoSeeds = []string{
	// v0.0.38 [live]
	`{"meta":{"Slurm":{"version":{"major":22,"minor":5,"micro":8},"release":"22.05.8"}},"errors":[],"jobs":[{"job_id":13,"job_state":"FAILED","state_reason":"NonZeroExitCode","exit_code":768,"submit_time":1700000000,"start_time":1700000001,"end_time":1700000002,"comment":"br-1"}]}`,
	`{"jobs":[{"job_id":14,"job_state":"CANCELLED","exit_code":15,"end_time":1700000002}]}`,
	`{"jobs":[{"job_id":15,"job_state":"COMPLETING","exit_code":0}]}`,
	`{"jobs":[{"job_id":16,"job_state":"PENDING","state_reason":"Priority","start_time":1800000000,"time_limit":null}]}`,
	// v0.0.39
	`{"jobs":[{"job_id":17,"job_state":"COMPLETED","exit_code":{"set":true,"infinite":false,"number":0},"end_time":1700000002}]}`,
	// v0.0.40+
	`{"meta":{"slurm":{"version":{"major":"24","minor":"11","micro":"7"},"release":"24.11.7"}},"jobs":[{"job_id":18,"job_state":["COMPLETED","COMPLETING"],"exit_code":{"status":["SUCCESS"],"return_code":{"set":true,"infinite":false,"number":0},"signal":{"id":{"set":false,"infinite":false,"number":0},"name":""}},"submit_time":{"set":true,"infinite":false,"number":1700000000},"start_time":{"set":true,"infinite":false,"number":1700000001},"end_time":{"set":true,"infinite":false,"number":1700000002}}]}`,
	`{"jobs":[{"job_id":19,"job_state":["CANCELLED"],"exit_code":{"status":["SIGNALED"],"return_code":{"set":true,"number":0},"signal":{"id":{"set":true,"number":9},"name":"KILL"}}}]}`,
	`{"jobs":[{"job_id":20,"job_state":["PENDING","REQUEUED"],"state_reason":"BeginTime"}]}`,
	`{"jobs":[{"job_id":21,"job_state":["TIMEOUT"],"exit_code":{"status":["ERROR"],"return_code":{"set":true,"number":1}}}]}`,
	`{"jobs":[{"job_id":22,"job_state":["RUNNING","REVOKED"]},{"job_id":23,"job_state":"OUT_OF_MEMORY"}]}`,
	`{"jobs":[{"job_id":"24","job_state":["BRAND_NEW_STATE"],"end_time":{"set":true,"infinite":true,"number":0}}]}`,
	`{"jobs":[{"job_id":25,"job_state":"NODE_FAIL","exit_code":4294967294,"end_time":4294967294}]}`,
	`{"jobs":[]}`,
}

// FuzzJobInfo decodes GET job/{id} answers of any version and maps them.
func FuzzJobInfo(f *testing.F) {
	for _, s := range fzJobInfoSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var jr jobsResponse
		if json.Unmarshal(body, &jr) != nil {
			return
		}
		for i := range jr.Jobs {
			j := &jr.Jobs[i]
			st := j.status()
			fzCheckStatus(t, j, st)
			if id := j.id(); id != "" {
				if _, err := strconv.ParseInt(id, 10, 64); err != nil {
					t.Fatalf("job id %q is not a number", id)
				}
			}
		}
	})
}

// FuzzNumberShapes: number() reads 5, "5" and {set,infinite,number}; what it
// reads survives being written as a plain number, and timestamps are never
// before the epoch.
func FuzzNumberShapes(f *testing.F) {
	for _, s := range []string{`5`, `"5"`, `{"set":true,"infinite":false,"number":5}`, `{"set":false,"number":5}`, `{"set":true,"infinite":true}`,
		`null`, `1e3`, `-1`, `4294967294`, `"abc"`, `{"set":true,"number":{"set":true,"number":7}}`, `9223372036854775808`, `1.5`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, ok := number(raw)
		if ok {
			m, ok2 := number(json.RawMessage(strconv.FormatInt(n, 10)))
			if !ok2 || m != n {
				t.Fatalf("%s → %d → %d %v", raw, n, m, ok2)
			}
		}
		if ts := timestamp(raw); !ts.IsZero() && ts.Unix() <= 0 {
			t.Fatalf("timestamp %v before the epoch from %s", ts, raw)
		}
		if ec, ok := decodeExitCode(raw); ok {
			if ec.signal != 0 && ec.code != 128+ec.signal {
				t.Fatalf("signal %d with code %d", ec.signal, ec.code)
			}
			if ec.signal == 0 && !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) && (ec.code < 0 || ec.code > 255) {
				t.Fatalf("a wait status gave exit code %d", ec.code)
			}
			_ = ec.String()
		}
		_ = states(raw)
	})
}

// fzJob is a job the slurm backend accepts.
func fzJob() backends.Job {
	return backends.Job{Name: "fuzz", Key: "br-0123456789abcdef0123", Script: "#!/bin/bash\necho hi\n"}
}

// FuzzSlurmAnswers sends Submit, Status, Cancel and FindByKey to a
// slurmrestd that answers with the fuzzer's status, content type and body.
func FuzzSlurmAnswers(f *testing.F) {
	f.Add(uint8(42), uint16(200), "application/json", []byte(`{"job_id":42,"step_id":"batch","job_submit_user_msg":"","meta":{},"errors":[],"warnings":[]}`))
	f.Add(uint8(38), uint16(200), "application/json", []byte(`{"meta":{},"errors":[],"job_id":13,"step_id":"BATCH","job_submit_user_msg":""}`))
	f.Add(uint8(40), uint16(200), "application/json", []byte(`{"result":{"job_id":7},"job_id":0}`))
	f.Add(uint8(42), uint16(200), "application/json", []byte(`{"status":[{"error":{"string":"x","code":2017,"message":"Invalid job id"}}]}`))
	f.Add(uint8(38), uint16(500), "application/json", []byte(`{"meta":{},"errors":[{"description":"Unable to find JobId=999999","error_number":2017,"error":"Invalid job id specified","source":"slurm_load_job"}],"jobs":[]}`))
	f.Add(uint8(38), uint16(500), "application/json", []byte(`{"errors":[{"description":"Failed while looking for jobs","error_number":-1,"error":"Unspecified error","source":"slurm_load_jobs"}]}`))
	f.Add(uint8(39), uint16(400), "text/plain", []byte(`Unable to parse query.`))
	f.Add(uint8(43), uint16(404), "text/plain", []byte(`Unable find requested URL. Please view /openapi/v3 for API reference.`))
	f.Add(uint8(40), uint16(401), "text/plain", []byte(`Authentication failure`))
	f.Add(uint8(42), uint16(503), "", []byte(`{"errors":[{"error_code":1007}]}`))
	f.Add(uint8(40), uint16(500), "application/json", []byte(`{"errors":[{"error_number":2000,"error":"Invalid partition name specified"}]}`))
	for _, s := range fzJobInfoSeeds {
		f.Add(uint8(40), uint16(200), "application/json", []byte(s))
	}
	f.Fuzz(func(t *testing.T, ver uint8, status uint16, ctype string, body []byte) {
		if status < 100 || status > 999 {
			status = 200
		}
		v := minVersion + apiVersion(ver)%(maxVersion-minVersion+1)
		tr := fzTransport(func(*http.Request) *http.Response { return fzResponse(int(status), ctype, body) })
		be, err := New(backends.Config{URL: "http://slurm.test:6820/slurm/" + v.String() + "/", HTTPClient: &http.Client{Transport: tr},
			Credentials: fzCreds{"username": "u", "token": "SECRET-token-9f8e7d"}})
		if err != nil {
			t.Fatal(err)
		}
		b := be.(*Backend)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()

		id, err := b.Submit(ctx, fzJob())
		switch {
		case err == nil:
			if !validID(id) {
				t.Fatalf("Submit reported job id %q from HTTP %d %q", id, status, body)
			}
			if status != 200 {
				t.Fatalf("Submit succeeded on HTTP %d", status)
			}
		case errors.Is(err, backends.ErrInvalid):
			fzInvalidField(t, err, "jobproperties", "resourceURL", "credentials")
		}
		if err != nil && strings.Contains(err.Error(), "SECRET-token-9f8e7d") {
			t.Fatalf("the token is in the error: %v", err)
		}

		st, err := b.Status(ctx, "42")
		switch {
		case err == nil:
			if !st.State.Valid() {
				t.Fatalf("Status gave state %q", st.State)
			}
			if status != 200 {
				t.Fatalf("Status succeeded on HTTP %d", status)
			}
		case errors.Is(err, backends.ErrInvalid):
			fzInvalidField(t, err, "resourceURL", "credentials")
		}

		_ = b.Cancel(ctx, "42")

		found, err := b.FindByKey(ctx, fzJob().Key)
		if err == nil && found != "" && !validID(found) {
			t.Fatalf("FindByKey adopted %q, which is no Slurm job id", found)
		}
	})
}

// FuzzSlurmVersionProbe: discovery answers with a version in range or an
// error, whatever the pings answer.
func FuzzSlurmVersionProbe(f *testing.F) {
	f.Add(uint16(200), "application/json", []byte(`{"pings":[{"hostname":"vm","ping":"UP","status":0,"mode":"primary"}],"meta":{"Slurm":{"version":{"major":22,"minor":5,"micro":8}}}}`))
	f.Add(uint16(404), "text/plain", []byte(`Unable find requested URL.`))
	f.Add(uint16(502), "text/html", []byte(`<html>bad gateway</html>`))
	f.Add(uint16(401), "text/plain", []byte(`Authentication failure`))
	f.Fuzz(func(t *testing.T, status uint16, ctype string, body []byte) {
		if status < 100 || status > 999 {
			status = 200
		}
		tr := fzTransport(func(*http.Request) *http.Response { return fzResponse(int(status), ctype, body) })
		be, err := New(backends.Config{URL: "http://slurm.test:6820", HTTPClient: &http.Client{Transport: tr},
			Credentials: fzCreds{"username": "u", "token": "t0ken"}})
		if err != nil {
			t.Fatal(err)
		}
		v, err := be.(*Backend).version(context.Background())
		if err == nil && (v < minVersion || v > maxVersion) {
			t.Fatalf("found version %s", v)
		}
		if errors.Is(err, backends.ErrInvalid) {
			fzInvalidField(t, err, "resourceURL", "credentials")
		}
	})
}

// FuzzSlurmJobProperties: jobproperties and the script through Validate
// (buildJob) and the submit body of every version.
func FuzzSlurmJobProperties(f *testing.F) {
	for _, p := range []string{
		`{"partition":"debug","nodes":1,"time_limit":30,"current_working_directory":"/scratch/bridge"}`,
		`{"NodesNumber":"2","Queue":"debug","Tasks":"4","slurmJobName":"x","currentWorkingDir":"/tmp","envPath":"/bin","envLibPath":"/lib","ErrorFileName":"e","OutputFileName":"o"}`,
		`{"time_limit":"1:30:00","environment":{"A":"1","B":true,"C":2}}`,
		`{"time_limit":{"set":true,"infinite":false,"number":60},"environment":["A=1","B=2"]}`,
		`{"time_limit":"INFINITE"}`, `{"time_limit":-1}`, `{"time_limit":1.5}`, `{"comment":"x"}`, `{"script":"x"}`,
		`{"Queue":"a","partition":"b"}`, `{"environment":["NOEQUALS"]}`, `{"environment":{"":"x"}}`, `{"name":5}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(p), "#!/bin/bash\nsrun hostname\n", "")
	}
	f.Add([]byte(`{}`), "srun hostname", "")
	f.Add([]byte(`{}`), "\ufeff#!/bin/bash\n", "")
	f.Add([]byte(`{}`), "#!/bin/bash\r\necho\r\n", "")
	f.Add([]byte(`{}`), "", "/home/u/it's a job.sh")
	f.Add([]byte(`{}`), "", "/bad\npath")
	f.Fuzz(func(t *testing.T, props []byte, script, scriptPath string) {
		if !utf8.ValidString(scriptPath) {
			// The record (a ConfigMap, or the JSON state file) holds only
			// UTF-8 text, so no such path reaches a backend.
			return
		}
		job := fzJob()
		job.Properties, job.Script, job.ScriptPath = props, script, scriptPath
		be, err := New(backends.Config{URL: "http://slurm.test:6820", Credentials: fzCreds{"username": "u", "token": "t0ken"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := be.(backends.Validator).Validate(job); err != nil {
			fzInvalidField(t, err, "jobproperties", "jobdata.jobScript")
			return
		}
		s, err := buildJob(job)
		if err != nil {
			t.Fatalf("Validate accepted what buildJob refuses: %v", err)
		}
		if !strings.HasPrefix(s.script, "#!") {
			t.Fatalf("a script without #! accepted: %q", s.script)
		}
		for v := minVersion; v <= maxVersion; v++ {
			fzCheckBody(t, job, s, v)
		}
	})
}

// fzCheckBody: the submit body of version v carries the key (comment), a name, the script
// byte for byte, the environment and the time limit.
func fzCheckBody(t *testing.T, job backends.Job, s *jobSpec, v apiVersion) {
	t.Helper()
	raw, err := json.Marshal(s.body(v))
	if err != nil {
		t.Fatalf("%s body does not encode: %v", v, err)
	}
	// Exact keys: Go's struct decoding would match "Time_limit" too.
	var back struct {
		Script string                     `json:"script"`
		Job    map[string]json.RawMessage `json:"job"`
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("%s body does not decode: %v", v, err)
	}
	str := func(k string) string {
		var x string
		_ = json.Unmarshal(back.Job[k], &x)
		return x
	}
	if str("comment") != job.Key || str("name") == "" {
		t.Fatalf("%s: comment %q does not carry the key, or the job has no name (%q)", v, str("comment"), str("name"))
	}
	if got := back.Script + str("script"); got != s.script {
		t.Fatalf("%s: script not sent byte for byte", v)
	}
	env, err := parseEnvironment(back.Job["environment"])
	if err != nil || env["BRIDGE_JOB_KEY"] != job.Key || env["PATH"] == "" {
		t.Fatalf("%s: environment %s: %v", v, back.Job["environment"], err)
	}
	if tlRaw, ok := back.Job["time_limit"]; ok && s.timeLimit != nil {
		if tl, err := parseTimeLimit(tlRaw); err != nil || tl == nil || *tl != *s.timeLimit {
			t.Fatalf("%s: time_limit %s does not read back: %v", v, tlRaw, err)
		}
	}
}

func FuzzSlurmTime(f *testing.F) {
	for _, s := range []string{"60", "1:30", "1:30:00", "2-12", "2-12:30", "2-12:30:15", "INFINITE", "unlimited", "-1", "", "1-", "-", "1:2:3:4", "99999999999", "0:59"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, inf, ok := parseSlurmTime(s)
		if !ok {
			return
		}
		if inf && m != 0 {
			t.Fatalf("%q: infinite with %d minutes", s, m)
		}
		if uint64(m) >= math.MaxUint32-1 {
			t.Fatalf("%q: %d minutes is Slurm's NO_VAL range", s, m)
		}
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n >= 0 && !inf && uint32(n) != m {
			t.Fatalf("%q is %d minutes, parsed as %d", s, n, m)
		}
	})
}

func FuzzSlurmURL(f *testing.F) {
	for _, s := range []string{"http://slurm:6820", "https://slurm.example.org:6820/", "http://h:6820/slurm/v0.0.40/", "http://h/proxy/slurm/v0.0.36",
		"slurm:6820", "ftp://h", "http://h?x=1", "http://h#f", "http:// h", "", "https://user:pw@h:1/p/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		base, pinned, old, err := parseURL(raw)
		if err != nil {
			fzInvalidField(t, err, "resourceURL")
			return
		}
		if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") || strings.HasSuffix(base, "/") {
			t.Fatalf("%q → base %q", raw, base)
		}
		if pinned != 0 && (old != 0 || pinned < minVersion) {
			t.Fatalf("%q → pinned %d old %d", raw, pinned, old)
		}
		b2, p2, _, err := parseURL(base)
		if err != nil || b2 != base || p2 != 0 {
			t.Fatalf("base %q does not parse as itself: %q %d %v", base, b2, p2, err)
		}
	})
}

// TestFuzzFoundSlurmSubmitRefusesNegativeJobID (found by FuzzSlurmAnswers): an
// HTTP 200 whose job_id is negative (or {set:true,number:-1}) must not be
// reported as a submitted job: the runner would record id "-1", which
// Status refuses as "not a number", and end UNKNOWN (exit 4) 30 s later
// instead of failing the submit. FindByKey must not adopt such an id either.
func TestFuzzFoundSlurmSubmitRefusesNegativeJobID(t *testing.T) {
	for _, body := range []string{`{"job_id":-1}`, `{"job_id":{"set":true,"infinite":false,"number":-5}}`, `{"job_id":0,"result":{"job_id":-2}}`} {
		tr := fzTransport(func(*http.Request) *http.Response { return fzResponse(200, "application/json", []byte(body)) })
		be, err := New(backends.Config{URL: "http://slurm.test:6820/slurm/v0.0.40", HTTPClient: &http.Client{Transport: tr},
			Credentials: fzCreds{"username": "u", "token": "t0ken"}})
		if err != nil {
			t.Fatal(err)
		}
		if id, err := be.Submit(context.Background(), fzJob()); err == nil {
			t.Errorf("answer %s: Submit reported job %q; want an error (no valid job id)", body, id)
		}
	}
	tr := fzTransport(func(*http.Request) *http.Response {
		return fzResponse(200, "application/json", []byte(`{"jobs":[{"job_id":-3,"comment":"`+fzJob().Key+`","job_state":"RUNNING"}]}`))
	})
	be, _ := New(backends.Config{URL: "http://slurm.test:6820/slurm/v0.0.40", HTTPClient: &http.Client{Transport: tr},
		Credentials: fzCreds{"username": "u", "token": "t0ken"}})
	if id, err := be.(backends.Finder).FindByKey(context.Background(), fzJob().Key); err == nil && id != "" && !validID(id) {
		t.Errorf("FindByKey adopted job %q, which Status will never find", id)
	}
}
