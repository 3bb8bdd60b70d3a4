package main

// The hostile-input suite: inputs and servers that nobody here wrote, one
// case per fault class of the fault table (README "Faults"). Each permanent
// fault exits 2 at once, naming the field and the fix, and submits nothing;
// connection refused and timeouts stay 75. The RBAC and namespace cases run
// against the real kube-apiserver.

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
)

// hostileSecret is a password that must never appear anywhere.
const hostileSecret = "pw-Hostile-9f3a"

// refused asserts exit 2, that the output names field, that nothing was
// submitted and that the secret is in no output, output file or record.
func refused(t *testing.T, r cliResult, state, field string, scanFiles bool) {
	t.Helper()
	assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout+r.stderr, field, "the message names the field")
	entries, _ := os.ReadDir(filepath.Join(state, "local-jobs"))
	assert.Empty(t, entries, "nothing was submitted")
	assert.NotContains(t, r.stdout+r.stderr, hostileSecret)
	if !scanFiles {
		return
	}
	_ = filepath.Walk(state, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			assert.NotContains(t, string(b), hostileSecret, "stored in %s", p)
		}
		return nil
	})
}

func TestHostileInputPermanentFaults(t *testing.T) {
	clearEnv(t)
	srv := recordingServer(t)
	creds := credsDir(t, map[string]string{"username": "u", "token": "tok-abcdef"})
	bigCreds := credsDir(t, map[string]string{"username": "u", "token": strings.Repeat("t", 200<<10)})
	s3Creds := credsDir(t, map[string]string{"accesskey": "ak-abcdef", "secretkey": "sk-abcdef"})
	slurm := func(url string, extra ...string) []string {
		return append([]string{"invoke", "--job-name", "j", "--backend", "slurm", "--resource-url", url, "--credentials-dir", creds,
			"--script", "#!/bin/sh\nhostname\n"}, extra...)
	}
	local := func(extra ...string) []string {
		return append([]string{"invoke", "--job-name", "j", "--backend", "local", "--script", "true"}, extra...)
	}
	cases := []struct {
		name, field string
		args        []string
		record      map[string]string // a record edited by hand, written first
	}{
		// URLs with user info: refused, never printed or stored.
		{"resource URL with a password", "resourceURL", slurm("https://u:" + hostileSecret + "@" + strings.TrimPrefix(srv.URL, "http://")), nil},
		{"resource URL with a password and a bad port", "resourceURL", slurm("http://u:" + hostileSecret + "@host:port/x"), nil},
		{"create-configmap with a password in the URL", "resourceURL", []string{"create-configmap", "--job-name", "j", "--backend", "slurm",
			"--resource-url", "https://u:" + hostileSecret + "@slurm:6820", "--script", "#!/bin/sh\n"}, nil},
		{"record with a password in the URL", "resourceURL", []string{"invoke", "--job-name", "j"},
			map[string]string{"backend": "slurm", "resourceURL": "https://u:" + hostileSecret + "@slurm:6820", "jobdata.jobScript": "#!/bin/sh\n"}},
		{"S3 endpoint with user info", "s3.endpoint", local("--s3-endpoint", "ak:"+hostileSecret+"@127.0.0.1:9000", "--s3-upload-bucket", "out",
			"--s3-credentials-dir", s3Creds), nil},
		// Ports.
		{"resource URL port out of range", "resourceURL", slurm("http://127.0.0.1:70000"), nil},
		{"resource URL port zero", "resourceURL", slurm("http://127.0.0.1:0"), nil},
		{"S3 endpoint with an empty port", "s3.endpoint", local("--s3-endpoint", "127.0.0.1:", "--s3-upload-bucket", "out", "--s3-credentials-dir", s3Creds), nil},
		{"S3 endpoint port out of range", "s3.endpoint", local("--s3-endpoint", "127.0.0.1:65536", "--s3-upload-bucket", "out", "--s3-credentials-dir", s3Creds), nil},
		// Durations.
		{"negative grace period", "--grace-period", local("--grace-period", "-5s"), nil},
		{"absurd grace period", "--grace-period", local("--grace-period", "100000h"), nil},
		{"negative submit lease", "--submit-lease", local("--submit-lease", "-1s"), nil},
		{"zero retry budget", "--retry-budget", local("--retry-budget", "0s"), nil},
		{"negative wait", "--wait", []string{"cleanup", "--job-name", "j", "--wait", "-1s"}, nil},
		{"update interval NaN", "updateInterval", local("--update-interval", "NaN"), nil},
		{"update interval overflowing", "updateInterval", local("--update-interval", "1e300"), nil},
		{"update interval negative", "updateInterval", local("--update-interval", "-20"), nil},
		{"record: update interval Inf", "updateInterval", []string{"invoke", "--job-name", "j"},
			map[string]string{"backend": "local", "jobdata.jobScript": "true", "updateInterval": "Inf"}},
		// Job names that one store or the other cannot take.
		{"job name a..b", "job-name", []string{"invoke", "--job-name", "a..b", "--backend", "local", "--script", "true"}, nil},
		{"job name x.-y", "job-name", []string{"create-configmap", "--job-name", "x.-y", "--backend", "local", "--script", "true"}, nil},
		{"job name too long for a file", "job-name", []string{"invoke", "--job-name", strings.Repeat("a", record.MaxJobNameLen+1), "--backend", "local", "--script", "true"}, nil},
		{"cleanup of job name a..b", "job-name", []string{"cleanup", "--job-name", "a..b"}, nil},
		// Credentials.
		{"credential file of 200 KiB", "credentials", slurm(srv.URL, "--credentials-dir", bigCreds), nil},
		{"S3 credentials missing", "--s3-credentials-dir", local("--s3-endpoint", "127.0.0.1:9", "--s3-upload-bucket", "out",
			"--s3-credentials-dir", filepath.Join(t.TempDir(), "absent")), nil},
		// The hostile-input sweep's permanent faults that exited 75 after
		// the retry budget (each was retried as a network failure).
		{"token with a newline", "credentials", slurm(srv.URL, "--credentials-dir", credsDir(t, map[string]string{"username": "u", "token": "tok-ab\ncdef"})), nil},
		{"token with a NUL", "credentials", slurm(srv.URL, "--credentials-dir", credsDir(t, map[string]string{"username": "u", "token": "tok-ab\x00cdef"})), nil},
		{"resource URL without a host", "resourceURL", slurm("http://:8080"), nil},
		{"resource URL with a 100,000-character host", "resourceURL", slurm("http://" + strings.Repeat("a", 100000) + "/"), nil},
		{"resource URL with a host beginning with -", "resourceURL", slurm("http://-oProxyCommand=x:8080/"), nil},
		{"S3 endpoint with a host beginning with -", "s3.endpoint", local("--s3-endpoint", "-x:9000", "--s3-upload-bucket", "out", "--s3-credentials-dir", s3Creds), nil},
		{"S3 endpoint without a host", "s3.endpoint", local("--s3-endpoint", ":9000", "--s3-upload-bucket", "out", "--s3-credentials-dir", s3Creds), nil},
		// Refused before S3 is asked (its endpoint here refuses connections).
		{"two additionalData objects with one base name", "jobdata.additionalData", local("--additional-data", "in:a/data.csv,in:b/data.csv",
			"--s3-endpoint", closedPort(t), "--s3-credentials-dir", s3Creds), nil},
		{"update interval in hex", "updateInterval", local("--update-interval", "0x1p4"), nil},
		{"update interval with _", "updateInterval", local("--update-interval", "1_000"), nil},
		{"record: update interval in hex", "updateInterval", []string{"invoke", "--job-name", "j"},
			map[string]string{"backend": "local", "jobdata.jobScript": "true", "updateInterval": "0x1p4"}},
		{"CA file /dev/zero", "ca-file", slurm(srv.URL, "--ca-file", "/dev/zero"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			if c.record != nil {
				writeRecord(t, state, "j", c.record)
			}
			outFile := filepath.Join(t.TempDir(), "message")
			args := append(c.args, "--state-dir", state)
			if c.args[0] == "invoke" {
				args = append(args, "--output-message", outFile)
			}
			before := srv.submitted()
			r := run(t, args...)
			refused(t, r, state, c.field, c.record == nil)
			if c.record != nil {
				rec, err := record.NewFileStore(state, "j").Get(context.Background())
				require.NoError(t, err)
				assert.NotContains(t, rec.Data[record.KeyMessage], hostileSecret)
			}
			b, _ := os.ReadFile(outFile)
			assert.NotContains(t, string(b), hostileSecret)
			assert.NotContains(t, r.stdout+r.stderr, "2562047h", "an overflow is not printed")
			assert.Equal(t, before, srv.submitted(), "nothing reached the remote system")
		})
	}
	assert.Zero(t, srv.submitted())
}

