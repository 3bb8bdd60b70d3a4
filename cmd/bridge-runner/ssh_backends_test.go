package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// sshSystem is a job system invoke reaches over SSH, for the tests below.
type sshSystem struct {
	name    string // the subtests' name: the system and its release
	backend string
	srv     func(testing.TB) testssh.Server
	// jobsWithKey prints, on the login node, the key of each job (queued or
	// ended; KEY stands for the key): one line per job that carries it is
	// the check that a crash never made a second job.
	jobsWithKey [][]string
}

var sshSystems = []sshSystem{
	{"htcondor-" + testssh.CondorPools[0].Version, htcondor.Name, testssh.CondorPools[0].Server, condorJobsWithKey},
	{"htcondor-" + testssh.CondorPools[1].Version, htcondor.Name, testssh.CondorPools[1].Server, condorJobsWithKey},
	{"slurm", "slurm", testssh.Default, [][]string{{"squeue", "--noheader", "--me", "--states=all", "--format=%k"}}},
}

var condorJobsWithKey = [][]string{
	{"condor_q", "-af", "BridgeRunnerKey", "-constraint", `BridgeRunnerKey == "KEY"`},
	{"condor_history", "-af", "BridgeRunnerKey", "-constraint", `BridgeRunnerKey == "KEY"`}}

func (s sshSystem) countJobs(t *testing.T, srv testssh.Server, key string) int {
	t.Helper()
	target, err := sshexec.ParseURL(srv.URL)
	require.NoError(t, err)
	c := sshexec.New(target, testssh.Creds(t, srv.CredsDir), nil, sshexec.Options{})
	defer c.Close()
	n := 0
	for _, cmd := range s.jobsWithKey {
		args := make([]string, len(cmd))
		for i, a := range cmd {
			args[i] = strings.ReplaceAll(a, "KEY", key)
		}
		res, err := c.Run(context.Background(), sshexec.Cmd{Args: args})
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode, string(res.Stderr))
		for _, line := range strings.Split(string(res.Stdout), "\n") {
			if strings.TrimSpace(line) == key {
				n++
			}
		}
	}
	return n
}

func summary(t *testing.T, out string) map[string]any {
	var sum map[string]any
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "{") {
			_ = json.Unmarshal([]byte(l), &sum)
		}
	}
	require.NotNil(t, sum, out)
	return sum
}

// TestSSHBackendsEndToEnd: invoke runs a job on the real HTCondor pool and
// on the real Slurm through their login nodes: the input file comes from S3
// and is staged over SFTP, the output is followed live, and the file the
// job wrote and its log land in the bucket.
func TestSSHBackendsEndToEnd(t *testing.T) {
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) { testSSHEndToEnd(t, sys) })
	}
}

func testSSHEndToEnd(t *testing.T, sys sshSystem) {
	clearEnv(t)
	srv := sys.srv(t)
	endpoint, _, _, s3Creds := tests3.Env(t)
	c := tests3.Client(t)
	in, out := tests3.Bucket(t, "in"), tests3.Bucket(t, "out")
	_, err := c.PutObject(context.Background(), in, "data.txt", strings.NewReader("42\n"), 3, minio.PutObjectOptions{})
	require.NoError(t, err)
	state := t.TempDir()
	script := "#!/bin/sh\necho \"input is $(cat data.txt)\"\necho \"result of $BRIDGE_JOB_NAME\" > result.txt\n"
	props := `{"request_cpus":1,"+ProjectName":"e2e"}`
	if sys.backend == "slurm" {
		props = `{"ntasks":1,"partition":"debug"}`
	}
	code, text := runBinary(t, "invoke", "--state-dir", state, "--job-name", "ssh-e2e", "--backend", sys.backend,
		"--resource-url", srv.URL, "--credentials-dir", srv.CredsDir, "--s3-credentials-dir", s3Creds,
		"--script", script, "--additional-data", in+":data.txt", "--job-properties", props,
		"--s3-endpoint", endpoint, "--s3-secure", "false", "--s3-upload-bucket", out, "--s3-upload-files", "result.txt",
		"--update-interval", "1")
	require.Equal(t, 0, code, text)
	assert.Equal(t, "DONE", summary(t, text)["status"], text)
	assert.Contains(t, text, "input is 42", "the job's output is copied to invoke's log")
	rec, err := record.NewFileStore(state, "ssh-e2e").Get(context.Background())
	require.NoError(t, err)
	prefix := runner.RunPrefix("ssh-e2e", rec.Data[record.KeyKey], rec.Data[record.KeyID])
	read := func(key string) string {
		o, err := c.GetObject(context.Background(), out, key, minio.GetObjectOptions{})
		require.NoError(t, err)
		b, err := io.ReadAll(o)
		require.NoError(t, err, key)
		return string(b)
	}
	assert.Equal(t, "result of ssh-e2e\n", read(prefix+"result.txt"))
	assert.Equal(t, "input is 42\n", read(prefix+"job.log"))
}

