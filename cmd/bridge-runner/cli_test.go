package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

func TestEveryCommandIsDocumented(t *testing.T) {
	a := &app{registry: nil}
	root := a.newRootCmd()
	for _, c := range root.Commands() {
		assert.NotEmpty(t, c.Short, c.Name())
		assert.NotEmpty(t, c.Long, c.Name())
		assert.NotEmpty(t, c.Example, c.Name())
	}
	names := map[string]bool{}
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		names[c.Name()] = true
	}
	for _, want := range []string{"create-configmap", "invoke", "cleanup", "operator", "version", "completion"} {
		assert.True(t, names[want], want)
	}
}

func TestVersion(t *testing.T) {
	clearEnv(t)
	r := run(t, "--version")
	assert.Equal(t, 0, r.code)
	assert.True(t, strings.HasPrefix(r.stdout, "bridge-runner "), r.stdout)
	r = run(t, "version", "-o", "json")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, `"backends":["htcondor","local"`)
	r = run(t, "completion", "bash")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "bash completion")
}

func TestInvokeLocalDoneWithOutputs(t *testing.T) {
	clearEnv(t)
	out := t.TempDir()
	args := []string{"invoke", "--state-dir", t.TempDir(), "--job-name", "hello", "--backend", "local",
		"--script", "echo hello; exit 0", "--update-interval", "1"}
	for _, o := range runner.OutputFields {
		args = append(args, "--"+o.Flag(), filepath.Join(out, "sub", o.Name))
	}
	r := run(t, args...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "DONE", r.summary["status"])
	assert.Contains(t, r.stderr, "hello\n", "the job's output is streamed to stderr")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(r.stdout), "\n")+1, "stdout is one JSON line")
	read := func(n string) string { b, _ := os.ReadFile(filepath.Join(out, "sub", n)); return string(b) }
	assert.Equal(t, "DONE", read("status"), "no trailing newline")
	assert.Equal(t, r.summary["id"], read("job-id"))
	assert.Equal(t, "0", read("job-exit-code"))
	assert.NotEmpty(t, read("end-time"))
}

func TestExitCodeOfEachFinalState(t *testing.T) {
	clearEnv(t)
	cases := map[string]int{"exit 0": ExitDone, "exit 7": ExitFailed, "kill -TERM $$": ExitKilled}
	for script, want := range cases {
		t.Run(script, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "status")
			r := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", "local", "--script", script, "--output-status", out)
			assert.Equal(t, want, r.code, r.stderr)
			b, err := os.ReadFile(out)
			require.NoError(t, err, "outputs are written whatever the exit code")
			assert.NotEmpty(t, string(b))
		})
	}
	assert.Equal(t, ExitUnknown, exitCode(&runner.Result{Status: "UNKNOWN"}, nil))
	assert.Equal(t, ExitInfra, exitCode(&runner.Result{Status: "FAILED", FailureCategory: "infrastructure"}, nil))
	assert.Equal(t, ExitFailed, exitCode(&runner.Result{Status: "FAILED", FailureCategory: "timeout"}, nil))
	assert.Equal(t, ExitFailed, exitCode(&runner.Result{Status: "FAILED", FailureCategory: "job"}, nil))
	assert.Equal(t, ExitTempFail, exitCode(&runner.Result{}, backends.Transient(assert.AnError)))
	assert.Equal(t, ExitTempFail, exitCode(&runner.Result{Status: "RUNNING"}, nil))
	assert.Equal(t, ExitInvalid, exitCode(nil, backends.Invalid("x", "y")))
}

func TestEnvironmentFallbacks(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	t.Setenv("JOBNAME", "from-ibm-env")
	t.Setenv("BRIDGE_STATE_DIR", state)
	t.Setenv("BRIDGE_BACKEND", "local")
	t.Setenv("BRIDGE_SCRIPT", "echo $BRIDGE_JOB_NAME")
	r := run(t, "invoke")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "from-ibm-env", r.summary["job"])
	assert.FileExists(t, filepath.Join(state, "from-ibm-env-bridge-cm.json"))

	t.Setenv("BRIDGE_JOB_NAME", "bridge-wins-over-ibm")
	r = run(t, "invoke", "--job-name", "flag-wins")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "flag-wins", r.summary["job"], "a flag beats the environment")

	t.Setenv("BRIDGE_UPDATE_INTERVAL", "")
	t.Setenv("BRIDGE_GRACE_PERIOD", "soon")
	r = run(t, "invoke")
	assert.Equal(t, ExitInvalid, r.code)
	assert.Contains(t, r.stderr, "BRIDGE_GRACE_PERIOD")
}