// TestHostileInputStateDirs: a state dir, record or lock path that cannot
// be a writable directory or file is exit 2 naming --state-dir, not 75.
func TestHostileInputStateDirs(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	recDir := filepath.Join(dir, "rec")
	require.NoError(t, os.MkdirAll(filepath.Join(recDir, "j-bridge-cm.json"), 0o700))
	lockDir := filepath.Join(dir, "lock")
	require.NoError(t, os.MkdirAll(filepath.Join(lockDir, "j-bridge-cm.json.lock"), 0o700))
	for name, state := range map[string]string{"a file": file, "below a file": filepath.Join(file, "sub"),
		"record is a directory": recDir, "lock is a directory": lockDir} {
		for _, step := range []string{"create-configmap", "invoke", "cleanup"} {
			t.Run(name+"/"+step, func(t *testing.T) {
				args := []string{step, "--state-dir", state, "--job-name", "j", "--retry-budget", "30s"}
				switch step {
				case "create-configmap":
					args = []string{step, "--state-dir", state, "--job-name", "j", "--backend", "local", "--script", "true"}
				case "cleanup":
					args = []string{step, "--state-dir", state, "--job-name", "j"}
				default:
					args = append(args, "--backend", "local", "--script", "true")
				}
				r := run(t, args...)
				assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
				assert.Contains(t, r.stdout+r.stderr, "state-dir")
			})
		}
	}
}