// TestSSHBackendsFailedAndKilled: a job that exits 3 makes invoke exit 1;
// a SIGTERM to invoke (Argo's stop) cancels the running job and exits 3.
func TestSSHBackendsFailedAndKilled(t *testing.T) {
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) { testSSHFailedAndKilled(t, sys) })
	}
}

func testSSHFailedAndKilled(t *testing.T, sys sshSystem) {
	clearEnv(t)
	srv := sys.srv(t)
	base := []string{"--backend", sys.backend, "--resource-url", srv.URL, "--credentials-dir", srv.CredsDir, "--update-interval", "1"}
	code, text := runBinary(t, append([]string{"invoke", "--state-dir", t.TempDir(), "--job-name", "condor-fail",
		"--script", "#!/bin/sh\nexit 3\n"}, base...)...)
	require.Equal(t, 1, code, text)
	assert.Equal(t, "FAILED", summary(t, text)["status"], text)

	state := t.TempDir()
	cmd, buf := startInvoke(t, nil, append([]string{"--state-dir", state, "--job-name", "condor-kill",
		"--script", "#!/bin/sh\necho running\nsleep 300\n"}, base...)...)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(buf.String(), "running") {
		require.True(t, time.Now().Before(deadline), "the job did not start: %s", buf.String())
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 3, exitOf(cmd.Wait()), buf.String())
	rec, err := record.NewFileStore(state, "condor-kill").Get(context.Background())
	require.NoError(t, err)
	be, err := builtinRegistry().New(sys.backend, backendsConfig(srv))
	require.NoError(t, err)
	st, err := be.Status(context.Background(), rec.Data[record.KeyID])
	require.NoError(t, err)
	assert.Equal(t, backends.Killed, st.State, "the remote job was cancelled: %s", st.Raw)
}

// TestSSHBackendsCrashesSubmitOnce kills invoke at each named point of the
// exactly-once protocol and restarts it: the restart ends DONE, and the
// system knows exactly one job carrying the run's key.
func TestSSHBackendsCrashesSubmitOnce(t *testing.T) {
	t.Parallel() // waits on real jobs; every run has its own --state-dir and key
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) { t.Parallel(); testSSHCrashes(t, sys) })
	}
}

func testSSHCrashes(t *testing.T, sys sshSystem) {
	srv := sys.srv(t)
	for _, point := range runner.CrashPoints {
		state := t.TempDir()
		args := []string{"--state-dir", state, "--job-name", "ssh-crash", "--backend", sys.backend, "--resource-url", srv.URL,
			"--credentials-dir", srv.CredsDir, "--script", "#!/bin/sh\nsleep 2\n", "--update-interval", "1", "--submit-lease", "3s"}
		cmd, out := startInvoke(t, []string{"BRIDGE_CRASH_AT=" + point}, args...)
		err := cmd.Wait()
		require.Equal(t, -1, exitOf(err), "invoke must die at %s: %s", point, out)
		code, text := runBinary(t, append([]string{"invoke"}, args...)...)
		require.Equal(t, 0, code, "after a crash at %s: %s", point, text)
		rec, err := record.NewFileStore(state, "ssh-crash").Get(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 1, sys.countJobs(t, srv, rec.Data[record.KeyKey]), "crash at %s: one job for the run", point)
	}
}

func builtinRegistry() *backends.Registry { return builtin.Registry() }

