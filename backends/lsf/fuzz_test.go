package lsf

// Fuzz targets for what the lsf backend reads from outside: Application
// Center's answers as JSON or XML (decodeDoc, errorMessage, job entries,
// history, times), its answers through the real HTTP code (logon, submit,
// status, cancel, find), and jobproperties (buildSpec, Validate, the
// multipart submit body). Invariants: decoded documents hold only the
// generic shapes, a mapped state is one of backends.States (DONE only for
// DONE, or a history that says "Done successfully"), a submit or find never
// reports an id that is not an LSF job id, refusals name their field, and
// what is sent decodes back to what was asked.

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
	"unicode/utf8"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

type fzCreds = testutil.MapCreds

type fzTransport = testutil.RoundTripFunc

var fzResponse = testutil.Response

var fzInvalidField = testutil.RequireFieldError

// fzCheckShape asserts that a decoded document holds only the generic shapes.
func fzCheckShape(t *testing.T, v any, depth int) {
	t.Helper()
	switch x := v.(type) {
	case nil, string, json.Number, bool:
	case node:
		for _, e := range x {
			fzCheckShape(t, e, depth+1)
		}
	case []any:
		for _, e := range x {
			fzCheckShape(t, e, depth+1)
		}
	default:
		t.Fatalf("decoded a %T", v)
	}
}

var fzDocSeeds = []string{
	`{"@total":"1","job":{"jobId":"1234","jobName":"br-1-x","jobStatus":"RUN","cwd":"/home/u","submitTimeGMT":"2025-01-01T00:00:00Z"}}`,
	`<jobs total="1"><job><jobId>1234</jobId><jobName>br-1</jobName><jobStatus>EXIT</jobStatus><exitStatus>256</exitStatus><exitInfo>TERM_OWNER</exitInfo><endTime>Mon Jan  2 15:04:05 2006</endTime></job></jobs>`,
	`<jobs total="2"><job><jobId>1</jobId><jobStatus>DONE</jobStatus></job><job><jobId>2</jobId><jobStatus>PEND</jobStatus><pendReason>queue full</pendReason></job></jobs>`,
	`{"jobs":{"job":[{"jobId":1,"jobStatus":"ZOMBI"},{"jobId":2,"jobStatus":"UNKWN"}]}}`,
	`{"Job":{"JOBID":"7","STATUS":"exit","exitCode":130}}`,
	`<User><token>u"2015-12-08T14:35:51Z"57hG==</token></User>`,
	`{"token":"u\"2015-12-08T14:35:51Z\"57hG=="}`,
	`<error><message>Invalid token</message></error>`,
	`{"message":"Application Center is not available"}`,
	`{"error":{"message":"nested"}}`,
	`<jobHistory><history>Job <1234>, Done successfully. exit code 0</history></jobHistory>`,
	`<jobHistory><history><content>Completed &lt;exit&gt;; exit code 3</content></history></jobHistory>`,
	`{"id":"1234"}`, `{"id":1234}`, `<job><id>1234</id></job>`, `{"job":{"jobId":"1234[3]"}}`,
	`<html><body>login</body></html>`, `plain text error`, ``, `<a>&nbsp;</a>`, `<?xml version="1.0"?><!DOCTYPE x><x/>`,
}

// FuzzDecodeDoc: any body decodes to the generic shapes or errors; every
// job entry maps to a contract state or errors; errorMessage is bounded for
// text it cannot decode.
func FuzzDecodeDoc(f *testing.F) {
	for _, s := range fzDocSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := errorMessage(body)
		doc, err := decodeDoc(body)
		if err != nil {
			if len(msg) > 303 {
				t.Fatalf("errorMessage of an undecodable body is %d bytes", len(msg))
			}
			return
		}
		if doc == nil {
			t.Fatal("decodeDoc gave a nil document without an error")
		}
		fzCheckShape(t, doc, 0)
		for _, e := range jobEntries(doc) {
			st, err := mapJob(e)
			if err != nil {
				continue
			}
			if !st.State.Valid() {
				t.Fatalf("state %q", st.State)
			}
			if st.State == backends.Done && st.Raw != "DONE" {
				t.Fatalf("DONE from raw %q", st.Raw)
			}
			if st.State.Final() != (st.Raw == "DONE" || st.Raw == "EXIT" || st.Raw == "ZOMBI" || st.Raw == "UNKWN") {
				t.Fatalf("raw %q gave %s", st.Raw, st.State)
			}
			for _, tm := range []time.Time{st.SubmitTime, st.StartTime, st.EndTime} {
				if !tm.IsZero() && tm.Location() != time.UTC {
					t.Fatalf("time %v is not UTC", tm)
				}
			}
			_ = entryID(e)
		}
		_ = str(get(doc, "token"))
	})
}