// TestHostileInputTLSFailureIsNamedAndFinal: a backend whose certificate
// does not verify ends invoke with exit 2 after a handful of handshakes, not
// after the retry budget, and the final message and the record name the
// certificate problem.
func TestHostileInputTLSFailureIsNamedAndFinal(t *testing.T) {
	clearEnv(t)
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Config.ErrorLog = nil
	srv.StartTLS()
	defer srv.Close()
	creds := credsDir(t, map[string]string{"username": "u", "token": "tok-abcdef", "password": "pass-abcdef",
		"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::", "apikey": "key-abcdef", "iam_url": srv.URL + "/iam/token"})
	for _, backend := range []string{"slurm", "ray", "lsf", "quantum"} {
		t.Run(backend, func(t *testing.T) {
			state := t.TempDir()
			conns.Store(0)
			args := []string{"--script", "#!/bin/sh\nhostname\n"}
			if backend == "quantum" {
				args = []string{"--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;", "--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`}
			}
			// The record made first (as a workflow's create-configmap step
			// does) stays to name the problem; one invoke made itself would
			// go with the refusal (TestRefusedInvokeLeavesNothing).
			require.Equal(t, ExitDone, run(t, append([]string{"create-configmap", "--state-dir", state, "--job-name", "j", "--backend", backend, "--resource-url", srv.URL}, args...)...).code)
			r := run(t, append([]string{"invoke", "--state-dir", state, "--job-name", "j", "--backend", backend, "--resource-url", srv.URL,
				"--credentials-dir", creds, "--retry-budget", "3m", "--submit-lease", "3m"}, args...)...)
			assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			msg, _ := r.summary["message"].(string)
			assert.Contains(t, msg, "TLS verification")
			assert.Contains(t, msg, "not trust", "the final message names the certificate problem")
			assert.Contains(t, msg, "--ca-file")
			assert.LessOrEqual(t, conns.Load(), int64(10), "a certificate that does not verify is not retried (slurm probes 6 API versions at once)")
			rec, err := record.NewFileStore(state, "j").Get(context.Background())
			require.NoError(t, err)
			assert.Contains(t, rec.Data[record.KeyMessage], "not trust", "the record names the certificate problem")
		})
	}
}

// TestHostileInputTransientStaysTransient: connection refused is exit 75,
// and an unreachable slurmrestd is said to be unreachable, with the last
// real failure: not "submit refused" (nothing refused the job) nor a bare
// "context deadline exceeded".
func TestHostileInputTransientStaysTransient(t *testing.T) {
	clearEnv(t)
	creds := credsDir(t, map[string]string{"username": "u", "token": "tok-abcdef"})
	r := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", "slurm", "--resource-url", "http://"+closedPort(t),
		"--credentials-dir", creds, "--script", "#!/bin/sh\n", "--retry-budget", "1s", "--submit-lease", "2s")
	assert.Equal(t, ExitTempFail, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	msg, _ := r.summary["message"].(string)
	assert.Contains(t, msg, "could not be reached")
	assert.Contains(t, msg, "connection refused", "the last real failure is named")
	assert.NotContains(t, msg, "refused:")

	// A slurmrestd behind a partition (the fault proxy's blackhole): no
	// answer at all, each request ending on its own timeout.
	srv := recordingServer(t)
	px := testutil.NewProxy(t, strings.TrimPrefix(srv.URL, "http://"))
	px.Set(t, testutil.Blackhole)
	r = run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", "slurm", "--resource-url", "http://"+px.Addr+"/slurm/v0.0.42/",
		"--credentials-dir", creds, "--script", "#!/bin/sh\n", "--retry-budget", "3s", "--submit-lease", "10s")
	assert.Equal(t, ExitTempFail, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	msg, _ = r.summary["message"].(string)
	assert.Contains(t, msg, "could not be reached")
	assert.NotContains(t, msg, "submit refused")
	assert.NotRegexp(t, `: context deadline exceeded$`, msg, "the cause is said as no answer")
}

// TestHostileInputS3RefusedIsTransient: an S3 endpoint that refuses
// connections (down, restarting) is exit 75 naming s3.endpoint, not exit 2:
// the retry may find it up. Before, it was exit 2 ("check s3.endpoint").
func TestHostileInputS3RefusedIsTransient(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	s3Creds := credsDir(t, map[string]string{"accesskey": "ak-abcdef", "secretkey": "sk-abcdef"})
	r := run(t, "invoke", "--state-dir", state, "--job-name", "j", "--backend", "local", "--script", "true",
		"--additional-data", "in:data.csv", "--s3-endpoint", closedPort(t), "--s3-credentials-dir", s3Creds, "--retry-budget", "2s")
	assert.Equal(t, ExitTempFail, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	msg, _ := r.summary["message"].(string)
	assert.Contains(t, msg, "s3.endpoint")
	assert.Contains(t, msg, "connection refused")
	entries, _ := os.ReadDir(filepath.Join(state, "local-jobs"))
	assert.Empty(t, entries, "nothing was submitted")
}

// TestHostileInputLSFServerErrorsMentioningToken: an Application Center
// answering 500 or 502 with a body that mentions "token" is a server fault
// (exit 75 after the budget): the status code decides, never body text.
func TestHostileInputLSFServerErrorsMentioningToken(t *testing.T) {
	clearEnv(t)
	creds := credsDir(t, map[string]string{"username": "u", "password": "pass-abcdef"})
	for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway} {
		for _, at := range []string{"logon", "submit"} {
			t.Run(fmt.Sprintf("%s/%d", at, status), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if at == "submit" && strings.HasSuffix(r.URL.Path, "/ws/logon") {
						w.Header().Set("Content-Type", "application/json")
						_, _ = io.WriteString(w, `{"token":"u\"2099-01-01T00:00:00Z\"sess-0123456789"}`)
						return
					}
					w.Header().Set("Content-Type", "application/xml")
					w.WriteHeader(status)
					_, _ = io.WriteString(w, "<error><message>Invalid token: the token has expired, log on again</message></error>")
				}))
				defer srv.Close()
				r := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", "lsf", "--resource-url", srv.URL,
					"--credentials-dir", creds, "--script", "#!/bin/sh\nhostname\n", "--retry-budget", "2s", "--submit-lease", "10s")
				assert.Equal(t, ExitTempFail, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			})
		}
	}
}

// TestHostileInputHandEditedID: an id edited by hand in the record is
// refused by invoke and by cleanup (which must not cancel another job).
func TestHostileInputHandEditedID(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	r := run(t, "invoke", "--state-dir", state, "--job-name", "j", "--backend", "local", "--script", "true")
	require.Equal(t, ExitDone, r.code, r.stderr)
	store := record.NewFileStore(state, "j")
	rec, err := store.Get(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, rec.Data[record.KeyIDFingerprint])
	rec.Data[record.KeyID] = "someone-elses-job"
	rec.Data[record.KeyJobStatus] = "RUNNING" // so that cleanup would cancel it
	_, err = store.Update(context.Background(), rec)
	require.NoError(t, err)
	r = run(t, "invoke", "--state-dir", state, "--job-name", "j")
	assert.Equal(t, ExitInvalid, r.code, r.stderr)
	assert.Contains(t, r.stdout+r.stderr, "someone-elses-job")
	assert.Contains(t, r.stdout+r.stderr, record.KeyIDFingerprint)
	r = run(t, "cleanup", "--state-dir", state, "--job-name", "j")
	assert.Equal(t, ExitInvalid, r.code, r.stderr)
	_, err = store.Get(context.Background())
	assert.NoError(t, err, "the record is kept for a person to look at")

	// An id put into a record by hand, without a fingerprint, that the
	// backend does not know: refused at once, not followed into UNKNOWN.
	other := t.TempDir()
	writeRecord(t, other, "j", map[string]string{"backend": "local", "jobdata.jobScript": "true", "id": "no-such-job"})
	r = run(t, "invoke", "--state-dir", other, "--job-name", "j")
	assert.Equal(t, ExitInvalid, r.code, r.stderr)
	assert.Contains(t, r.stdout+r.stderr, "no-such-job")
	assert.Contains(t, r.stdout+r.stderr, "not a job the backend knows")
}