// TestBadInput: each mistake exits 2, names the field, and submits nothing.
func TestBadInput(t *testing.T) {
	clearEnv(t)
	credsNoKeys := t.TempDir()
	cases := []struct {
		name  string
		args  []string
		field string
	}{
		{"no job name", []string{"invoke", "--backend", "local", "--script", "true"}, "job-name"},
		{"job name with capitals", []string{"invoke", "--job-name", "Big", "--backend", "local", "--script", "true"}, "job-name"},
		{"unknown backend", []string{"invoke", "--job-name", "j", "--backend", "pbs", "--script", "true"}, "backend"},
		{"empty script", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", ""}, "jobdata.jobScript"},
		{"malformed jobproperties", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", "true", "--job-properties", `{"env":`}, "jobproperties"},
		{"jobproperties unknown key", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", "true", "--job-properties", `{"partition":"x"}`}, "jobproperties"},
		{"bad script location", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", "true", "--script-location", "git"}, "jobdata.scriptLocation"},
		{"remote script missing", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", "/nonexistent/run.sh", "--script-location", "remote"}, "jobdata.jobScript"},
		{"bad interval", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", "true", "--update-interval", "-3"}, "updateInterval"},
		{"local with URL", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", "true", "--resource-url", "https://x"}, "resourceURL"},
		{"no record and no flags", []string{"invoke", "--job-name", "never-created"}, "configmap"},
		{"bad store", []string{"invoke", "--job-name", "j", "--store", "redis", "--backend", "local", "--script", "true"}, "store"},
		{"bad kubeconfig", []string{"invoke", "--job-name", "j", "--store", "configmap", "--kubeconfig", "/nonexistent/kubeconfig", "--backend", "local", "--script", "true"}, "kubeconfig"},
		{"unreadable CA file", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", "true", "--ca-file", "/nonexistent/ca.pem"}, "ca-file"},
		{"create with unknown backend", []string{"create-configmap", "--job-name", "j", "--backend", "condor", "--script", "x"}, "backend"},
		{"create with bad JSON", []string{"create-configmap", "--job-name", "j", "--backend", "local", "--script", "x", "--job-parameters", "a=b"}, "jobdata.jobParameters"},
		{"s3 without endpoint", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", "b:o", "--script-location", "s3"}, "s3.endpoint"},
		{"unknown flag", []string{"invoke", "--job-nmae", "j"}, "--job-nmae"},
		{"stray argument", []string{"invoke", "--job-name", "j", "extra"}, "no arguments"},
		{"bad log level", []string{"invoke", "--log-level", "loud", "--job-name", "j"}, "--log-level"},
		{"credentials dir without keys", []string{"invoke", "--job-name", "j", "--backend", "local", "--script", "true", "--credentials-dir", credsNoKeys}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			r := run(t, append(c.args, "--state-dir", state)...)
			if c.field == "" { // the local backend needs no credentials: this one must work
				assert.Equal(t, 0, r.code, r.stderr)
				return
			}
			assert.Equal(t, ExitInvalid, r.code, "stdout=%s stderr=%s", r.stdout, r.stderr)
			assert.Contains(t, r.stdout+r.stderr, c.field, "the message names the field")
			entries, _ := os.ReadDir(filepath.Join(state, "local-jobs"))
			assert.Empty(t, entries, "nothing was submitted")
		})
	}
}

func TestCreateConfigMapIsIdempotent(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	args := []string{"create-configmap", "--state-dir", state, "--job-name", "j", "--backend", "local", "--script", "echo hi"}
	r1 := run(t, args...)
	require.Equal(t, 0, r1.code, r1.stderr)
	r2 := run(t, args...)
	require.Equal(t, 0, r2.code, "an identical record is fine")
	assert.Equal(t, r1.summary["uid"], r2.summary["uid"])
	r3 := run(t, "create-configmap", "--state-dir", state, "--job-name", "j", "--backend", "local", "--script", "echo other")
	assert.Equal(t, ExitInvalid, r3.code)
	assert.Contains(t, r3.stderr, "jobdata.jobScript")

	r := run(t, "invoke", "--state-dir", state, "--job-name", "j")
	require.Equal(t, 0, r.code, r.stderr)
	r = run(t, "cleanup", "--state-dir", state, "--job-name", "j")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NoFileExists(t, filepath.Join(state, "j-bridge-cm.json"))
	r = run(t, "cleanup", "--state-dir", state, "--job-name", "j")
	assert.Equal(t, 0, r.code, "cleanup of nothing is success")
}

func TestFlagsMatchTheSpec(t *testing.T) {
	a := &app{}
	for _, mk := range []func() *cobra.Command{a.newInvokeCmd, a.newCreateCmd} {
		cmd := mk()
		for _, f := range record.Fields {
			fl := cmd.Flags().Lookup(f.Flag)
			require.NotNil(t, fl, "%s has --%s", cmd.Name(), f.Flag)
			assert.Equal(t, f.Default, fl.DefValue)
			assert.Contains(t, fl.Usage, f.Key)
		}
	}
}
