package ray

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

const testKey = "br-0123456789abcdef0123"

func newBackend(t *testing.T, f *fakeRay, creds backends.Credentials) *Backend {
	t.Helper()
	be, err := New(backends.Config{URL: f.URL + "/", Credentials: creds, HTTPClient: f.Client()})
	require.NoError(t, err)
	return be.(*Backend)
}

func pyJob(script string) backends.Job {
	return backends.Job{Name: "sim-42", Key: testKey, Script: script}
}

// The interfaces the runner discovers by type assertion.
var (
	_ backends.Backend   = (*Backend)(nil)
	_ backends.Finder    = (*Backend)(nil)
	_ backends.Validator = (*Backend)(nil)
	_ backends.LogReader = (*Backend)(nil)

	_ backends.StatusBatcher = (*Backend)(nil)
)

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "ray-head:8265", "ftp://x", "http://", "http://h:8265/?a=b"} {
		_, err := New(backends.Config{URL: u})
		assert.ErrorIs(t, err, backends.ErrInvalid, u)
		assert.ErrorContains(t, err, "resourceURL", u)
	}
	be, err := New(backends.Config{URL: "https://proxy.example/ray/"})
	require.NoError(t, err)
	assert.Equal(t, "/ray", be.(*Backend).base.Path, "a path prefix is kept, without the slash")
}

func TestSubmitRequest(t *testing.T) {
	f := newFakeRay(t)
	be := newBackend(t, f, nil)
	job := pyJob("print('hi')\n")
	job.Parameters = json.RawMessage(`{"n": 3}`)
	job.Metadata = json.RawMessage(`{"owner": "me"}`)
	job.Properties = json.RawMessage(`{
		"working_dir": "s3://bucket/code.zip",
		"pip": ["numpy==2.0.0"],
		"env_vars": {"FOO": "bar $HOME '\"; rm -rf /"},
		"runtime_env": {"py_modules": ["s3://bucket/m.zip"]},
		"entrypoint_num_cpus": 0.5, "entrypoint_num_gpus": 1, "entrypoint_memory": 1073741824,
		"entrypoint_resources": {"custom": 2},
		"metadata": {"team": "qc"},
		"args": ["--x", "a b", "$(touch /tmp/pwned)"]}`)
	id, err := be.Submit(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, testKey, id, "the id is the submission_id, which is the key")

	req := f.job(testKey).req
	assert.Equal(t, testKey, req["submission_id"])
	assert.Equal(t, `umask 077 && 'python' -u -c 'import os;exec(os.environ.pop("BRIDGE_BOOTSTRAP"))'`, req["entrypoint"],
		"the entrypoint is constant text: nothing of the job is pasted into it")
	rt := req["runtime_env"].(map[string]any)
	assert.Equal(t, "s3://bucket/code.zip", rt["working_dir"])
	assert.Equal(t, []any{"numpy==2.0.0"}, rt["pip"])
	assert.Equal(t, []any{"s3://bucket/m.zip"}, rt["py_modules"])
	env := rt["env_vars"].(map[string]any)
	assert.Equal(t, "print('hi')\n", env["BRIDGE_SCRIPT"])
	assert.Equal(t, bootstrap, env["BRIDGE_BOOTSTRAP"])
	assert.Equal(t, `["--x","a b","$(touch /tmp/pwned)"]`, env["BRIDGE_ARGS"])
	assert.Equal(t, `{"n": 3}`, env["BRIDGE_JOB_PARAMETERS"])
	assert.Equal(t, `{"owner": "me"}`, env["BRIDGE_SCRIPT_METADATA"])
	assert.Equal(t, "sim-42", env["BRIDGE_JOB_NAME"])
	assert.Equal(t, testKey, env["BRIDGE_JOB_KEY"])
	assert.Equal(t, "bar $HOME '\"; rm -rf /", env["FOO"])
	assert.Equal(t, map[string]any{"job_name": "sim-42", "submitted_by": "bridge-runner", "team": "qc"}, req["metadata"])
	assert.Equal(t, 0.5, req["entrypoint_num_cpus"])
	assert.Equal(t, 1.0, req["entrypoint_num_gpus"])
	assert.Equal(t, 1073741824.0, req["entrypoint_memory"])
	assert.Equal(t, map[string]any{"custom": 2.0}, req["entrypoint_resources"])
}