// TestHostileInputRelativeStateDir: a relative --state-dir works with the
// local backend (its supervisor runs in the job's directory).
func TestHostileInputRelativeStateDir(t *testing.T) {
	clearEnv(t)
	t.Chdir(t.TempDir())
	r := run(t, "invoke", "--state-dir", "rel/state", "--job-name", "j", "--backend", "local", "--script", "echo rel", "--update-interval", "0.2")
	require.Equal(t, ExitDone, r.code, r.stderr)
	assert.FileExists(t, filepath.Join("rel", "state", "j-bridge-cm.json"))
}

// TestHostileInputLongestJobName: the longest accepted job name works in the
// file store end to end.
func TestHostileInputLongestJobName(t *testing.T) {
	clearEnv(t)
	name := strings.Repeat("n", record.MaxJobNameLen)
	r := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", name, "--backend", "local", "--script", "true", "--update-interval", "0.2")
	require.Equal(t, ExitDone, r.code, r.stderr)
}

// TestHostileInputDiskFullKeepsExitCode: a local job that fills the disk
// keeps its exit code; once space is back a re-invoke reports it.
func TestHostileInputDiskFullKeepsExitCode(t *testing.T) {
	clearEnv(t)
	state := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.MkdirAll(state, 0o700))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", state).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mounting a small tmpfs: %v: %s", err, out)
		}
		t.Skipf("cannot mount a small tmpfs here: %v: %s", err, out)
	}
	// Lazy: the job's supervisor may still be retrying in its directory.
	t.Cleanup(func() { _ = exec.Command("umount", "-l", state).Run() })
	fill := filepath.Join(state, "fill")
	script := "dd if=/dev/zero of=" + fill + " bs=64k 2>/dev/null; exit 7"
	r := run(t, "invoke", "--state-dir", state, "--job-name", "j", "--backend", "local", "--script", script,
		"--update-interval", "0.2", "--retry-budget", "2s")
	t.Logf("with the disk full: exit %d: %s", r.code, r.summary["message"])
	assert.NotEqual(t, ExitInvalid, r.code, "a full disk is not a permanent fault")
	require.NoError(t, os.Remove(fill))
	r = run(t, "invoke", "--state-dir", state, "--job-name", "j", "--retry-budget", "10s")
	assert.Equal(t, ExitFailed, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	assert.Equal(t, "7", r.summary["jobExitCode"], "the exit code survived the full disk")
}

// TestHostileInputFinalRecordWriteFails: a job that ends DONE while the
// disk under the record is full: its final state cannot be recorded, so
// invoke exits 75, and then neither stdout nor the status output says DONE
// (the step did not finish; the message keeps the job's state). Once space
// is back, the retry re-attaches and reports DONE with exit 0.
func TestHostileInputFinalRecordWriteFails(t *testing.T) {
	clearEnv(t)
	state := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.MkdirAll(state, 0o700))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", state).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mounting a small tmpfs: %v: %s", err, out)
		}
		t.Skipf("cannot mount a small tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", state).Run() })
	fill := filepath.Join(state, "fill")
	outs := t.TempDir()
	r := run(t, "invoke", "--state-dir", state, "--job-name", "j", "--backend", "local", "--update-interval", "0.2", "--retry-budget", "2s",
		"--script", "dd if=/dev/zero of="+fill+" bs=64k 2>/dev/null; exit 0", "--output-status", filepath.Join(outs, "status"))
	require.Equal(t, ExitTempFail, r.code, "the final state could not be recorded: stdout=%s stderr=%s", r.stdout, r.stderr)
	assert.Empty(t, r.summary["status"], "the summary names no state while invoke exits 75")
	assert.NotContains(t, r.stdout, `"status":"DONE"`)
	assert.EqualValues(t, ExitTempFail, r.summary["exit"])
	msg, _ := r.summary["message"].(string)
	assert.Contains(t, msg, "DONE", "the message keeps the job's state")
	assert.Contains(t, msg, "recording that", "the message says the record write failed")
	b, err := os.ReadFile(filepath.Join(outs, "status"))
	require.NoError(t, err)
	assert.Empty(t, string(b), "the status output names no state either")
	require.NoError(t, os.Remove(fill))
	r = run(t, "invoke", "--state-dir", state, "--job-name", "j", "--retry-budget", "10s")
	assert.Equal(t, ExitDone, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	assert.Equal(t, "DONE", r.summary["status"])
}

// TestHostileInputKubernetes: RBAC and namespace faults against the real
// kube-apiserver are exit 2 with the verb, resource and the Role to bind.
func TestHostileInputKubernetes(t *testing.T) {
	clearEnv(t)
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	ctx := context.Background()
	// A ServiceAccount with no Role at all, and one that may only read.
	bare := writeKubeconfig(t, testkube.ServiceAccountConfig(t, admin, ns, "bare"), ns)
	readerCfg := testkube.ServiceAccountConfig(t, admin, ns, "reader")
	_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	reader := writeKubeconfig(t, readerCfg, ns)
	adminKC := writeKubeconfig(t, testkube.Config(t), ns)

	job := []string{"--backend", "local", "--script", "true", "--retry-budget", "30s"}
	cases := []struct {
		name  string
		args  []string
		wants []string
	}{
		{"create without any Role", append([]string{"create-configmap", "--kubeconfig", bare, "--job-name", "r1"}, job[:4]...),
			[]string{"rbac", "create configmaps", "workflows/rbac", "ServiceAccount", "system:serviceaccount:" + ns + ":bare"}},
		// invoke's first request for a new record is its create (with the
		// submit intent in it).
		{"invoke without any Role", append([]string{"invoke", "--kubeconfig", bare, "--job-name", "r2"}, job...),
			[]string{"rbac", "create configmaps", "workflows/rbac"}},
		{"invoke with a read-only Role", append([]string{"invoke", "--kubeconfig", reader, "--job-name", "r3"}, job...),
			[]string{"rbac", "create configmaps", "workflows/rbac"}},
		{"cleanup without any Role", []string{"cleanup", "--kubeconfig", bare, "--job-name", "r4"},
			[]string{"rbac", "get configmaps"}},
		{"namespace that does not exist", append([]string{"invoke", "--kubeconfig", adminKC, "--namespace", "no-such-ns-" + ns, "--job-name", "n1"}, job...),
			[]string{"namespace", "no-such-ns-" + ns}},
		{"namespace not a valid name", append([]string{"invoke", "--kubeconfig", adminKC, "--namespace", "Bad_NS", "--job-name", "n2"}, job...),
			[]string{"namespace", "Bad_NS"}},
		{"job name a..b with a ConfigMap", append([]string{"invoke", "--kubeconfig", adminKC, "--job-name", "a..b"}, job...),
			[]string{"job-name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.args...)
			assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			for _, w := range c.wants {
				assert.Contains(t, r.stdout+r.stderr, w)
			}
		})
	}
	// An API server whose certificate does not verify: exit 2 naming the problem.
	wrongCA := *testkube.Config(t)
	wrongCA.CAData, wrongCA.CAFile = selfSignedPEM(t), ""
	r := run(t, "invoke", "--kubeconfig", writeKubeconfig(t, &wrongCA, ns), "--job-name", "tls", "--backend", "local", "--script", "true", "--retry-budget", "1m")
	assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout+r.stderr, "TLS verification of the Kubernetes API server failed")
	assert.Contains(t, r.stdout+r.stderr, "kubeconfig")

	// A kube-apiserver that is not there stays transient.
	down := *testkube.Config(t)
	down.Host = "https://" + closedPort(t)
	r = run(t, append([]string{"invoke", "--kubeconfig", writeKubeconfig(t, &down, ns), "--job-name", "down"}, "--backend", "local", "--script", "true", "--retry-budget", "1s")...)
	assert.Equal(t, ExitTempFail, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
}

