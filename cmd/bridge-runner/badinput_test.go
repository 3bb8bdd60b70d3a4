package main

// The bad-input catalogue, beyond TestBadInput's: every mistake in flags,
// ConfigMap keys (including a record edited by hand), jobproperties of each
// backend, URLs, credentials and sizes exits 2, names the field at fault,
// and submits nothing (the local-jobs directory stays empty, and the fake
// remote system never sees a submit).

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

// recordingServer answers everything 500 and counts the requests, so that a
// case can prove nothing reached the remote system.
func recordingServer(t *testing.T) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		f.seen(r, r.Method == http.MethodPost)
		http.Error(w, "this fake accepts nothing", http.StatusInternalServerError)
	})
}

// closedPort is a loopback address nobody listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// writeRecord writes a state file as a person editing the ConfigMap might
// leave it: the description keys as given, no state keys.
func writeRecord(t *testing.T, state, job string, data map[string]string) {
	b, err := json.Marshal(map[string]any{"uid": "hand-made-uid", "version": 1, "data": data})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(state, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(state, job+"-bridge-cm.json"), b, 0o600))
}

func TestBadInputCatalogue(t *testing.T) {
	clearEnv(t)
	srv := recordingServer(t)
	dead := "http://" + closedPort(t)
	slurmCreds := credsDir(t, map[string]string{"username": "u", "token": "tok-abcdef"})
	lsfCreds := credsDir(t, map[string]string{"username": "u", "password": "pass-abcdef"})
	quantumCreds := credsDir(t, map[string]string{"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/x:y::", "apikey": "key-abcdef"})
	rayCreds := credsDir(t, map[string]string{"token": "tok-abcdef"})
	emptyCreds := t.TempDir()
	badCRN := credsDir(t, map[string]string{"crn": "not-a-crn", "apikey": "key-abcdef"})
	onlyUser := credsDir(t, map[string]string{"username": "u"})

	inv := func(args ...string) []string { return append([]string{"invoke", "--job-name", "j"}, args...) }
	slurm := func(props string, extra ...string) []string {
		a := inv("--backend", "slurm", "--resource-url", srv.URL, "--credentials-dir", slurmCreds, "--script", "#!/bin/bash\nhostname\n")
		if props != "" {
			a = append(a, "--job-properties", props)
		}
		return append(a, extra...)
	}
	lsf := func(props string) []string {
		return inv("--backend", "lsf", "--resource-url", srv.URL, "--credentials-dir", lsfCreds, "--script", "#!/bin/sh\nhostname\n", "--job-properties", props)
	}
	quantum := func(props, script string) []string {
		return inv("--backend", "quantum", "--resource-url", srv.URL, "--credentials-dir", quantumCreds, "--script", script, "--job-properties", props)
	}
	const qasm = "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;"
	ray := func(props string) []string {
		return inv("--backend", "ray", "--resource-url", srv.URL, "--credentials-dir", rayCreds, "--script", "print('hi')", "--job-properties", props)
	}

	cases := []struct {
		name  string
		args  []string
		field string
		// record, when set, is written as the state file before the run
		// (a ConfigMap edited by hand); args then carry no description.
		record map[string]string
	}{
		// Flags.
		{"log format", inv("--log-format", "xml", "--backend", "local", "--script", "true"), "--log-format", nil},
		{"grace period not a duration", inv("--grace-period", "soon", "--backend", "local", "--script", "true"), "grace-period", nil},
		{"retry budget not a duration", inv("--retry-budget", "forever", "--backend", "local", "--script", "true"), "retry-budget", nil},
		{"follow-logs not a bool", inv("--follow-logs=maybe", "--backend", "local", "--script", "true"), "follow-logs", nil},
		{"log interval too short", inv("--log-interval", "1ms", "--backend", "local", "--script", "true"), "log-interval", nil},
		{"log dir relative", inv("--log-dir", "logs", "--backend", "local", "--script", "true"), "log-dir", nil},
		{"log dir mapping relative", inv("--log-dir", "/home:mnt", "--backend", "local", "--script", "true"), "log-dir", nil},
		{"job name too long", []string{"invoke", "--job-name", strings.Repeat("a", 250), "--backend", "local", "--script", "true"}, "job-name", nil},
		{"job name with underscore", []string{"invoke", "--job-name", "my_job", "--backend", "local", "--script", "true"}, "job-name", nil},
		{"job name ending in a dash", []string{"create-configmap", "--job-name", "job-", "--backend", "local", "--script", "true"}, "job-name", nil},
		{"interval above an hour", inv("--backend", "local", "--script", "true", "--update-interval", "2h"), "updateInterval", nil},
		{"interval below 0.1s", inv("--backend", "local", "--script", "true", "--update-interval", "0.01"), "updateInterval", nil},
		{"interval not a number", inv("--backend", "local", "--script", "true", "--update-interval", "soon"), "updateInterval", nil},
		{"s3.secure not a bool", inv("--backend", "local", "--script", "true", "--s3-secure", "yes please"), "s3.secure", nil},
		{"createBucket not a bool", inv("--backend", "local", "--script", "true", "--s3-create-bucket", "maybe"), "s3upload.createBucket", nil},
		{"unknown upload layout", inv("--backend", "local", "--script", "true", "--s3-upload-layout", "flat"), "s3upload.layout", nil},
		{"bad extra location", inv("--backend", "local", "--script", "true", "--script-extra-location", "git"), "jobdata.scriptExtraLocation", nil},
		{"metadata not JSON", inv("--backend", "local", "--script", "true", "--script-metadata", "{owner: me}"), "jobdata.scriptMetadata", nil},
		{"additionalData not bucket:object", inv("--backend", "local", "--script", "true", "--s3-endpoint", "minio:9000", "--additional-data", "in:a.dat,nocolon"), "jobdata.additionalData", nil},
		{"upload files without bucket", inv("--backend", "local", "--script", "true", "--s3-endpoint", "minio:9000", "--s3-upload-files", "out.txt"), "s3upload.bucket", nil},
		{"s3 script not bucket:object", inv("--backend", "local", "--script", "job.sh", "--script-location", "s3", "--s3-endpoint", "minio:9000"), "jobdata.jobScript", nil},
		{"s3 parameters not bucket:object", inv("--backend", "local", "--script", "true", "--script-extra-location", "s3", "--job-parameters", "params.json", "--s3-endpoint", "minio:9000"), "jobdata.jobParameters", nil},
		{"jobproperties an array", inv("--backend", "local", "--script", "true", "--job-properties", `[1,2]`), "jobproperties", nil},
		{"jobproperties null", inv("--backend", "local", "--script", "true", "--job-properties", `null`), "jobproperties", nil},
		{"whitespace-only script", inv("--backend", "local", "--script", " \n\t "), "jobdata.jobScript", nil},
		{"create with bad interval", []string{"create-configmap", "--job-name", "j", "--backend", "local", "--script", "x", "--update-interval", "0"}, "updateInterval", nil},

		// The local backend's jobproperties.
		{"local env of numbers", inv("--backend", "local", "--script", "true", "--job-properties", `{"env":{"A":1}}`), "jobproperties", nil},
		{"local args not a list", inv("--backend", "local", "--script", "true", "--job-properties", `{"args":"a b"}`), "jobproperties", nil},
		{"local workdir missing", inv("--backend", "local", "--script", "true", "--job-properties", `{"workdir":"/nonexistent/dir"}`), "jobproperties", nil},

		// ConfigMap keys edited by hand (the record exists; invoke reads it).
		{"record: interval", inv(), "updateInterval", map[string]string{"backend": "local", "jobdata.jobScript": "true", "updateInterval": "often"}},
		{"record: unknown backend", inv(), "backend", map[string]string{"backend": "pbs", "jobdata.jobScript": "true"}},
		{"record: script location", inv(), "jobdata.scriptLocation", map[string]string{"backend": "local", "jobdata.jobScript": "true", "jobdata.scriptLocation": "ftp"}},
		{"record: jobproperties cut off", inv(), "jobproperties", map[string]string{"backend": "local", "jobdata.jobScript": "true", "jobproperties": `{"env":{"A":"1"}`}},
		{"record: no script", inv(), "jobdata.jobScript", map[string]string{"backend": "local"}},
		{"record: s3.secure", inv(), "s3.secure", map[string]string{"backend": "local", "jobdata.jobScript": "true", "s3.secure": "si"}},
		{"record: parameters not JSON", inv(), "jobdata.jobParameters", map[string]string{"backend": "local", "jobdata.jobScript": "true", "jobdata.jobParameters": "a=1"}},
		{"record: local with a URL", inv(), "resourceURL", map[string]string{"backend": "local", "jobdata.jobScript": "true", "resourceURL": "http://x"}},
		{"record differs from flags", inv("--backend", "local", "--script", "echo b"), "jobdata.jobScript", map[string]string{"backend": "local", "jobdata.jobScript": "echo a"}},

		// Slurm jobproperties and script.
		{"slurm script without #!", inv("--backend", "slurm", "--resource-url", srv.URL, "--credentials-dir", slurmCreds, "--script", "hostname"), "jobdata.jobScript", nil},
		{"slurm script with CRLF #! line", inv("--backend", "slurm", "--resource-url", srv.URL, "--credentials-dir", slurmCreds, "--script", "#!/bin/bash\r\nhostname\r\n"), "jobdata.jobScript", nil},
		{"slurm reserved comment", slurm(`{"comment":"mine"}`), "jobproperties", nil},
		{"slurm reserved script", slurm(`{"script":"#!/bin/sh"}`), "jobproperties", nil},
		{"slurm time_limit a list", slurm(`{"time_limit":[30]}`), "jobproperties", nil},
		{"slurm time_limit not a time", slurm(`{"time_limit":"half an hour"}`), "jobproperties", nil},
		{"slurm environment a string", slurm(`{"environment":"A=1"}`), "jobproperties", nil},
		{"slurm alias and native", slurm(`{"Queue":"debug","partition":"batch"}`), "jobproperties", nil},
		{"slurm name not a string", slurm(`{"name":7}`), "jobproperties", nil},
		{"slurm additionalData", slurm("", "--additional-data", "in:a.dat", "--s3-endpoint", "minio:9000", "--s3-credentials-dir", credsDir(t, map[string]string{"accesskey": "a", "secretkey": "b"})), "jobdata.additionalData", nil},

		// LSF, Quantum and Ray jobproperties.
		{"lsf unknown key", lsf(`{"partition":"debug"}`), "jobproperties", nil},
		{"lsf minutes over 59", lsf(`{"runLimitMinute":60}`), "jobproperties", nil},
		{"lsf kill as a property", lsf(`{"kill":"true"}`), "jobproperties", nil},
		{"lsf queue an object", lsf(`{"queue":{"name":"normal"}}`), "jobproperties", nil},
		{"quantum no backend", quantum(`{"program_id":"sampler"}`, qasm), "jobproperties", nil},
		{"quantum custom program", quantum(`{"program_id":"vqe","backend":"ibm_torino"}`, qasm), "jobproperties", nil},
		{"quantum cost too high", quantum(`{"program_id":"sampler","backend":"ibm_torino","cost":99999}`, qasm), "jobproperties", nil},
		{"quantum script not OpenQASM", quantum(`{"program_id":"sampler","backend":"ibm_torino"}`, "print('hi')"), "jobdata.jobScript", nil},
		{"ray unknown key", ray(`{"num_cpus":2}`), "jobproperties", nil},
		{"ray negative cpus", ray(`{"entrypoint_num_cpus":-1}`), "jobproperties", nil},
		{"ray reserved env var", ray(`{"env_vars":{"BRIDGE_JOB_KEY":"mine"}}`), "jobproperties", nil},
		{"ray entrypoint with args", ray(`{"entrypoint":"python x.py","args":["1"]}`), "jobproperties", nil},

		// URLs.
		{"slurm URL without scheme", inv("--backend", "slurm", "--resource-url", "slurm.example.org:6820", "--credentials-dir", slurmCreds, "--script", "#!/bin/sh\n"), "resourceURL", nil},
		{"slurm URL with spaces", inv("--backend", "slurm", "--resource-url", "http://slurm example.org:6820", "--credentials-dir", slurmCreds, "--script", "#!/bin/sh\n"), "resourceURL", nil},
		{"slurm URL with a query", inv("--backend", "slurm", "--resource-url", srv.URL+"?v=40", "--credentials-dir", slurmCreds, "--script", "#!/bin/sh\n"), "resourceURL", nil},
		{"slurm without URL", inv("--backend", "slurm", "--credentials-dir", slurmCreds, "--script", "#!/bin/sh\n"), "resourceURL", nil},
		{"lsf ftp URL", inv("--backend", "lsf", "--resource-url", "ftp://pac.example.org", "--credentials-dir", lsfCreds, "--script", "x"), "resourceURL", nil},
		{"lsf URL with user info", inv("--backend", "lsf", "--resource-url", "https://u:p@pac.example.org:8443", "--credentials-dir", lsfCreds, "--script", "x"), "resourceURL", nil},
		{"ray without URL", inv("--backend", "ray", "--credentials-dir", rayCreds, "--script", "print(1)"), "resourceURL", nil},
		{"ray URL with spaces", inv("--backend", "ray", "--resource-url", "http://ray head:8265", "--credentials-dir", rayCreds, "--script", "print(1)"), "resourceURL", nil},
		{"quantum URL without scheme", inv("--backend", "quantum", "--resource-url", "quantum.cloud.ibm.com/api/v1", "--credentials-dir", quantumCreds, "--script", qasm,
			"--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`), "resourceURL", nil},

		// Credentials.
		{"slurm credentials missing", inv("--backend", "slurm", "--resource-url", dead, "--credentials-dir", emptyCreds, "--script", "#!/bin/sh\n"), "credentials", nil},
		{"slurm credentials dir absent", inv("--backend", "slurm", "--resource-url", dead, "--credentials-dir", "/nonexistent/creds", "--script", "#!/bin/sh\n"), "credentials", nil},
		{"lsf password missing", inv("--backend", "lsf", "--resource-url", dead, "--credentials-dir", onlyUser, "--script", "x"), "credentials", nil},
		{"quantum CRN malformed", inv("--backend", "quantum", "--resource-url", dead, "--credentials-dir", badCRN, "--script", qasm,
			"--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`), "credentials", nil},
	}
	require.Greater(t, len(cases)+21, 30)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			if c.record != nil {
				writeRecord(t, state, "j", c.record)
			}
			before := srv.submitted()
			args := append(c.args, "--state-dir", state)
			if c.args[0] == "invoke" {
				args = append(args, "--retry-budget", "2s")
			}
			r := run(t, args...)
			assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			assert.Contains(t, r.stdout+r.stderr, c.field, "the message names the field")
			entries, _ := os.ReadDir(filepath.Join(state, "local-jobs"))
			assert.Empty(t, entries, "nothing was submitted")
			assert.Equal(t, before, srv.submitted(), "nothing reached the remote system")
		})
	}
	assert.Zero(t, srv.submitted(), "the fake saw no submit at all: %v", srv.requests)
}

// TestBadInputHandEditedRecordNothingRecorded: a refused hand-edited record
// is left as it was (no id, no intent), so fixing the key and running again
// submits once.
func TestBadInputHandEditedRecordNothingRecorded(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	writeRecord(t, state, "j", map[string]string{"backend": "local", "jobdata.jobScript": "echo fixed", "updateInterval": "often"})
	r := run(t, "invoke", "--state-dir", state, "--job-name", "j")
	require.Equal(t, ExitInvalid, r.code, r.stderr)
	rec, err := record.NewFileStore(state, "j").Get(context.Background())
	require.NoError(t, err)
	assert.Empty(t, rec.Data[record.KeyID])
	assert.Empty(t, rec.Data[record.KeyIntent])
	assert.Contains(t, rec.Data[record.KeyMessage], "updateInterval", "the record says what is wrong")

	writeRecord(t, state, "j", map[string]string{"backend": "local", "jobdata.jobScript": "echo fixed", "updateInterval": "1"})
	r = run(t, "invoke", "--state-dir", state, "--job-name", "j")
	require.Equal(t, ExitDone, r.code, r.stderr)
}

// TestBadInputCorruptStateFileIsInvalid: a state file that is not JSON (edited by
// hand, or truncated) cannot be fixed by retrying: exit 2 naming the file,
// not 75 (which Argo would retry).
func TestBadInputCorruptStateFileIsInvalid(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	p := filepath.Join(state, "j-bridge-cm.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"uid":"x","version":1,"data":{"backend":"local",`), 0o600))
	r := run(t, "invoke", "--state-dir", state, "--job-name", "j", "--retry-budget", "1s")
	assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout+r.stderr, p)
	entries, _ := os.ReadDir(filepath.Join(state, "local-jobs"))
	assert.Empty(t, entries)
}

// TestBadInputHugeScriptRefusedBeforeWriting: a ConfigMap holds at most 1 MiB of data; a script
// that cannot fit is refused before anything is written, naming
// jobdata.jobScript, by create-configmap and by invoke.
func TestBadInputHugeScriptRefusedBeforeWriting(t *testing.T) {
	clearEnv(t)
	huge := "#!/bin/sh\n" + strings.Repeat("echo 0123456789abcdef\n", (1<<20)/21+10)
	for _, step := range []string{"create-configmap", "invoke"} {
		t.Run(step, func(t *testing.T) {
			state := t.TempDir()
			args := []string{step, "--state-dir", state, "--job-name", "j", "--backend", "local", "--script", huge}
			if step == "invoke" {
				args = append(args, "--follow-logs=false")
			}
			r := run(t, args...)
			assert.Equal(t, ExitInvalid, r.code, "stdout=%.500s stderr=%.500s", r.stdout, r.stderr)
			assert.True(t, strings.Contains(r.stdout+r.stderr, "jobdata.jobScript"), "the message names jobdata.jobScript: %.500s", r.stdout+r.stderr)
			assert.NoFileExists(t, filepath.Join(state, "j-bridge-cm.json"), "nothing was written")
			entries, _ := os.ReadDir(filepath.Join(state, "local-jobs"))
			assert.Empty(t, entries, "nothing was submitted")
		})
	}
}

// TestBadInputTrailingNewlineInSecrets: a Secret made with `echo` ends in a
// newline; it must work as if it did not (the value is trimmed), on every
// backend that takes a token.
func TestBadInputTrailingNewlineInSecrets(t *testing.T) {
	clearEnv(t)
	t.Run("slurm", func(t *testing.T) {
		srv := fakeSlurm(t, "tok-abcdef", "ok")
		creds := credsDir(t, map[string]string{"username": "u\n", "token": "tok-abcdef\n\n"})
		r := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", "slurm", "--resource-url", srv.URL+"/slurm/v0.0.40",
			"--credentials-dir", creds, "--script", "#!/bin/sh\nhostname\n", "--update-interval", "0.2")
		assert.Equal(t, ExitFailed, r.code, "the fake's job fails with exit 3: the token was accepted: %s", r.stderr)
		assert.Equal(t, "3", r.summary["jobExitCode"])
		assert.Equal(t, 1, srv.submitted())
	})
	t.Run("ray", func(t *testing.T) {
		srv := fakeRay(t, "ok")
		creds := credsDir(t, map[string]string{"token": rayToken + "\r\n"})
		r := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", "ray", "--resource-url", srv.URL,
			"--credentials-dir", creds, "--script", "print('hi')", "--update-interval", "0.2")
		assert.Equal(t, ExitFailed, r.code, "the fake's job fails: the token was accepted: %s", r.stderr)
		assert.Equal(t, 1, srv.submitted())
	})
	t.Run("lsf", func(t *testing.T) {
		srv := fakeLSF(t, "ok")
		creds := credsDir(t, map[string]string{"username": "u\n", "password": lsfPassword + "\n"})
		r := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", "lsf", "--resource-url", srv.URL,
			"--credentials-dir", creds, "--script", "#!/bin/sh\nhostname\n", "--update-interval", "0.2")
		assert.Equal(t, ExitFailed, r.code, "the fake's job exits 3: the password was accepted: %s", r.stderr)
		assert.Equal(t, 1, srv.submitted())
	})
	t.Run("quantum", func(t *testing.T) {
		srv := fakeQuantum(t, "ok")
		creds := credsDir(t, map[string]string{"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::\n",
			"apikey": quantumAPIKey + "\n", "iam_url": srv.URL + "/iam/token\n"})
		r := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", "quantum", "--resource-url", srv.URL+"/api/v1",
			"--credentials-dir", creds, "--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`,
			"--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;", "--update-interval", "0.2")
		assert.Equal(t, ExitFailed, r.code, "the fake's job fails: the API key was accepted: %s", r.stderr)
		assert.Equal(t, 1, srv.submitted())
	})
}