func TestSubmitRemoteScriptAndOwnEntrypoint(t *testing.T) {
	f := newFakeRay(t)
	be := newBackend(t, f, nil)
	job := backends.Job{Name: "j", Key: testKey, ScriptPath: "/shared/it's here.py",
		Properties: json.RawMessage(`{"python": "/opt/conda/bin/python3"}`)}
	_, err := be.Submit(context.Background(), job)
	require.NoError(t, err)
	req := f.job(testKey).req
	assert.Equal(t, `umask 077 && '/opt/conda/bin/python3' -u -c 'import os;exec(os.environ.pop("BRIDGE_BOOTSTRAP"))'`, req["entrypoint"])
	env := req["runtime_env"].(map[string]any)["env_vars"].(map[string]any)
	assert.Equal(t, "/shared/it's here.py", env["BRIDGE_SCRIPT_PATH"])
	assert.NotContains(t, env, "BRIDGE_SCRIPT")

	job = backends.Job{Name: "j", Key: "br-other", Script: "echo hi",
		Properties: json.RawMessage(`{"entrypoint": "bash -c \"$BRIDGE_SCRIPT\""}`)}
	_, err = be.Submit(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, `umask 077 && bash -c "$BRIDGE_SCRIPT"`, f.job("br-other").req["entrypoint"])
}

func TestValidate(t *testing.T) {
	be := newBackend(t, newFakeRay(t), nil)
	cases := map[string]struct {
		job   backends.Job
		field string
		text  string
	}{
		"unknown property": {job: withProps(pyJob("x"), `{"num_cpus": 1}`), field: "jobproperties", text: "entrypoint_num_cpus"},
		"not an object":    {job: withProps(pyJob("x"), `[1]`), field: "jobproperties"},
		"no script":        {job: pyJob(""), field: "jobdata.jobScript", text: "no script"},
		"script too big":   {job: pyJob(strings.Repeat("#", 130<<10)), field: "jobdata.jobScript", text: "128 KiB"},
		"NUL in script":    {job: pyJob("a\x00b"), field: "jobdata.jobScript", text: "NUL"},
		"params too big": {job: backends.Job{Name: "n", Key: testKey, Script: "x",
			Parameters: json.RawMessage(`"` + strings.Repeat("p", 130<<10) + `"`)}, field: "jobdata.jobParameters"},
		"reserved env":      {job: withProps(pyJob("x"), `{"env_vars": {"BRIDGE_SCRIPT": "y"}}`), field: "jobproperties", text: "BRIDGE_SCRIPT"},
		"env twice":         {job: withProps(pyJob("x"), `{"env_vars": {}, "runtime_env": {"env_vars": {}}}`), field: "jobproperties", text: "once"},
		"working_dir twice": {job: withProps(pyJob("x"), `{"working_dir": "a", "runtime_env": {"working_dir": "b"}}`), field: "jobproperties", text: "once"},
		"env not strings":   {job: withProps(pyJob("x"), `{"runtime_env": {"env_vars": {"A": 1}}}`), field: "jobproperties"},
		"key case":          {job: withProps(pyJob("x"), `{"runtime_env": {"Env_Vars": {"A": "1"}}}`), field: "jobproperties", text: "write env_vars"},
		"args with entrypoint": {job: withProps(pyJob("x"), `{"entrypoint": "true", "args": ["a"]}`),
			field: "jobproperties", text: "cannot be combined"},
		"negative cpus": {job: withProps(pyJob("x"), `{"entrypoint_num_cpus": -1}`), field: "jobproperties"},
		"no key":        {job: backends.Job{Script: "x"}, field: "idempotency key"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := be.Validate(c.job)
			require.ErrorIs(t, err, backends.ErrInvalid)
			var fe *backends.FieldError
			require.True(t, errors.As(err, &fe))
			assert.Equal(t, c.field, fe.Field)
			assert.Contains(t, err.Error(), c.text)
		})
	}
	assert.NoError(t, be.Validate(withProps(pyJob("print(1)"), `{"entrypoint_num_cpus": 1, "pip": {"packages": ["x"]}}`)))
	assert.NoError(t, be.Validate(withProps(pyJob(""), `{"entrypoint": "python -m http.server"}`)), "an entrypoint needs no script")
}

func withProps(j backends.Job, props string) backends.Job {
	j.Properties = json.RawMessage(props)
	return j
}

