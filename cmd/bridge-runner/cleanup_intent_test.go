package main

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// lostJobSystem is a real job system as the cleanup-of-an-intent test
// needs it: reached by invoke and cleanup through a fault proxy, and asked
// directly (never through the proxy) which jobs carry a key.
type lostJobSystem struct {
	backend string
	server  string // what the proxy stands in for, for the log
	target  string // host:port behind the proxy
	script  string // a job that runs long enough to be cancelled
	// proxied returns the resourceURL and credentials directory that
	// reach the system through the proxy at addr.
	proxied func(t *testing.T, addr string) (resourceURL, creds string)
	// jobs maps the id of each job carrying key to its state.
	jobs                func(t *testing.T, key string) map[string]string
	alive, wasCancelled func(state string) bool
}

// testCleanupIntentUnreachable: issue 25 item 2 on a real system. invoke
// dies between the system accepting the job and recording its id (a submit
// intent, no id). With the system refused, then blackholed, cleanup cannot
// look for the job by its key: it keeps the record (intent and kill=true),
// exits 75 and says what is true, and the job runs on. Once the system
// answers, cleanup finds the job by its key, cancels it and deletes the
// record. The old cleanup deleted the record and exited 0 while the job ran.
func testCleanupIntentUnreachable(t *testing.T, sys lostJobSystem) {
	px := testutil.NewProxy(t, sys.target)
	resourceURL, creds := sys.proxied(t, px.Addr)
	state := t.TempDir()
	cmd, out := startInvoke(t, []string{"BRIDGE_CRASH_AT=after-submit"}, "--state-dir", state, "--job-name", "lost",
		"--backend", sys.backend, "--resource-url", resourceURL, "--credentials-dir", creds,
		"--script", sys.script, "--update-interval", "1")
	var ee *exec.ExitError
	require.True(t, errors.As(cmd.Wait(), &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL, out.String())
	store := record.NewFileStore(state, "lost")
	rec, err := store.Get(context.Background())
	require.NoError(t, err)
	require.Empty(t, rec.Data[record.KeyID])
	require.NotEmpty(t, rec.Data[record.KeyIntent])
	key := runner.IdempotencyKey(rec.UID)
	require.Len(t, sys.jobs(t, key), 1, "%s has the job", sys.backend)

	const budget = 3 * time.Second
	for _, mode := range []testutil.Mode{testutil.Refuse, testutil.Blackhole} {
		px.Set(t, mode)
		start := time.Now()
		r := run(t, "cleanup", "--state-dir", state, "--job-name", "lost", "--credentials-dir", creds, "--wait", "0s", "--retry-budget", budget.String())
		took := time.Since(start)
		t.Logf("cleanup with %s %s: exit %d after %s: %s", sys.server, mode, r.code, took.Round(time.Millisecond), r.stdout)
		assert.Equal(t, ExitTempFail, r.code, r.stderr)
		assert.Less(t, took, budget+15*time.Second, "cleanup gives up about when its budget runs out")
		assert.Equal(t, false, r.summary["deleted"], r.stdout)
		assert.Equal(t, false, r.summary["cancelled"], r.stdout)
		assert.Contains(t, r.summary["reason"], "idempotency key")
		rec, err = store.Get(context.Background())
		require.NoError(t, err, "the record is kept")
		assert.NotEmpty(t, rec.Data[record.KeyIntent], "the job is still tracked")
		assert.Equal(t, "true", rec.Data[record.KeyKill])
		jobs := sys.jobs(t, key)
		assert.Len(t, jobs, 1, "the job is still there")
		for id, st := range jobs {
			assert.True(t, sys.alive(st), "job %s runs on (%s), and the record says so", id, st)
		}
	}

	px.Set(t, testutil.Pass)
	r := run(t, "cleanup", "--state-dir", state, "--job-name", "lost", "--credentials-dir", creds, "--wait", "0s")
	require.Equal(t, ExitDone, r.code, r.stderr)
	assert.Equal(t, true, r.summary["cancelled"], r.stdout)
	assert.Equal(t, true, r.summary["deleted"], r.stdout)
	assert.NoFileExists(t, filepath.Join(state, "lost-bridge-cm.json"))
	// A job just removed may be in neither the queue nor the history for a
	// moment (HTCondor's schedd moves it between them): ask until it shows.
	var jobs map[string]string
	require.Eventually(t, func() bool { jobs = sys.jobs(t, key); return len(jobs) > 0 }, 30*time.Second, 500*time.Millisecond,
		"the cancelled job is in neither the queue nor the history")
	require.Len(t, jobs, 1, "one job, never a second")
	for id := range jobs {
		assert.Equal(t, id, r.summary["id"])
		var st string
		assert.Eventually(t, func() bool {
			st = sys.jobs(t, key)[id]
			return sys.wasCancelled(st)
		}, 30*time.Second, 250*time.Millisecond, "job %s is %s on %s", id, st, sys.backend)
	}
}

// httpThroughProxy is the proxied resourceURL of an HTTP API at base.
func httpThroughProxy(t *testing.T, base, creds string) (target string, proxied func(*testing.T, string) (string, string)) {
	u, err := url.Parse(base)
	require.NoError(t, err)
	return u.Host, func(t *testing.T, addr string) (string, string) {
		p := *u
		p.Host = addr
		return p.String(), creds
	}
}

// sshThroughProxy is a copy of srv's credentials whose known_hosts line
// names the proxy's port, as a login node behind a port forward would be
// known, and the resourceURL through the proxy at addr.
func sshThroughProxy(t *testing.T, srv testssh.Server, addr string) (resourceURL, creds string) {
	creds = t.TempDir()
	_, port, _ := strings.Cut(srv.Addr, ":")
	_, pport, _ := strings.Cut(addr, ":")
	for _, name := range []string{"ssh-privatekey", "known_hosts"} {
		b, err := os.ReadFile(filepath.Join(srv.CredsDir, name))
		require.NoError(t, err)
		if name == "known_hosts" {
			b = []byte(strings.Replace(string(b), "]:"+port+" ", "]:"+pport+" ", 1))
		}
		require.NoError(t, os.WriteFile(filepath.Join(creds, name), b, 0o600))
	}
	return strings.Replace(srv.URL, srv.Addr, addr, 1), creds
}

// rayLostJobSystem is the real Ray, its job API behind the fault proxy.
func rayLostJobSystem(t *testing.T) lostJobSystem {
	base, creds := rayURL(t)
	target, proxied := httpThroughProxy(t, base, creds)
	return lostJobSystem{backend: "ray", server: "Ray's job API", target: target,
		script: "import time\ntime.sleep(300)\n", proxied: proxied,
		jobs:         func(t *testing.T, key string) map[string]string { return rayJobStates(t, base, creds, key) },
		alive:        func(st string) bool { return st == "PENDING" || st == "RUNNING" },
		wasCancelled: func(st string) bool { return st == "STOPPED" }}
}

// condorLostJobSystem is the real HTCondor pool, the sshd of its login node
// behind the fault proxy.
func condorLostJobSystem(t *testing.T) lostJobSystem {
	srv := testssh.Condor(t)
	return lostJobSystem{backend: htcondor.Name, server: "the login node's sshd", target: srv.Addr,
		script:  "#!/bin/sh\nsleep 300\n",
		proxied: func(t *testing.T, addr string) (string, string) { return sshThroughProxy(t, srv, addr) },
		jobs:    func(t *testing.T, key string) map[string]string { return condorJobStates(t, srv, key) },
		// JobStatus: 1 Idle, 2 Running, 3 Removed.
		alive:        func(st string) bool { return st == "1" || st == "2" },
		wasCancelled: func(st string) bool { return st == "3" }}
}

// TestRayCleanupIntentUnreachable: testCleanupIntentUnreachable on the real
// Ray, its job API taken away by the proxy.
func TestRayCleanupIntentUnreachable(t *testing.T) {
	clearEnv(t)
	testCleanupIntentUnreachable(t, rayLostJobSystem(t))
}

// TestHTCondorCleanupIntentUnreachable: testCleanupIntentUnreachable on the
// real HTCondor pool, the sshd of its login node taken away by the proxy.
func TestHTCondorCleanupIntentUnreachable(t *testing.T) {
	clearEnv(t)
	testCleanupIntentUnreachable(t, condorLostJobSystem(t))
}

// condorJobStates maps the id (CLUSTER.PROC) of each job in the pool's
// queue or history whose BridgeRunnerKey is key to its JobStatus, asked
// on the login node directly.
func condorJobStates(t *testing.T, srv testssh.Server, key string) map[string]string {
	t.Helper()
	target, err := sshexec.ParseURL(srv.URL)
	require.NoError(t, err)
	c := sshexec.New(target, testssh.Creds(t, srv.CredsDir), nil, sshexec.Options{})
	defer c.Close()
	out := map[string]string{}
	for _, q := range []string{"condor_history", "condor_q"} { // the queue's word, if both know the job
		res, err := c.Run(context.Background(), sshexec.Cmd{Args: []string{q, "-af", "ClusterId", "ProcId", "JobStatus",
			"-constraint", `BridgeRunnerKey == "` + key + `"`}})
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode, string(res.Stderr))
		for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
			if f := strings.Fields(line); len(f) == 3 {
				out[f[0]+"."+f[1]] = f[2]
			}
		}
	}
	return out
}