// selfSignedPEM is the certificate of a throwaway TLS server: a CA that
// signed nothing the test apiserver presents.
func selfSignedPEM(t *testing.T) []byte {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// TestHostileInputRedirects: a server that redirects every request to
// another origin, or to itself forever, is exit 2 at once with the
// redirect named in the summary and the record (never "context deadline
// exceeded" after the retry budget), and the other origin receives nothing:
// no token, password, API key or body.
func TestHostileInputRedirects(t *testing.T) {
	clearEnv(t)
	rd := testutil.NewRedirector(t, "http://"+closedPort(t), false)
	creds := credsDir(t, map[string]string{"username": "u", "token": hostileSecret, "password": hostileSecret,
		"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::", "apikey": hostileSecret, "iam_url": rd.Front.URL + "/identity/token"})
	for _, redirect := range []string{"elsewhere", "loop"} {
		for _, backend := range []string{"slurm", "ray", "lsf", "quantum"} {
			t.Run(redirect+"/"+backend, func(t *testing.T) {
				if redirect == "loop" {
					rd.Set(http.StatusFound, nil, testutil.Loop)
				} else {
					rd.Set(http.StatusTemporaryRedirect, nil, testutil.To(rd.Other.URL))
				}
				state := t.TempDir()
				args := []string{"--script", "#!/bin/sh\nhostname\n"}
				if backend == "quantum" {
					args = []string{"--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;", "--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`}
				}
				// A record made first stays to name the redirect.
				require.Equal(t, ExitDone, run(t, append([]string{"create-configmap", "--state-dir", state, "--job-name", "j", "--backend", backend, "--resource-url", rd.Front.URL}, args...)...).code)
				r := run(t, append([]string{"invoke", "--state-dir", state, "--job-name", "j", "--backend", backend, "--resource-url", rd.Front.URL,
					"--credentials-dir", creds, "--retry-budget", "1m", "--submit-lease", "1m"}, args...)...)
				assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
				msg, _ := r.summary["message"].(string)
				assert.Contains(t, msg, " redirected ")
				assert.Contains(t, msg, "to the final address")
				if redirect == "loop" {
					assert.Contains(t, msg, "more than 5 times")
				} else {
					assert.Contains(t, msg, "("+rd.Other.URL+")")
				}
				assert.NotContains(t, r.stdout+r.stderr, "deadline")
				assert.NotContains(t, r.stdout+r.stderr, hostileSecret)
				rec, err := record.NewFileStore(state, "j").Get(context.Background())
				require.NoError(t, err)
				assert.Contains(t, rec.Data[record.KeyMessage], " redirected ")
				assert.Empty(t, rd.Received(), "nothing reached the other origin")
			})
		}
	}
}

// TestHostileInputBodiesNeverReachMessages: every backend's server answers
// with a body that echoes the credential in every encoding the sweep found
// the scrubber missing (hex, base32, MIME base64 in lines, quoted-printable,
// entities without ';', \xHH, octal, doubled quotes, reversed, upper-cased,
// UTF-16), as bare text and inside the API's documented error shape. None
// of it reaches stdout, stderr (debug logs included), the record or the
// output files, for a refusal (400, exit 2) or a fault (500, exit 75).
func TestHostileInputBodiesNeverReachMessages(t *testing.T) {
	clearEnv(t)
	var all []string
	for _, f := range testutil.HostileForms(hostileSecret) {
		all = append(all, f.Text)
	}
	hostileBodiesRun(t, "token", hostileSecret, "invalid credential "+strings.Join(all, " and "),
		http.StatusBadRequest, http.StatusInternalServerError)
	// A message keeps the first httpx.MaxReason bytes of a reason: each
	// form of the passphrase is sent alone, so that each reaches it.
	for _, f := range testutil.HostileForms(hostilePassphrase) {
		hostileBodiesRun(t, "passphrase "+f.Name, hostilePassphrase, "invalid credential "+f.Text, http.StatusBadRequest)
	}
}

// hostilePassphrase is a multi-word secret: a server that splits it,
// re-cases or reverses it shows its words one by one, and each is secret.
// Before, 40 of the 152 passphrase runs leaked words (8 of its 19 forms,
// each into the record's message and the outputs of 5 of 8 servers).
const hostilePassphrase = "Tangerine wobbly HARPSICHORD of lantern"

// hostileBodiesRun runs invoke against each backend's server answering
// status with echo, as bare text and in the API's documented error shape,
// and asserts that no form of secret is found anywhere invoke wrote.
func hostileBodiesRun(t *testing.T, kind, secret, echo string, statuses ...int) {
	bodies := map[string]map[string]string{ // backend -> name -> body
		"slurm":   {"errors": `{"errors":[{"description":` + testutil.JSONString(echo) + `,"error_number":2000,"error":` + testutil.JSONString(echo) + `}]}`},
		"lsf":     {"message": `{"message":` + testutil.JSONString(echo) + `}`},
		"quantum": {"errors": `{"errors":[{"code":1,"message":` + testutil.JSONString(echo) + `}],"trace":` + testutil.JSONString(echo) + `}`},
		"ray":     {"traceback": "Traceback (most recent call last):\nValueError: " + echo + "\n"},
	}
	for backend, shapes := range bodies {
		shapes["text"] = echo
		for shape, body := range shapes {
			for _, status := range statuses {
				t.Run(fmt.Sprintf("%s/%s/%s/%d", kind, backend, shape, status), func(t *testing.T) {
					srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if backend == "quantum" && r.URL.Path == "/identity/token" {
							_, _ = io.WriteString(w, `{"access_token":"at-0123456789","expires_in":3600}`)
							return
						}
						ct := "text/plain"
						if strings.HasPrefix(body, "{") {
							ct = "application/json"
						}
						w.Header().Set("Content-Type", ct)
						w.WriteHeader(status)
						_, _ = io.WriteString(w, body)
					}))
					defer srv.Close()
					creds := credsDir(t, map[string]string{"username": "u", "token": secret, "password": secret,
						"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::", "apikey": secret, "iam_url": srv.URL + "/identity/token"})
					state, outs := t.TempDir(), t.TempDir()
					args := []string{"--script", "#!/bin/sh\nhostname\n"}
					if backend == "quantum" {
						args = []string{"--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;", "--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`}
					}
					url := srv.URL
					if backend == "slurm" {
						url += "/slurm/v0.0.42/"
					}
					r := run(t, append([]string{"invoke", "--state-dir", state, "--job-name", "j", "--backend", backend, "--resource-url", url,
						"--credentials-dir", creds, "--retry-budget", "1s", "--submit-lease", "5s", "--log-level", "debug",
						"--output-message", filepath.Join(outs, "message"), "--output-status", filepath.Join(outs, "status")}, args...)...)
					assert.Contains(t, []int{ExitInvalid, ExitTempFail, ExitUnknown}, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
					assert.Empty(t, testutil.Leaks(r.stdout+r.stderr, secret), "stdout=%s stderr=%s", r.stdout, r.stderr)
					for _, dir := range []string{state, outs} {
						_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
							if err == nil && !fi.IsDir() {
								b, _ := os.ReadFile(p)
								assert.Empty(t, testutil.Leaks(string(b), secret), "%s: %s", p, b)
							}
							return nil
						})
					}
				})
			}
		}
	}
}