func TestDuplicateIsErrExistsAndFindByKeyAdopts(t *testing.T) {
	for _, status := range []int{400, 500} { // Ray < 2.9 and Ray >= 2.9
		t.Run(http_status(status), func(t *testing.T) {
			f := newFakeRay(t)
			f.dupStatus = status
			be := newBackend(t, f, nil)
			ctx := context.Background()

			id, err := be.FindByKey(ctx, testKey)
			require.NoError(t, err)
			assert.Empty(t, id, "nothing submitted yet")

			_, err = be.Submit(ctx, pyJob("print(1)"))
			require.NoError(t, err)
			_, err = be.Submit(ctx, pyJob("print(1)"))
			require.ErrorIs(t, err, backends.ErrExists)
			assert.NotErrorIs(t, err, backends.ErrTransient, "a duplicate must not be retried as a 500")
			assert.Contains(t, err.Error(), "ValueError: Job with submission_id … already exists", "the exception line, not the traceback")
			assert.NotContains(t, err.Error(), "Traceback")

			id, err = be.FindByKey(ctx, testKey)
			require.NoError(t, err)
			assert.Equal(t, testKey, id)
			assert.Len(t, f.order, 1, "one job, not two")
		})
	}
}

func http_status(s int) string { return "HTTP " + string(rune('0'+s/100)) + "xx" }

func TestStatusMapping(t *testing.T) {
	f := newFakeRay(t)
	be := newBackend(t, f, nil)
	ctx := context.Background()
	_, err := be.Submit(ctx, pyJob("print(1)"))
	require.NoError(t, err)

	st, err := be.Status(ctx, testKey)
	require.NoError(t, err)
	assert.Equal(t, backends.Pending, st.State)
	assert.Equal(t, "PENDING", st.Raw)
	assert.True(t, st.StartTime.IsZero())
	assert.False(t, st.SubmitTime.IsZero())
	assert.WithinDuration(t, time.Now(), st.SubmitTime, 5*time.Second)

	f.set(testKey, func(j *fakeJob) { j.status, j.message = "RUNNING", "Job is currently running." })
	st, err = be.Status(ctx, testKey)
	require.NoError(t, err)
	assert.Equal(t, backends.Running, st.State)
	assert.Equal(t, st.SubmitTime, st.StartTime, "Ray's start_time, set at submission")
	started := st.StartTime

	three := 3
	f.set(testKey, func(j *fakeJob) {
		j.status, j.errType, j.exitCode, j.end = "FAILED", "JOB_ENTRYPOINT_COMMAND_ERROR", &three, time.Now().UnixMilli()
		j.message = "Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 chars):\nTraceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom\n"
	})
	st, err = be.Status(ctx, testKey)
	require.NoError(t, err)
	assert.Equal(t, backends.Failed, st.State)
	assert.Equal(t, "FAILED", st.Raw)
	assert.Equal(t, "JOB_ENTRYPOINT_COMMAND_ERROR", st.Reason)
	assert.Equal(t, backends.CategoryJob, st.FailureCategory(), "the entrypoint's own failure is the job's")
	assert.Equal(t, "Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 chars): ... ValueError: boom (the whole log is in the step's log)", st.Message,
		"the message does not end at the colon: the exception comes with it")
	require.NotNil(t, st.ExitCode)
	assert.Equal(t, 3, *st.ExitCode)
	assert.False(t, st.EndTime.IsZero())
	assert.Equal(t, started, st.StartTime)

	// The node running the supervisor actor was lost (Ray's error type
	// when the actor died): the infrastructure's doing.
	f.set(testKey, func(j *fakeJob) {
		j.errType, j.exitCode, j.message = "JOB_SUPERVISOR_ACTOR_DIED", nil, "Job supervisor actor died: node lost"
	})
	st, err = be.Status(ctx, testKey)
	require.NoError(t, err)
	assert.Equal(t, backends.Failed, st.State)
	assert.Equal(t, backends.CategoryInfrastructure, st.FailureCategory())

	for raw, want := range map[string]backends.State{"SUCCEEDED": backends.Done, "STOPPED": backends.Killed} {
		f.set(testKey, func(j *fakeJob) { j.status = raw })
		st, err = be.Status(ctx, testKey)
		require.NoError(t, err)
		assert.Equal(t, want, st.State, raw)
		assert.Equal(t, raw, st.Raw)
	}

	f.set(testKey, func(j *fakeJob) { j.status, j.end = "HIBERNATING", 0 })
	st, err = be.Status(ctx, testKey)
	require.NoError(t, err)
	assert.Equal(t, backends.Running, st.State, "an unknown state of a job that has not ended keeps it followed")
	assert.Contains(t, st.Message, `unrecognized Ray job state "HIBERNATING"`)

	_, err = be.Status(ctx, "br-nope")
	assert.ErrorIs(t, err, backends.ErrNotFound)
	assert.ErrorContains(t, err, "Job br-nope does not exist")
}