// FuzzLSFAnswers: logon succeeds; every other request is answered with the
// fuzzer's status, content type and body.
func FuzzLSFAnswers(f *testing.F) {
	for _, s := range fzDocSeeds {
		f.Add(uint16(200), "application/json", []byte(s))
	}
	f.Add(uint16(200), "application/xml", []byte(`<jobs total="1"><job><jobId>42</jobId><jobName>br-0123456789abcdef0123-fuzz</jobName><jobStatus>DONE</jobStatus></job></jobs>`))
	f.Add(uint16(404), "application/json", []byte(`{"message":"No jobs that match the specified criteria were found."}`))
	f.Add(uint16(400), "application/xml", []byte(`<error><message>bad queue</message></error>`))
	f.Add(uint16(403), "application/json", []byte(`{"message":"Invalid token"}`))
	f.Add(uint16(500), "text/plain", []byte(`Internal error: token expired`))
	f.Add(uint16(200), "text/html", []byte(`<html>login</html>`))
	f.Add(uint16(200), "application/json", []byte(`{"id":"-1"}`))
	f.Add(uint16(200), "application/json", []byte(`{"id":"0"}`))
	f.Fuzz(func(t *testing.T, status uint16, ctype string, body []byte) {
		if status < 100 || status > 999 {
			status = 200
		}
		tr := fzTransport(func(r *http.Request) *http.Response {
			if strings.HasSuffix(r.URL.Path, "/ws/logon") {
				return fzResponse(200, "application/json", []byte(`{"token":"u\"2099-01-01T00:00:00Z\"tok=="}`))
			}
			return fzResponse(int(status), ctype, body)
		})
		be, err := New(backends.Config{URL: "https://pac.test:8443", HTTPClient: &http.Client{Transport: tr},
			Credentials: fzCreds{"username": "u", "password": "SECRET-lsf-pass-9f8e7d"}})
		if err != nil {
			t.Fatal(err)
		}
		b := be.(*Backend)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		job := backends.Job{Name: "fuzz", Key: "br-0123456789abcdef0123", Script: "#!/bin/sh\necho hi\n"}
		id, err := b.Submit(ctx, job)
		switch {
		case err == nil:
			if !validID(id) || status < 200 || status > 299 {
				t.Fatalf("Submit reported job %q from HTTP %d %q", id, status, body)
			}
		case errors.Is(err, backends.ErrInvalid):
			fzInvalidField(t, err, "jobproperties", "credentials", "resourceURL")
		}
		for _, e := range []error{err} {
			if e != nil && strings.Contains(e.Error(), "SECRET-lsf-pass-9f8e7d") {
				t.Fatalf("the password is in the error: %v", e)
			}
		}
		st, err := b.Status(ctx, "42")
		if err == nil && !st.State.Valid() {
			t.Fatalf("Status gave %q", st.State)
		}
		_ = b.Cancel(ctx, "42")
		found, err := b.FindByKey(ctx, job.Key)
		if err == nil && found != "" && !validID(found) {
			t.Fatalf("FindByKey adopted %q", found)
		}
		_ = b.FetchOutput(ctx, "42", "out.txt", io.Discard)
	})
}

// fzXMLText reports whether s is made only of characters XML 1.0 can carry.
func fzXMLText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !(r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return false
		}
	}
	return true
}