func backendsConfig(srv testssh.Server) backends.Config {
	return backends.Config{URL: srv.URL, Credentials: runner.DirCredentials{Dir: srv.CredsDir, Secrets: &runner.Secrets{}}}
}

// TestSlurmSSHSurvivesSSHDRestart: the login node's sshd (and every session
// it serves) dies while invoke follows a job and comes back; invoke
// reconnects and follows the same job to DONE.
func TestSlurmSSHSurvivesSSHDRestart(t *testing.T) {
	clearEnv(t)
	srv := testssh.Default(t)
	d := testssh.StartSSHD(t, srv)
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
	state := t.TempDir()
	cmd, buf := startInvoke(t, nil, "--state-dir", state, "--job-name", "ssh-restart", "--backend", "slurm",
		"--resource-url", "ssh://"+srv.User+"@"+d.Addr(), "--credentials-dir", creds,
		"--script", "#!/bin/sh\necho started\nsleep 8\necho finished\n", "--update-interval", "1")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(buf.String(), "state=RUNNING") {
		require.True(t, time.Now().Before(deadline), "the job did not start: %s", buf.String())
		time.Sleep(100 * time.Millisecond)
	}
	d.Stop()
	time.Sleep(2 * time.Second)
	d.Start()
	require.Equal(t, 0, exitOf(cmd.Wait()), buf.String())
	assert.Contains(t, buf.String(), "finished")
	assert.Contains(t, buf.String(), "ssh connection dropped")
	rec, err := record.NewFileStore(state, "ssh-restart").Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, sshSystems[len(sshSystems)-1].countJobs(t, srv, rec.Data[record.KeyKey]), "the last of sshSystems is Slurm")
}

// TestSlurmSSHPartition: the network to the login node goes silent (the
// connection stays open, nothing passes) while invoke follows a job. That
// is an outage like any other: logged, given up after --retry-budget with
// exit 75; and a SIGTERM during it exits within the grace period. Before,
// invoke logged nothing after the drop, ignored the budget, and took over 3
// minutes to obey SIGTERM.
func TestSlurmSSHPartition(t *testing.T) {
	clearEnv(t)
	srv := testssh.Default(t)
	for _, sigterm := range []bool{false, true} {
		t.Run(map[bool]string{false: "budget", true: "sigterm"}[sigterm], func(t *testing.T) {
			t.Parallel()
			px := testutil.NewProxy(t, srv.Addr)
			resourceURL, creds := sshThroughProxy(t, srv, px.Addr)
			state, job := t.TempDir(), "ssh-partition"
			const budget, grace = 30 * time.Second, 10 * time.Second
			cmd, buf := startInvoke(t, nil, "--state-dir", state, "--job-name", job, "--backend", "slurm",
				"--resource-url", resourceURL, "--credentials-dir", creds, "--retry-budget", budget.String(),
				"--grace-period", grace.String(), "--script", "#!/bin/sh\necho started\nsleep 300\n", "--update-interval", "1")
			t.Cleanup(func() { // the job outlives an invoke that gave up
				rec, err := record.NewFileStore(state, job).Get(context.Background())
				if err == nil && rec.Data[record.KeyID] != "" {
					be, err := builtinRegistry().New("slurm", backendsConfig(srv))
					if err == nil {
						_ = be.Cancel(context.Background(), rec.Data[record.KeyID])
						if c, ok := be.(io.Closer); ok {
							c.Close()
						}
					}
				}
			})
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(buf.String(), "started") {
				require.True(t, time.Now().Before(deadline), "the job did not start: %s", buf.String())
				time.Sleep(100 * time.Millisecond)
			}
			px.Set(t, testutil.Blackhole)
			start := time.Now()
			limit := budget + 20*time.Second // a ceiling: the budget, plus the time to notice it ran out
			if sigterm {
				time.Sleep(3 * time.Second)
				require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
				start, limit = time.Now(), grace+5*time.Second
			}
			done := make(chan int, 1)
			go func() { done <- exitOf(cmd.Wait()) }()
			select {
			case code := <-done:
				t.Logf("invoke exited %d %s after the partition (or SIGTERM)", code, time.Since(start).Round(time.Millisecond))
				if !sigterm {
					assert.Equal(t, ExitTempFail, code, buf.String())
					assert.Contains(t, buf.String(), "ssh: no answer from "+px.Addr, "the partition is logged")
				}
			case <-time.After(limit):
				_ = cmd.Process.Kill()
				t.Fatalf("invoke still runs %s into the partition:\n%s", limit, buf.String())
			}
		})
	}
}