func TestCancel(t *testing.T) {
	f := newFakeRay(t)
	be := newBackend(t, f, nil)
	ctx := context.Background()
	_, err := be.Submit(ctx, pyJob("print(1)"))
	require.NoError(t, err)
	require.NoError(t, be.Cancel(ctx, testKey))
	assert.Contains(t, f.requests, "POST /api/jobs/"+testKey+"/stop")
	st, err := be.Status(ctx, testKey)
	require.NoError(t, err)
	assert.Equal(t, backends.Killed, st.State)
	assert.NoError(t, be.Cancel(ctx, testKey), "cancelling an ended job ({\"stopped\": false}) is no error")
	assert.ErrorIs(t, be.Cancel(ctx, "br-nope"), backends.ErrNotFound)
}

// readUntil reads the job's log until out holds want bytes (the stream
// delivers what the job printed within a few of the fake's looks).
func readUntil(t *testing.T, be *Backend, off int64, out *bytes.Buffer, want int) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for out.Len() < want && time.Now().Before(deadline) {
		before := out.Len()
		next, err := be.ReadLogs(context.Background(), testKey, off, out)
		require.NoError(t, err)
		require.EqualValues(t, next-off, out.Len()-before, "the offset counts the bytes written")
		off = next
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, want, out.Len(), out.String())
	return off
}

func TestReadLogsStreamsFromOffset(t *testing.T) {
	f := newFakeRay(t)
	be := newBackend(t, f, nil)
	ctx := context.Background()
	_, err := be.Submit(ctx, pyJob("print(1)"))
	require.NoError(t, err)
	f.set(testKey, func(j *fakeJob) { j.status = "RUNNING" })

	var out bytes.Buffer
	off, err := be.ReadLogs(ctx, testKey, 0, &out)
	require.NoError(t, err, "reading returns at once, whatever has arrived")

	f.set(testKey, func(j *fakeJob) { j.logs = "line 1\nline 2 ü\n" })
	off = readUntil(t, be, off, &out, len("line 1\nline 2 ü\n"))
	assert.EqualValues(t, len("line 1\nline 2 ü\n"), off, "offsets count bytes")

	// The job ends: once Status saw it, one read gets the log to its end.
	f.set(testKey, func(j *fakeJob) { j.logs += strings.Repeat("line 3\n", 3000); j.status = "SUCCEEDED" })
	st, err := be.Status(ctx, testKey)
	require.NoError(t, err)
	require.True(t, st.State.Final())
	off, err = be.ReadLogs(ctx, testKey, off, &out)
	require.NoError(t, err)
	assert.Equal(t, "line 1\nline 2 ü\n"+strings.Repeat("line 3\n", 3000), out.String(), "every byte exactly once")
	assert.EqualValues(t, out.Len(), off)

	// A restarted invoke resumes at the persisted offset: what came before
	// is skipped, not written again.
	var again bytes.Buffer
	be2 := newBackend(t, f, nil)
	_, err = be2.Status(ctx, testKey)
	require.NoError(t, err)
	next, err := be2.ReadLogs(ctx, testKey, 7, &again)
	require.NoError(t, err)
	assert.Equal(t, out.String()[7:], again.String())
	assert.EqualValues(t, out.Len(), next)

	f.mu.Lock()
	var full int
	for _, r := range f.requests {
		if strings.HasSuffix(r, "/logs") {
			full++
		}
	}
	f.mu.Unlock()
	assert.Zero(t, full, "the whole log is never fetched")

	_, err = be.ReadLogs(ctx, "br-nope", 0, &again)
	assert.ErrorIs(t, err, backends.ErrNotFound)
}

