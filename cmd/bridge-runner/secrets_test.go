package main

// Secret hygiene: jobs on every backend, with recognizable secret values in
// the credentials directory, against small fakes of a malicious or chatty
// server that echoes the secrets back in error bodies, state messages,
// warnings and logs. Nothing a person can read — stderr at debug level, the
// stdout summary, the record, the step outputs, the termination message —
// may contain a secret.

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/runner"
)

const (
	slurmToken    = "SECRET-slurm-token-9f8e7d"
	lsfPassword   = "SECRET-lsf-pass-9f8e7d"
	quantumAPIKey = "SECRET-quantum-apikey-9f8e7d"
	rayToken      = "SECRET-ray-token-9f8e7d"
	s3SecretKey   = "SECRET-s3-secretkey-9f8e7d"
	s3AccessKey   = "SECRET-s3-accesskey-9f8e7d"
	// Derived secrets: tokens the backends obtain with the mounted ones.
	lsfSessionToken = "SECRET-lsf-session-9f8e7d"
	quantumBearer   = "SECRET-quantum-bearer-9f8e7d"
)

// fakeServer records requests and counts submits.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	submits  int
}

func (f *fakeServer) seen(r *http.Request, submit bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	if submit {
		f.submits++
	}
}

func (f *fakeServer) submitted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.submits
}

func newFakeServer(t *testing.T, h func(f *fakeServer, w http.ResponseWriter, r *http.Request)) *fakeServer {
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(f, w, r) }))
	t.Cleanup(f.Close)
	return f
}

// credsDir writes one file per key.
func credsDir(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for k, v := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600))
	}
	return dir
}

// fakeSlurm is a chatty slurmrestd v0.0.40: it checks the token and echoes
// it in errors; mode picks what submit answers.
func fakeSlurm(t *testing.T, token, mode string) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		submit := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/job/submit")
		f.seen(r, submit)
		got := r.Header.Get("X-SLURM-USER-TOKEN")
		jsonErr := func(status int, desc string, errno int) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"meta": map[string]any{}, "errors": []any{map[string]any{
				"description": desc, "error_number": errno, "error": "echo: token=" + got, "source": "fake"}}})
		}
		if got != token {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "Authentication failure for token %q (user %s)", got, r.Header.Get("X-SLURM-USER-NAME"))
			return
		}
		ok := func(v map[string]any) {
			v["meta"] = map[string]any{"slurm": map[string]any{"release": "24.11.7"}}
			v["errors"] = []any{}
			v["warnings"] = []any{map[string]any{"description": "warning about " + got}}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/ping"):
			ok(map[string]any{"pings": []any{}})
		case submit:
			switch mode {
			case "refuse":
				jsonErr(http.StatusBadRequest, "Unknown key in job with token "+got, 9001)
			case "auth":
				jsonErr(http.StatusInternalServerError, "Failed with token "+got, 1007)
			case "broken":
				jsonErr(http.StatusInternalServerError, "Something odd with token "+got, 42)
			default:
				ok(map[string]any{"job_id": 5, "job_submit_user_msg": "accepted for " + got})
			}
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/job/5"):
			ok(map[string]any{"jobs": []any{map[string]any{"job_id": 5, "job_state": []string{"FAILED"},
				"state_reason": "NonZeroExitCode", "state_description": "your token " + got + " was seen",
				"exit_code": map[string]any{"status": []string{"ERROR"}, "return_code": map[string]any{"set": true, "number": 3}}}}})
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/jobs/"):
			ok(map[string]any{"jobs": []any{}})
		case r.Method == http.MethodDelete:
			ok(map[string]any{})
		default:
			jsonErr(http.StatusNotFound, "no route for "+got, 0)
		}
	})
}