// TestHostileInputRetryAfterBeyondBudget: a server answering every request
// 503 (and 429) with Retry-After: 30 gets no second request within those
// 30 s; with a 3 s retry budget, invoke exits 75 at once naming the wait.
// Before, slurm and ray retried six times in 8 s.
func TestHostileInputRetryAfterBeyondBudget(t *testing.T) {
	clearEnv(t)
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		for _, backend := range []string{"slurm", "ray", "lsf", "quantum"} {
			t.Run(fmt.Sprintf("%s/%d", backend, status), func(t *testing.T) {
				var mu sync.Mutex
				seen := map[string]int{}
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					seen[r.Method+" "+r.URL.Path]++
					mu.Unlock()
					w.Header().Set("Retry-After", "30")
					w.WriteHeader(status)
				}))
				defer srv.Close()
				creds := credsDir(t, map[string]string{"username": "u", "token": "tok-abcdef", "password": "pass-abcdef",
					"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::", "apikey": "key-abcdef", "iam_url": srv.URL + "/identity/token"})
				args := []string{"--script", "#!/bin/sh\nhostname\n"}
				if backend == "quantum" {
					args = []string{"--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;", "--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`}
				}
				url := srv.URL
				if backend == "slurm" {
					url += "/slurm/v0.0.42/"
				}
				start := time.Now()
				r := run(t, append([]string{"invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", backend, "--resource-url", url,
					"--credentials-dir", creds, "--retry-budget", "3s", "--submit-lease", "30s"}, args...)...)
				assert.Equal(t, ExitTempFail, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
				assert.Less(t, time.Since(start), 3*time.Second, "the budget cannot hold the wait: it ends at once")
				msg, _ := r.summary["message"].(string)
				assert.Contains(t, msg, "asked to wait 30s before trying again (Retry-After)")
				mu.Lock()
				defer mu.Unlock()
				for req, n := range seen {
					assert.Equal(t, 1, n, "%s was sent again before the server's 30 s", req)
				}
			})
		}
	}
}