func TestTokenAuth(t *testing.T) {
	f := newFakeRay(t)
	f.token = "s3cr3t-token"
	ctx := context.Background()

	// No token in the Secret: requests carry none, and the 401 says why.
	creds := &memCreds{m: map[string]string{}}
	be := newBackend(t, f, creds)
	_, err := be.Status(ctx, testKey)
	require.ErrorIs(t, err, backends.ErrAuth)
	assert.ErrorContains(t, err, "HTTP 401 Unauthorized")
	assert.ErrorContains(t, err, `the key "token"`)
	assert.NotContains(t, err.Error(), "Missing authentication token", "the server's words are never copied on 401/403")
	assert.ErrorContains(t, err, `none was sent`)
	assert.Empty(t, f.lastAuth)

	creds.set("token", "wrong\n")
	_, err = be.Submit(ctx, pyJob("print(1)"))
	require.ErrorIs(t, err, backends.ErrAuth)
	assert.ErrorContains(t, err, "HTTP 403 Forbidden: the Ray dashboard refused the token")
	assert.NotContains(t, err.Error(), "none was sent")

	// A rotated Secret is read on the next request, trimmed.
	creds.set("token", "s3cr3t-token\n")
	_, err = be.Submit(ctx, pyJob("print(1)"))
	require.NoError(t, err)
	assert.Equal(t, "Bearer s3cr3t-token", f.lastAuth)

	// Without token mode, no credentials at all is fine.
	g := newFakeRay(t)
	_, err = newBackend(t, g, nil).Submit(ctx, pyJob("print(1)"))
	require.NoError(t, err)
	assert.Empty(t, g.lastAuth)
}

// TestErrorsArePlainText: Ray's plain-text errors give their exception or
// first line as the reason (words only, see httpx.Reason).
func TestErrorsArePlainText(t *testing.T) {
	f := newFakeRay(t)
	be := newBackend(t, f, nil)
	ctx := context.Background()

	f.fail(503)
	_, err := be.Submit(ctx, pyJob("print(1)"))
	assert.ErrorIs(t, err, backends.ErrTransient)
	assert.ErrorContains(t, err, "HTTP 503 from the Ray dashboard: Service Unavailable; the dashboard's log")

	f.fail(429)
	_, err = be.Status(ctx, testKey)
	assert.ErrorIs(t, err, backends.ErrTransient)

	f.fail(500)
	assert.ErrorIs(t, be.Cancel(ctx, testKey), backends.ErrTransient)

	// A 400 traceback is reduced to its exception; not retried.
	err = func() error {
		r := &response{status: 400, body: []byte("  Traceback (most recent call last):\n  File \"x\", line 1\nTypeError: missing 'entrypoint'\n\n")}
		return backends.Invalid("jobproperties", "the Ray cluster refused the job: %s", r.text())
	}()
	assert.ErrorContains(t, err, "refused the job: HTTP 400 from the Ray dashboard: TypeError: missing 'entrypoint'")
	assert.Equal(t, "HTTP 404 from the Ray dashboard: Job x does not exist", (&response{status: 404, body: []byte("\n Job x does not exist \n")}).text())
	assert.Equal(t, "HTTP 500 from the Ray dashboard: No available agent", (&response{status: 500, body: []byte(`{"detail":"No available agent"}`)}).text())

	// The wrong URL (no Jobs API there) is a configuration error.
	wrong, err := New(backends.Config{URL: f.URL + "/elsewhere", HTTPClient: f.Client()})
	require.NoError(t, err)
	_, err = wrong.Submit(ctx, pyJob("print(1)"))
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.ErrorContains(t, err, "404: Not Found")

	// Connection refused is transient.
	f.Close()
	_, err = be.Status(ctx, testKey)
	assert.ErrorIs(t, err, backends.ErrTransient)
}

func TestShellQuote(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range []string{"", "plain", "it's", "'", "''", `a "b" $c $(d) ` + "`e`", "new\nline", `back\slash`, "*?[x]"} {
		out, err := exec.Command(sh, "-c", "printf %s "+shellQuote(s)).Output()
		require.NoError(t, err, s)
		assert.Equal(t, s, string(out))
	}
}