// fakeLSF is a chatty Application Center: it echoes the password and the
// session token in its errors and job records.
func fakeLSF(t *testing.T, mode string) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		submit := strings.HasSuffix(r.URL.Path, "/ws/jobs/submit")
		f.seen(r, submit)
		body, _ := io.ReadAll(r.Body)
		cookie := r.Header.Get("Cookie")
		xmlErr := func(status int, msg string) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(status)
			var b strings.Builder
			_ = xml.EscapeText(&b, []byte(msg))
			fmt.Fprintf(w, "<error><message>%s</message></error>", b.String())
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/ws/logon"):
			var u struct {
				Name string `xml:"name"`
				Pass string `xml:"pass"`
			}
			_ = xml.Unmarshal(body, &u)
			if mode == "logon" || u.Pass != lsfPassword {
				xmlErr(http.StatusForbidden, "logon refused for "+u.Name+" with password "+u.Pass)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"token":"u\"2099-01-01T00:00:00Z\"%s"}`, lsfSessionToken)
		case !strings.Contains(cookie, lsfSessionToken):
			xmlErr(http.StatusForbidden, "bad cookie "+cookie)
		case submit && mode == "refuse":
			xmlErr(http.StatusBadRequest, "bad queue; your session is "+cookie+" and password "+lsfPassword)
		case submit:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"77"}`)
		case strings.HasSuffix(r.URL.Path, "/ws/jobs/77"):
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"@total": "1", "job": map[string]any{"jobId": "77", "jobStatus": "EXIT",
				"exitStatus": "768", "pendReason": lsfPassword, "exitInfo": "bad " + cookie}})
		case strings.HasPrefix(r.URL.Path, "/platform/ws/jobs") && r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"@total":"0"}`)
		default:
			xmlErr(http.StatusInternalServerError, "internal error with "+cookie)
		}
	})
}

// fakeQuantum serves IAM and the Qiskit Runtime API; both echo the API key
// and the bearer token.
func fakeQuantum(t *testing.T, mode string) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		submit := r.Method == http.MethodPost && r.URL.Path == "/api/v1/jobs"
		f.seen(r, submit)
		apiErr := func(status int, msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []any{map[string]any{"code": 1234, "message": msg, "solution": "stop sending " + r.Header.Get("Authorization")}}, "trace": quantumAPIKey})
		}
		if r.URL.Path == "/iam/token" {
			_ = r.ParseForm()
			key := r.PostForm.Get("apikey")
			if mode == "iam" || key != quantumAPIKey {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"errorCode": "BXNIM0415E", "errorMessage": "Provided API key " + key + " could not be found"})
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": quantumBearer, "expires_in": 3600})
			return
		}
		switch {
		case r.Header.Get("Authorization") != "Bearer "+quantumBearer:
			apiErr(http.StatusUnauthorized, "bad token "+r.Header.Get("Authorization"))
		case submit && mode == "refuse":
			apiErr(http.StatusBadRequest, "backend not allowed for key "+quantumAPIKey+" and "+r.Header.Get("Authorization"))
		case submit:
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "c5dge2d3rn7breq27i9g"})
		case r.URL.Path == "/api/v1/jobs/c5dge2d3rn7breq27i9g":
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "c5dge2d3rn7breq27i9g", "state": map[string]any{"status": "Failed",
				"reason": "failed with " + r.Header.Get("Authorization"), "reason_code": 1517, "reason_solution": "rotate " + quantumAPIKey}})
		case strings.HasSuffix(r.URL.Path, "/metrics"):
			apiErr(http.StatusNotFound, "no metrics for "+r.Header.Get("Authorization"))
		case r.URL.Path == "/api/v1/jobs":
			_ = json.NewEncoder(w).Encode(map[string]any{"jobs": []any{}})
		default:
			apiErr(http.StatusInternalServerError, "oops "+r.Header.Get("Authorization"))
		}
	})
}

// fakeRay is a chatty Ray dashboard: errors are plain-text tracebacks that
// quote the Authorization header; the job's log prints it too.
func fakeRay(t *testing.T, mode string) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		submit := r.Method == http.MethodPost && r.URL.Path == "/api/jobs/"
		f.seen(r, submit)
		auth := r.Header.Get("Authorization")
		plain := func(status int, msg string) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(status)
			fmt.Fprint(w, "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: "+msg)
		}
		var key string
		switch {
		case auth != "Bearer "+rayToken:
			plain(http.StatusForbidden, "Forbidden: Invalid authentication token "+auth)
		case submit && mode == "refuse":
			plain(http.StatusBadRequest, "bad runtime_env, sent with "+auth)
		case submit:
			var req struct {
				SubmissionID string `json:"submission_id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			key = req.SubmissionID
			_ = json.NewEncoder(w).Encode(map[string]any{"submission_id": key, "job_id": key})
		case strings.HasSuffix(r.URL.Path, "/logs/tail"): // Ray's log stream
			conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			_ = conn.WriteMessage(websocket.TextMessage, []byte("starting\nthe server says: "+auth+"\n"))
			_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
			_ = conn.Close()
		case strings.HasPrefix(r.URL.Path, "/api/jobs/") && r.Method == http.MethodGet:
			id := strings.TrimPrefix(r.URL.Path, "/api/jobs/")
			if mode == "find" {
				plain(http.StatusNotFound, "Job "+id+" does not exist ("+auth+")")
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"submission_id": id, "status": "FAILED", "message": "failed; token " + auth,
				"error_type": rayToken, "driver_exit_code": 1, "start_time": 1700000000000, "end_time": 1700000001000})
		default:
			plain(http.StatusInternalServerError, "internal "+auth)
		}
	})
}