// TestHostileInputLocalFiles: a local file a user names that is no regular
// file is refused at once (exit 2, naming the flag), never read: a FIFO as
// a credential or the record blocked invoke forever in open(2), /dev/zero
// as --ca-file or the record (through a symbolic link) ate the pod's
// memory. A state dir that is a symbolic link loop exited 75. A record
// owned by another user, or writable by everyone, was used without a word:
// its id, state and kill flag could be anyone's.
func TestHostileInputLocalFiles(t *testing.T) {
	clearEnv(t)
	srv := recordingServer(t)
	fifoCreds := credsDir(t, map[string]string{"username": "u"})
	require.NoError(t, syscall.Mkfifo(filepath.Join(fifoCreds, "token"), 0o600))
	good := credsDir(t, map[string]string{"username": "u", "token": "tok-abcdef"})
	slurm := []string{"--backend", "slurm", "--resource-url", srv.URL, "--script", "#!/bin/sh\nhostname\n"}
	cases := []struct {
		name, field string
		state       func(t *testing.T) string
		args        []string
	}{
		{"credentials file a FIFO", "credentials", func(t *testing.T) string { return t.TempDir() },
			append([]string{"--credentials-dir", fifoCreds}, slurm...)},
		{"CA file a FIFO", "ca-file", func(t *testing.T) string { return t.TempDir() },
			append([]string{"--credentials-dir", good, "--ca-file", fifoCreds + "/token"}, slurm...)},
		{"record a FIFO", "state-dir", func(t *testing.T) string {
			d := t.TempDir()
			require.NoError(t, syscall.Mkfifo(filepath.Join(d, "j-bridge-cm.json"), 0o600))
			return d
		}, []string{"--backend", "local", "--script", "true"}},
		{"record a link to /dev/zero", "state-dir", func(t *testing.T) string {
			d := t.TempDir()
			require.NoError(t, os.Symlink("/dev/zero", filepath.Join(d, "j-bridge-cm.json")))
			return d
		}, []string{"--backend", "local", "--script", "true"}},
		{"state dir a symbolic link loop", "state-dir", func(t *testing.T) string {
			d := t.TempDir()
			require.NoError(t, os.Symlink(filepath.Join(d, "loop"), filepath.Join(d, "loop")))
			return filepath.Join(d, "loop")
		}, []string{"--backend", "local", "--script", "true"}},
		{"record writable by everyone", "chmod o-w", func(t *testing.T) string {
			d := t.TempDir()
			writeRecord(t, d, "j", map[string]string{"backend": "local", "jobdata.jobScript": "true"})
			require.NoError(t, os.Chmod(filepath.Join(d, "j-bridge-cm.json"), 0o666))
			return d
		}, nil},
	}
	if os.Geteuid() == 0 { // only root can give a file to another user
		cases = append(cases, struct {
			name, field string
			state       func(t *testing.T) string
			args        []string
		}{"record owned by another user", "owned by user 65534", func(t *testing.T) string {
			d := t.TempDir()
			writeRecord(t, d, "j", map[string]string{"backend": "local", "jobdata.jobScript": "true"})
			require.NoError(t, os.Chown(filepath.Join(d, "j-bridge-cm.json"), 65534, 65534))
			return d
		}, nil})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := c.state(t)
			done := make(chan cliResult, 1)
			go func() {
				done <- run(t, append([]string{"invoke", "--state-dir", state, "--job-name", "j", "--retry-budget", "5s"}, c.args...)...)
			}()
			var r cliResult
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("invoke blocked on a file that is not a regular file")
			}
			assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			msg, _ := r.summary["message"].(string)
			assert.Contains(t, msg, c.field, "the summary names the fault")
			assert.Zero(t, srv.submitted(), "nothing reached the remote system")
			entries, _ := os.ReadDir(filepath.Join(state, "local-jobs"))
			assert.Empty(t, entries, "nothing was submitted")
		})
	}
	// A kubeconfig (read whole by client-go) that is a FIFO or /dev/zero.
	for _, kc := range []string{fifoCreds + "/token", "/dev/zero"} {
		t.Run("kubeconfig "+kc, func(t *testing.T) {
			done := make(chan cliResult, 1)
			go func() {
				done <- run(t, "invoke", "--kubeconfig", kc, "--job-name", "j", "--backend", "local", "--script", "true", "--retry-budget", "5s")
			}()
			select {
			case r := <-done:
				assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
				assert.Contains(t, r.summary["message"], "kubeconfig")
				assert.Contains(t, r.summary["message"], "not a regular file")
			case <-time.After(30 * time.Second):
				t.Fatal("invoke blocked on a kubeconfig that is not a regular file")
			}
		})
	}
}

// TestHostileInputFlagErrorsReport: a flag, argument or environment
// variable refused before invoke runs still writes the JSON summary, the
// message output and the termination log (before, only "Error: ..." on
// stderr, and a step whose outputs were missing).
func TestHostileInputFlagErrorsReport(t *testing.T) {
	clearEnv(t)
	cases := map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"unknown flag":            {args: []string{"--bogus"}, want: "--bogus"},
		"a duration that is none": {args: []string{"--grace-period", "soon"}, want: "grace-period"},
		"an argument":             {args: []string{"stray"}, want: "stray"},
		"an absurd duration":      {args: []string{"--retry-budget", "0s"}, want: "--retry-budget"},
		"a bad environment value": {env: map[string]string{"BRIDGE_RETRY_BUDGET": "soon"}, want: "BRIDGE_RETRY_BUDGET"},
		"a bad log level":         {args: []string{"--log-level", "loud"}, want: "--log-level"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			outs := t.TempDir()
			tl := filepath.Join(outs, "termination-log")
			require.NoError(t, os.WriteFile(tl, nil, 0o644))
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			// The output flags after the bad one: the failed parse never saw them.
			args := append(append([]string{"invoke", "--job-name", "j", "--backend", "local", "--script", "true"}, c.args...),
				"--output-message", filepath.Join(outs, "message"), "--output-status", filepath.Join(outs, "status"), "--termination-log", tl)
			r := run(t, args...)
			assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			require.NotNil(t, r.summary, "a JSON summary on stdout: %q", r.stdout)
			assert.EqualValues(t, ExitInvalid, r.summary["exit"])
			assert.Equal(t, "j", r.summary["job"])
			msg, _ := r.summary["message"].(string)
			assert.Contains(t, msg, c.want)
			assert.Equal(t, msg, readFile(t, filepath.Join(outs, "message")))
			assert.Equal(t, msg, readFile(t, tl))
			assert.FileExists(t, filepath.Join(outs, "status"))
		})
	}
	// cleanup prints its summary on every end too.
	r := run(t, "cleanup", "--job-name", "j", "--bogus")
	assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	require.NotNil(t, r.summary, "a JSON summary on stdout: %q", r.stdout)
	assert.Contains(t, r.summary["reason"], "--bogus")
}