// FuzzLSFJobProperties: jobproperties and the script through Validate, and
// the multipart submit body read back by the fake's parser.
func FuzzLSFJobProperties(f *testing.F) {
	for _, p := range []string{
		`{"queue":"normal","jobName":"x","outputFile":"o.txt","errorFile":"e.txt","runLimitHour":"1","runLimitMinute":30,"extraParams":"-R rusage[mem=100]","numNodes":2}`,
		`{"Queue":"normal","RunLimitHour":"2","OutputFileName":"out","ErrorFileName":"err","NodesNumber":"1"}`,
		`{"app":"generic","params":{"MY_PARAM":"v","N":3,"B":true}}`,
		`{"queue":"a","Queue":"b"}`, `{"kill":"true"}`, `{"pastid":"1"}`, `{"COMMANDTORUN":"x"}`, `{"runLimitMinute":60}`,
		`{"numNodes":0}`, `{"params":{"COMMANDTORUN":"x"}}`, `{"params":{"bad id":"x"}}`, `{"queue":{"x":1}}`, `{"queue":"a\nb"}`, `[]`, ``,
	} {
		f.Add([]byte(p), "#!/bin/sh\necho hi\n", "", []byte(`{"a":1}`))
	}
	f.Add([]byte(`{}`), "", "/home/u/run.sh", []byte(nil))
	f.Add([]byte(`{}`), "", "", []byte(nil))
	f.Add([]byte(`{}`), "echo no shebang", "", []byte(nil))
	f.Fuzz(func(t *testing.T, props []byte, script, scriptPath string, params []byte) {
		job := backends.Job{Name: "fuzz", Key: "br-0123456789abcdef0123", Properties: props, Script: script, ScriptPath: scriptPath, Parameters: params}
		be, err := New(backends.Config{URL: "https://pac.test:8443", Credentials: fzCreds{"username": "u", "password": "p"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := be.(backends.Validator).Validate(job); err != nil {
			fzInvalidField(t, err, "jobproperties", "jobdata.jobScript", "jobdata.additionalData")
			return
		}
		sp, err := buildSpec(job)
		if err != nil {
			t.Fatalf("Validate accepted what buildSpec refuses: %v", err)
		}
		if len(sp.params) < 2 || sp.params[0][0] != "COMMANDTORUN" || sp.params[1][0] != "JOB_NAME" || !strings.HasPrefix(sp.params[1][1], job.Key) {
			t.Fatalf("params %q", sp.params)
		}
		var buf bytes.Buffer
		if err := writeSubmit(context.Background(), &buf, sp, "outerB0undary", "innerB0undary"); err != nil {
			t.Fatalf("writeSubmit: %v", err)
		}
		req, _ := http.NewRequest(http.MethodPost, "https://pac.test/platform/ws/jobs/submit", &buf)
		req.Header.Set("Content-Type", "multipart/mixed; boundary=outerB0undary")
		got, err := fakelsf.ParseSubmit(req)
		if err != nil {
			t.Fatalf("the submit body does not parse: %v", err)
		}
		if got.App != sp.app {
			t.Fatalf("app %q sent as %q", sp.app, got.App)
		}
		for _, p := range sp.params {
			if !fzXMLText(p[1]) {
				continue // XML cannot carry it; see the report
			}
			if g := got.Params[p[0]]; g.Value != p[1] {
				t.Fatalf("parameter %s = %q arrived as %q", p[0], p[1], g.Value)
			}
		}
		for _, fl := range sp.files {
			if !bytes.Equal(got.Files[fl.name], fl.data) {
				t.Fatalf("file %s does not arrive byte for byte", fl.name)
			}
		}
	})
}

func FuzzLSFParseTime(f *testing.F) {
	for _, s := range []string{"2025-01-01T00:00:00Z", "2025-01-01 12:00:00", "2025/01/01 12:00:00", "Mon Jan  2 15:04:05 2006", "Jan  2 15:04:05 2006",
		"1700000000", "1700000000000", "-", "0", "-5", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm := parseTime(s)
		if !tm.IsZero() && tm.Location() != time.UTC {
			t.Fatalf("%q → %v not UTC", s, tm)
		}
		if n, ok := parseInt(s); ok {
			_ = n
		}
		_, _ = tokenTime(s)
		_ = validID(s)
	})
}