// fakeS3 answers every S3 request with an AccessDenied error that quotes
// the request's Authorization header (with the access key) and a made-up
// secret-key echo.
func fakeS3(t *testing.T) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		f.seen(r, false)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		var b strings.Builder
		_ = xml.EscapeText(&b, []byte("denied: "+r.Header.Get("Authorization")+" secret "+s3SecretKey))
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>%s</Message><Resource>%s</Resource><RequestId>1</RequestId></Error>`,
			b.String(), r.URL.Path)
	})
}

// scanned is everything invoke leaves where people can read it.
func scanAll(t *testing.T, r cliResult, state, outDir string) string {
	var all strings.Builder
	all.WriteString(r.stdout)
	all.WriteString(r.stderr)
	_ = filepath.Walk(state, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".json") && !strings.Contains(p, "local-jobs") {
			b, _ := os.ReadFile(p)
			all.Write(b)
		}
		return nil
	})
	_ = filepath.Walk(outDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			all.Write(b)
		}
		return nil
	})
	return all.String()
}

// invokeScanned runs invoke with every output, debug logs and a
// termination log, and returns the result and all readable text.
func invokeScanned(t *testing.T, args ...string) (cliResult, string) {
	state, out := t.TempDir(), t.TempDir()
	term := filepath.Join(out, "termination-log")
	require.NoError(t, os.WriteFile(term, nil, 0o644))
	full := append([]string{"invoke", "--log-level", "debug", "--state-dir", state, "--job-name", "sec",
		"--termination-log", term, "--update-interval", "0.2", "--retry-budget", "1s", "--submit-lease", "2s", "--grace-period", "2s"}, args...)
	for _, o := range runner.OutputFields {
		full = append(full, "--"+o.Flag(), filepath.Join(out, o.Name))
	}
	r := run(t, full...)
	return r, scanAll(t, r, state, out)
}

func assertNoSecret(t *testing.T, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if i := strings.Index(text, s); i >= 0 {
			lo, hi := max(i-200, 0), min(i+len(s)+100, len(text))
			t.Errorf("secret %q leaked: ...%s...", s, text[lo:hi])
		}
	}
}

// TestSecretsNeverLeak: the mounted secrets never reach logs, the record,
// outputs or messages, whatever the server echoes.
func TestSecretsNeverLeak(t *testing.T) {
	clearEnv(t)
	t.Run("slurm", func(t *testing.T) {
		creds := credsDir(t, map[string]string{"username": "bridge", "token": slurmToken + "\n"})
		for _, mode := range []string{"ok", "refuse", "auth", "broken"} {
			t.Run(mode, func(t *testing.T) {
				srv := fakeSlurm(t, slurmToken, mode)
				r, text := invokeScanned(t, "--backend", "slurm", "--resource-url", srv.URL+"/slurm/v0.0.40", "--credentials-dir", creds,
					"--script", "#!/bin/bash\necho hi\n")
				t.Logf("exit %d, %d requests", r.code, len(srv.requests))
				assert.NotEqual(t, 0, r.code)
				assert.NotEmpty(t, srv.requests, "the fake was used")
				assertNoSecret(t, text, slurmToken)
			})
		}
		t.Run("wrong token echoed", func(t *testing.T) {
			srv := fakeSlurm(t, "another-token", "ok")
			r, text := invokeScanned(t, "--backend", "slurm", "--resource-url", srv.URL+"/slurm/v0.0.40", "--credentials-dir", creds,
				"--script", "#!/bin/bash\necho hi\n")
			assert.Equal(t, ExitInvalid, r.code, r.stderr)
			assertNoSecret(t, text, slurmToken)
		})
	})
	t.Run("lsf", func(t *testing.T) {
		creds := credsDir(t, map[string]string{"username": "bridge", "password": lsfPassword + "\n"})
		for _, mode := range []string{"ok", "refuse", "logon"} {
			t.Run(mode, func(t *testing.T) {
				srv := fakeLSF(t, mode)
				r, text := invokeScanned(t, "--backend", "lsf", "--resource-url", srv.URL, "--credentials-dir", creds, "--script", "#!/bin/sh\necho hi\n")
				t.Logf("exit %d, requests %v", r.code, srv.requests)
				assert.NotEqual(t, 0, r.code)
				assertNoSecret(t, text, lsfPassword)
				assertNoSecret(t, strings.ToUpper(text), strings.ToUpper(lsfPassword))
			})
		}
	})
	t.Run("quantum", func(t *testing.T) {
		for _, mode := range []string{"ok", "refuse", "iam"} {
			t.Run(mode, func(t *testing.T) {
				srv := fakeQuantum(t, mode)
				creds := credsDir(t, map[string]string{"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::",
					"apikey": quantumAPIKey + "\n", "iam_url": srv.URL + "/iam/token"})
				r, text := invokeScanned(t, "--backend", "quantum", "--resource-url", srv.URL+"/api/v1", "--credentials-dir", creds,
					"--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`, "--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;")
				t.Logf("exit %d, requests %v", r.code, srv.requests)
				assert.NotEqual(t, 0, r.code)
				assertNoSecret(t, text, quantumAPIKey)
			})
		}
	})
	t.Run("ray", func(t *testing.T) {
		creds := credsDir(t, map[string]string{"token": rayToken + "\n"})
		for _, mode := range []string{"refuse", "find"} {
			t.Run(mode, func(t *testing.T) {
				srv := fakeRay(t, mode)
				r, text := invokeScanned(t, "--backend", "ray", "--resource-url", srv.URL, "--credentials-dir", creds, "--script", "print('hi')")
				t.Logf("exit %d, requests %v", r.code, srv.requests)
				assert.NotEqual(t, 0, r.code)
				assertNoSecret(t, text, rayToken)
			})
		}
	})
	t.Run("local with S3", func(t *testing.T) {
		srv := fakeS3(t)
		s3creds := credsDir(t, map[string]string{"accesskey": s3AccessKey + "\n", "secretkey": s3SecretKey + "\n"})
		r, text := invokeScanned(t, "--backend", "local", "--s3-credentials-dir", s3creds,
			"--script-location", "s3", "--script", "bucket:job.sh", "--s3-endpoint", strings.TrimPrefix(srv.URL, "http://"), "--s3-secure", "false",
			"--s3-region", "us-east-1")
		t.Logf("exit %d, requests %v", r.code, srv.requests)
		assert.Equal(t, ExitInvalid, r.code, "refused S3 credentials: nothing submitted: %s", r.stderr)
		assert.NotEmpty(t, srv.requests, "the fake S3 was asked")
		assertNoSecret(t, text, s3SecretKey, s3AccessKey)
	})
}