// TestHostileInputRayAnswerWithoutStatus: a Ray dashboard (or whatever
// answers in its place) that takes the job and then answers its details
// with 200 and no status is a fault bounded by the retry budget: exit 75,
// naming the malformed answer, with the job's id kept for the retry.
// Before, the job was followed as RUNNING forever.
func TestHostileInputRayAnswerWithoutStatus(t *testing.T) {
	clearEnv(t)
	var mu sync.Mutex
	submitted := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		id, isJob := strings.CutPrefix(r.URL.Path, "/api/jobs/")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/jobs/":
			var req struct {
				SubmissionID string `json:"submission_id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			submitted[req.SubmissionID] = true
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"job_id":"raysubmit_1","submission_id":%q}`, req.SubmissionID)
		case r.Method == http.MethodGet && isJob && submitted[id]:
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"type":"SUBMISSION","submission_id":%q,"entrypoint":"python job.py"}`, id)
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "Job does not exist")
		}
	}))
	defer srv.Close()
	state := t.TempDir()
	done := make(chan cliResult, 1)
	start := time.Now()
	go func() {
		done <- run(t, "invoke", "--state-dir", state, "--job-name", "j", "--backend", "ray", "--resource-url", srv.URL,
			"--credentials-dir", t.TempDir(), "--script", "print(1)", "--update-interval", "0.2", "--retry-budget", "3s", "--follow-logs=false")
	}()
	var r cliResult
	select {
	case r = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("an answer without a status was followed past the retry budget (as RUNNING)")
	}
	assert.Equal(t, ExitTempFail, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	assert.Less(t, time.Since(start), 60*time.Second)
	msg, _ := r.summary["message"].(string)
	assert.Contains(t, msg, "no job status")
	assert.NotEmpty(t, r.summary["id"], "the id is kept: a retry re-attaches")
	assert.NotContains(t, r.stdout+r.stderr, "state=RUNNING", "never taken for a running job")
}

// TestHostileInputS3UploadKeyRefusedUpFront: against the real S3 server
// (versitygw), an upload whose key would be the run's prefix itself
// (s3upload.files "." or "a/..") was submitted, ran, and then met a 400
// (DirectoryObjectContainsData) that no retry mends, exiting 75 again and
// again. It is refused before anything is submitted: exit 2, naming
// s3upload.files. An input object missing on the real server stays exit 2
// naming its field, and a refused S3 connection exit 75.
func TestHostileInputS3UploadKeyRefusedUpFront(t *testing.T) {
	clearEnv(t)
	endpoint, _, _, s3Creds := tests3.Env(t)
	out := tests3.Bucket(t, "out")
	for _, files := range []string{".", "a/..", "job.log"} {
		t.Run(files, func(t *testing.T) {
			state := t.TempDir()
			r := run(t, "invoke", "--state-dir", state, "--job-name", "j", "--backend", "local", "--script", "echo ran > x",
				"--s3-endpoint", endpoint, "--s3-secure", "false", "--s3-credentials-dir", s3Creds, "--s3-upload-bucket", out,
				"--s3-upload-files", files, "--retry-budget", "5s", "--update-interval", "0.2")
			refused(t, r, state, "s3upload.files", false)
		})
	}
	state := t.TempDir()
	r := run(t, "invoke", "--state-dir", state, "--job-name", "j", "--backend", "local", "--script", "true",
		"--s3-endpoint", endpoint, "--s3-secure", "false", "--s3-credentials-dir", s3Creds, "--additional-data", out+":no/such/object.csv",
		"--retry-budget", "5s")
	refused(t, r, state, "jobdata.additionalData", false)
}

// TestHostileLoginNodeOutput: a Slurm login node whose sbatch (a private
// sshd whose ForceCommand stands in for every command) prints a banner and
// a line of the SSH key in every encoding the scrubber misses, on stderr
// and stdout, and exits 1. The refusal (exit 2) and everything invoke
// writes hold none of it: only the reason of a line in sbatch's documented
// error shape, as words, or the output's size. Before, up to 2,000 bytes of
// stderr were quoted.
func TestHostileLoginNodeOutput(t *testing.T) {
	clearEnv(t)
	srv := testssh.Default(t)
	u, err := user.Lookup(srv.User)
	require.NoError(t, err, "the sshd's user must be local")
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	key, err := os.ReadFile(filepath.Join(srv.CredsDir, "ssh-privatekey"))
	require.NoError(t, err)
	keyLine := strings.Split(strings.TrimSpace(string(key)), "\n")[1]
	var forms []string
	for _, f := range testutil.HostileForms(keyLine) {
		forms = append(forms, f.Text)
	}
	const banner = "Welcome-to-the-hostile-login-node"
	echo := banner + "\n" + strings.Join(forms, "\n")
	for name, c := range map[string]struct{ stderr, want string }{
		"documented": {echo + "\nsbatch: error: Batch job submission failed: Invalid account " + forms[0] + "\n",
			"sbatch refused the job (exit 1): Batch job submission failed: Invalid account …"},
		"undocumented": {echo, "sbatch refused the job (exit 1): sbatch wrote "},
	} {
		t.Run(name, func(t *testing.T) {
			// The script and what it prints are the sshd user's only: they
			// hold a line of its key.
			dir, err := os.MkdirTemp("", "bridge-hostile-node-")
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			script := "#!/bin/sh\ncase \"$SSH_ORIGINAL_COMMAND\" in\n" +
				"internal-sftp|*sftp-server*) exec /usr/lib/openssh/sftp-server ;;\n" +
				"*sbatch*) cat " + dir + "/stderr >&2; cat " + dir + "/stdout; exit 1 ;;\nesac\n"
			for name, text := range map[string]string{"node.sh": script, "stderr": c.stderr, "stdout": echo} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o700))
				require.NoError(t, os.Chown(filepath.Join(dir, name), uid, gid))
			}
			require.NoError(t, os.Chown(dir, uid, gid))
			d := testssh.StartCustom(t, srv, testssh.Config{Set: map[string]string{"ForceCommand": filepath.Join(dir, "node.sh")}})
			creds := t.TempDir()
			for _, name := range []string{"ssh-privatekey", "known_hosts"} {
				b, err := os.ReadFile(filepath.Join(srv.CredsDir, name))
				require.NoError(t, err)
				if name == "known_hosts" {
					_, port, _ := strings.Cut(srv.Addr, ":")
					b = []byte(strings.Replace(string(b), "]:"+port+" ", "]:"+strconv.Itoa(d.Port)+" ", 1))
				}
				require.NoError(t, os.WriteFile(filepath.Join(creds, name), b, 0o600))
			}
			// invokeScanned's budgets (a submit window of about 1 s) are for
			// servers that never answer; this one answers, but an SSH
			// handshake and sbatch on a loaded machine took longer (exit
			// 75, not the refusal).
			r, text := invokeScanned(t, "--backend", "slurm", "--resource-url", "ssh://"+srv.User+"@"+d.Addr()+"/"+dir+"/jobs",
				"--credentials-dir", creds, "--script", "#!/bin/sh\necho hi\n", "--retry-budget", "20s", "--submit-lease", "30s")
			assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			assert.Contains(t, text, c.want)
			assert.NotContains(t, text, banner)
			assert.Empty(t, testutil.Leaks(text, keyLine), "%s", text)
		})
	}
}