// TestEntrypointFilesOwnerOnly: what the job writes, through the
// bootstrap or the user's own entrypoint, is its owner's only, though the
// driver is started with umask 022.
func TestEntrypointFilesOwnerOnly(t *testing.T) {
	py := filepath.Join(os.Getenv("BRIDGE_RAY_VENV"), "bin", "python")
	if _, err := os.Stat(py); err != nil {
		if py, err = exec.LookPath("python3"); err != nil {
			t.Fatal("no python3 to run the bootstrap with")
		}
	}
	dir := t.TempDir()
	env, err := envVars("n", testKey, "open('boot.txt', 'w').write('x')\n", "", nil, nil, nil)
	require.NoError(t, err)
	for _, p := range []Properties{{Python: py}, {Entrypoint: "echo x > own.txt"}} {
		cmd := exec.Command("sh", "-c", "umask 022 && "+entrypoint(p))
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	for _, name := range []string{"boot.txt", "own.txt"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Zero(t, fi.Mode().Perm()&0o077, "%s is %v: another user may read it", name, fi.Mode().Perm())
	}
}

// The bootstrap runs the script as `python script.py args` would: argv,
// __name__, exit status, tracebacks with the script's lines, and no shell
// anywhere. Needs a local python3.
func TestBootstrapRunsScript(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the bootstrap is exercised by the integration tests")
	}
	p := Properties{Python: py, Args: []string{"a b", "$(echo no)", "'"}}
	run := func(env map[string]string) (string, int) {
		cmd := exec.Command("sh", "-c", entrypoint(p))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	script := "import os, sys\nprint(__name__, sys.argv[1:], 'BRIDGE_SCRIPT' in os.environ, 'BRIDGE_BOOTSTRAP' in os.environ)\nsys.exit(int(os.environ['BRIDGE_JOB_PARAMETERS']))\n"
	env, err := envVars("n", testKey, script, "", p.Args, json.RawMessage(`4`), nil)
	require.NoError(t, err)
	out, code := run(env)
	assert.Equal(t, "__main__ ['a b', '$(echo no)', \"'\"] False False\n", out)
	assert.Equal(t, 4, code)

	env, err = envVars("n", testKey, "x = 1\nraise RuntimeError('bad ' + str(x))\n", "", nil, nil, nil)
	require.NoError(t, err)
	out, code = run(env)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "raise RuntimeError('bad ' + str(x))", "the traceback shows the script's line")
	assert.Contains(t, out, "RuntimeError: bad 1")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "helper.py"), []byte("X = 'imported'\n"), 0o600))
	path := filepath.Join(dir, "main's.py")
	require.NoError(t, os.WriteFile(path, []byte("import sys, helper\nprint(sys.argv[0] == __file__, helper.X, sys.argv[1])\n"), 0o600))
	env, err = envVars("n", testKey, "", path, []string{"arg"}, nil, nil)
	require.NoError(t, err)
	out, code = run(env)
	assert.Equal(t, 0, code, out)
	assert.Equal(t, "True imported arg\n", out, "a remote script imports from its own directory")
}

// TestIBMScriptMetadataBecomesRuntimeEnv: IBM's Ray samples carry pip and
// env in scriptMetadata; they reach Ray's runtime_env as IBM's pod sent
// them, beneath jobproperties.
func TestIBMScriptMetadataBecomesRuntimeEnv(t *testing.T) {
	job := backends.Job{Key: "k", Script: "print(1)\n", Metadata: json.RawMessage(`{"pip":{"numpy":"1.26.4","requests":""},"env":{"A":"1","B":"2"}}`)}
	req, err := buildRequest(job)
	require.NoError(t, err)
	assert.JSONEq(t, `["numpy==1.26.4","requests"]`, string(req.RuntimeEnv["pip"].(json.RawMessage)))
	env := req.RuntimeEnv["env_vars"].(map[string]string)
	assert.Equal(t, "1", env["A"])
	assert.Equal(t, "2", env["B"])

	job.Properties = json.RawMessage(`{"pip":["scipy"],"runtime_env":{"env_vars":{"B":"props"}}}`)
	req, err = buildRequest(job)
	require.NoError(t, err)
	assert.JSONEq(t, `["scipy"]`, string(req.RuntimeEnv["pip"].(json.RawMessage)), "jobproperties wins")
	env = req.RuntimeEnv["env_vars"].(map[string]string)
	assert.Equal(t, "props", env["B"])
	assert.Equal(t, "1", env["A"])

	job.Metadata = json.RawMessage(`{"pip":7}`)
	job.Properties = nil
	_, err = buildRequest(job)
	require.ErrorIs(t, err, backends.ErrInvalid)
}
