package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// TestSSHRetryBudgetIsACeiling: issue 37. The network to the login node
// goes silent while invoke follows a Slurm job over SSH: --retry-budget 30s
// ends it (75) within a few seconds of 30 s after the first unanswered
// request: 30.2 s, where the old code took 35.2 s (65-80 s for a 60 s
// budget in the outside runs).
func TestSSHRetryBudgetIsACeiling(t *testing.T) {
	clearEnv(t)
	srv := testssh.Default(t)
	px := testutil.NewProxy(t, srv.Addr)
	resourceURL, creds := sshThroughProxy(t, srv, px.Addr)
	state, job := t.TempDir(), "ssh-budget"
	const budget = 30 * time.Second
	cmd, buf := startInvoke(t, nil, "--state-dir", state, "--job-name", job, "--backend", "slurm",
		"--resource-url", resourceURL, "--credentials-dir", creds, "--retry-budget", budget.String(),
		"--script", "#!/bin/sh\necho started\nsleep 300\n", "--update-interval", "1")
	t.Cleanup(func() { // the job outlives an invoke that gave up
		px.Set(t, testutil.Pass)
		r := run(t, "cleanup", "--state-dir", state, "--job-name", job, "--credentials-dir", creds, "--wait", "0s")
		assert.Equal(t, 0, r.code, r.stderr)
	})
	waitForStatus(t, state, job, "RUNNING")
	px.Set(t, testutil.Blackhole)
	start := time.Now()
	done := make(chan int, 1)
	go func() { done <- exitOf(cmd.Wait()) }()
	select {
	case code := <-done:
		took := time.Since(start)
		t.Logf("SSH partition, --retry-budget %s: exit %d after %s", budget, code, took.Round(time.Millisecond))
		assert.Equal(t, ExitTempFail, code, buf.String())
		// The first unanswered request may go out up to one poll (1 s) after
		// the partition began.
		assert.Less(t, took, budget+4*time.Second, "the budget is a ceiling")
	case <-time.After(budget + time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("invoke still runs a minute past its budget:\n%s", buf.String())
	}
}