// TestSSHBackendsThroughBastion: invoke runs a job on the real HTCondor
// pool and on the real Slurm through a real sshd jump host: with the jump
// host's own key and known_hosts line in the credentials directory
// (jump1-ssh-privatekey, jump1-known_hosts), then with no key in it at all
// and a real ssh-agent holding both keys (SSH_AUTH_SOCK). A jump host whose
// key known_hosts does not hold is exit 2 naming it.
func TestSSHBackendsThroughBastion(t *testing.T) {
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) { testSSHThroughBastion(t, sys) })
	}
}

func testSSHThroughBastion(t *testing.T, sys sshSystem) {
	clearEnv(t)
	t.Setenv("SSH_AUTH_SOCK", "")
	srv, jump := sys.srv(t), testssh.Default(t)
	url, creds, b := testssh.ViaBastion(t, srv, jump, nil)
	dir := t.TempDir()
	for _, k := range []string{"ssh-privatekey", "known_hosts", "jump1-ssh-privatekey", "jump1-known_hosts"} {
		v, err := creds.Get(k)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o600))
	}
	run := func(name string) (int, string) {
		return runBinary(t, "invoke", "--state-dir", t.TempDir(), "--job-name", name, "--backend", sys.backend,
			"--resource-url", url, "--credentials-dir", dir, "--script", "#!/bin/sh\necho through the bastion\n", "--update-interval", "1")
	}
	code, text := run("ssh-bastion")
	require.Equal(t, 0, code, text)
	assert.Equal(t, "DONE", summary(t, text)["status"], text)
	assert.Contains(t, text, "through the bastion")

	t.Setenv("SSH_AUTH_SOCK", testssh.Agent(t, filepath.Join(srv.CredsDir, "ssh-privatekey"), filepath.Join(jump.CredsDir, "ssh-privatekey")))
	require.NoError(t, os.Remove(filepath.Join(dir, "ssh-privatekey")))
	require.NoError(t, os.Remove(filepath.Join(dir, "jump1-ssh-privatekey")))
	code, text = run("ssh-bastion-agent")
	require.Equal(t, 0, code, text)
	assert.Equal(t, "DONE", summary(t, text)["status"], text)

	kh, err := creds.Get("known_hosts")
	require.NoError(t, err)
	wrong := strings.Fields(b.KnownHosts)[0] + " " + strings.Join(strings.Fields(kh)[1:3], " ")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "jump1-known_hosts"), []byte(wrong+"\n"), 0o600))
	code, text = run("ssh-bastion-wrong-key")
	require.Equal(t, 2, code, text)
	assert.Contains(t, text, "jump host 1")
}

// TestSSHBackendsArrayLogs: an array's step log is its first task's
// output, read from the login node while it runs (HTCondor's job.out of
// the cluster's first index, Slurm's output file of the lowest task); the
// other tasks print the same lines, which must not reach it.
func TestSSHBackendsArrayLogs(t *testing.T) {
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) {
			clearEnv(t)
			srv := sys.srv(t)
			script := "#!/bin/bash\necho \"task $BRIDGE_TASK_INDEX\"\n" + strings.TrimPrefix(printingScript(6), "#!/bin/bash\n")
			code, out := runBinary(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "ssh-array-logs",
				"--backend", sys.backend, "--resource-url", srv.URL, "--credentials-dir", srv.CredsDir,
				"--script", script, "--array", "2-4", "--update-interval", "5", "--log-interval", "1s")
			require.Equal(t, 0, code, out)
			assertStreamed(t, out, 6)
			assert.Equal(t, 1, strings.Count(out, "task 2\n"), "the first task's output:\n%s", out)
			assert.NotContains(t, out, "task 3\n", "only the first task's output:\n%s", out)
			assert.NotContains(t, out, "task 4\n", "only the first task's output:\n%s", out)
			assert.Equal(t, "DONE=3", summary(t, out)["arrayCounts"], out)
		})
	}
}