// TestSecretsInJobOutputAreScrubbed: the job's own output, streamed to
// stderr while it runs, comes from the server too (Ray's log stream); a
// server that puts the token there must not get it into invoke's stderr.
func TestSecretsInJobOutputAreScrubbed(t *testing.T) {
	clearEnv(t)
	creds := credsDir(t, map[string]string{"token": rayToken + "\n"})
	srv := fakeRay(t, "ok")
	r, text := invokeScanned(t, "--backend", "ray", "--resource-url", srv.URL, "--credentials-dir", creds, "--script", "print('hi')")
	t.Logf("exit %d, requests %v", r.code, srv.requests)
	assert.Equal(t, ExitFailed, r.code, r.stderr)
	assert.Contains(t, r.stderr, "the server says:", "the job's log was streamed")
	assertNoSecret(t, text, rayToken)
}

// TestSecretsDerivedTokensAreScrubbed: tokens a backend obtains with the
// mounted secrets (LSF's platform_token session, the IAM bearer token of
// IBM Quantum) grant access as well; a server echoing them must not get
// them into logs, the record or outputs either.
func TestSecretsDerivedTokensAreScrubbed(t *testing.T) {
	clearEnv(t)
	t.Run("lsf session token", func(t *testing.T) {
		creds := credsDir(t, map[string]string{"username": "bridge", "password": lsfPassword})
		for _, mode := range []string{"ok", "refuse"} {
			t.Run(mode, func(t *testing.T) {
				srv := fakeLSF(t, mode)
				r, text := invokeScanned(t, "--backend", "lsf", "--resource-url", srv.URL, "--credentials-dir", creds, "--script", "#!/bin/sh\necho hi\n")
				t.Logf("exit %d", r.code)
				assertNoSecret(t, text, lsfSessionToken)
			})
		}
	})
	t.Run("quantum bearer token", func(t *testing.T) {
		for _, mode := range []string{"ok", "refuse"} {
			t.Run(mode, func(t *testing.T) {
				srv := fakeQuantum(t, mode)
				creds := credsDir(t, map[string]string{"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::",
					"apikey": quantumAPIKey, "iam_url": srv.URL + "/iam/token"})
				r, text := invokeScanned(t, "--backend", "quantum", "--resource-url", srv.URL+"/api/v1", "--credentials-dir", creds,
					"--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`, "--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;")
				t.Logf("exit %d", r.code)
				assertNoSecret(t, text, quantumBearer)
			})
		}
	})
}

// TestSecretsCutByTruncationAreScrubbed: backends shorten long error
// bodies (Ray to 2000 bytes, slurmrestd's plain-text errors to 300) before
// the runner scrubs them; a secret cut in two by the shortening no longer
// matches, and its first part must not leak either.
func TestSecretsCutByTruncationAreScrubbed(t *testing.T) {
	clearEnv(t)
	const keep = 14 // bytes of the secret left before the cut
	t.Run("ray", func(t *testing.T) {
		srv := newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			f.seen(r, r.Method == http.MethodPost)
			auth := r.Header.Get("Authorization") // "Bearer <token>"
			pad := strings.Repeat("x", 2000-len("Bearer ")-keep-1)
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, pad+" "+auth+" and more")
		})
		creds := credsDir(t, map[string]string{"token": rayToken})
		r, text := invokeScanned(t, "--backend", "ray", "--resource-url", srv.URL, "--credentials-dir", creds, "--script", "print('hi')")
		assert.Equal(t, ExitInvalid, r.code, r.stderr)
		assertNoSecret(t, text, rayToken[:keep])
	})
	t.Run("slurm", func(t *testing.T) {
		srv := newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			f.seen(r, strings.HasSuffix(r.URL.Path, "/job/submit"))
			tok := r.Header.Get("X-SLURM-USER-TOKEN")
			if strings.HasSuffix(r.URL.Path, "/job/submit") {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, strings.Repeat("y", 300-keep-1)+" "+tok+" trailing words")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"meta":{},"errors":[]}`)
		})
		creds := credsDir(t, map[string]string{"username": "u", "token": slurmToken})
		r, text := invokeScanned(t, "--backend", "slurm", "--resource-url", srv.URL+"/slurm/v0.0.40", "--credentials-dir", creds, "--script", "#!/bin/sh\n")
		assert.Equal(t, ExitInvalid, r.code, r.stderr)
		assertNoSecret(t, text, slurmToken[:keep])
	})
}
