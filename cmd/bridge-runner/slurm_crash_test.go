package main

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// slurmJobsWithComment counts the jobs slurmctld knows whose comment is key:
// the check that a crash never made a second job.
func slurmJobsWithComment(t *testing.T, c slurmCluster, key string) int {
	t.Helper()
	return len(slurmJobsByComment(t, c, key))
}

func slurmCrashRuns() int {
	if n, err := strconv.Atoi(os.Getenv("BRIDGE_TEST_SLURM_CRASH_RUNS")); err == nil && n >= 0 {
		return n
	}
	return 30
}

// TestSlurmCrashesSubmitOnce kills invoke with SIGKILL at each named point
// of the exactly-once protocol and at random moments, on the real Slurm,
// then restarts it: the restart ends DONE and slurmctld knows exactly one
// job carrying the run's key. The first cluster (22.05) gets all the random
// moments, the others a few: the protocol is the same, the wire differs.
func TestSlurmCrashesSubmitOnce(t *testing.T) {
	t.Parallel() // waits on real jobs; every run has its own --state-dir and key
	for i, c := range slurmClusters(t) {
		random := slurmCrashRuns()
		if i > 0 {
			random = min(random, 5)
		}
		t.Run(c.release, func(t *testing.T) { t.Parallel(); testSlurmCrashes(t, c, random) })
	}
}

func testSlurmCrashes(t *testing.T, c slurmCluster, random int) {
	slurmURL, creds := c.url, c.creds
	type run struct {
		point string
		delay time.Duration
	}
	var runs []run
	for _, p := range runner.CrashPoints {
		runs = append(runs, run{point: p})
	}
	for i := 0; i < random; i++ {
		runs = append(runs, run{delay: time.Duration(rand.IntN(1500)) * time.Millisecond})
	}
	for i, r := range runs {
		state := t.TempDir()
		// A named point needs the job to be seen RUNNING ("following"): give
		// it time enough to be, even on a loaded machine.
		script := "#!/bin/sh\nsleep 0.5\n"
		if r.point != "" {
			script = "#!/bin/sh\nsleep 3\n"
		}
		args := []string{"--state-dir", state, "--job-name", "crash", "--backend", "slurm", "--resource-url", slurmURL,
			"--credentials-dir", creds, "--script", script, "--update-interval", "1", "--submit-lease", "3s"}
		var env []string
		if r.point != "" {
			env = []string{"BRIDGE_CRASH_AT=" + r.point}
		}
		cmd, out := startInvoke(t, env, args...)
		if r.point == "" {
			time.Sleep(r.delay)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		if r.point != "" {
			require.True(t, errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL,
				"run %d: invoke must die at %s: %s", i, r.point, out)
		}
		again := exec.Command(binary, append([]string{"invoke"}, args...)...)
		var out2 bytes.Buffer
		again.Stdout, again.Stderr = &out2, &out2
		require.Equal(t, 0, exitOf(again.Run()), "run %d (%+v): %s", i, r, out2.String())
		rec, err := record.NewFileStore(state, "crash").Get(context.Background())
		require.NoError(t, err)
		key := rec.Data[record.KeyKey]
		require.NotEmpty(t, key)
		assert.Equal(t, 1, slurmJobsWithComment(t, c, key), "run %d (%+v): one Slurm job for the run", i, r)
	}
	t.Logf("%d SIGKILLs of invoke on the real Slurm (%d at named points, the rest at random moments): one Slurm job each time", len(runs), len(runner.CrashPoints))
}
