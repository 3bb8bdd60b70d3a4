package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// arraysWithKeyCmds print, on the login node, "<array id> <key>" for each
// job (an array's task, queued or ended) of each system: HTCondor's
// cluster, Slurm's array job id (%F).
var arraysWithKeyCmds = map[string][][]string{
	htcondor.Name: {
		{"condor_q", "-af", "ClusterId", "BridgeRunnerKey", "-constraint", `BridgeRunnerKey == "KEY"`},
		{"condor_history", "-af", "ClusterId", "BridgeRunnerKey", "-constraint", `BridgeRunnerKey == "KEY"`}},
	"slurm": {{"squeue", "--noheader", "--me", "--states=all", "--format=%F %k"}},
}

// arraysWithKey is the set of array ids whose tasks carry key.
func arraysWithKey(t *testing.T, backend string, srv testssh.Server, key string) map[string]bool {
	t.Helper()
	target, err := sshexec.ParseURL(srv.URL)
	require.NoError(t, err)
	c := sshexec.New(target, testssh.Creds(t, srv.CredsDir), nil, sshexec.Options{})
	defer c.Close()
	ids := map[string]bool{}
	for _, cmd := range arraysWithKeyCmds[backend] {
		args := make([]string, len(cmd))
		for i, a := range cmd {
			args[i] = strings.ReplaceAll(a, "KEY", key)
		}
		res, err := c.Run(context.Background(), sshexec.Cmd{Args: args})
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode, string(res.Stderr))
		for _, line := range strings.Split(string(res.Stdout), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == key {
				ids[f[0]] = true
			}
		}
	}
	return ids
}

// TestSSHBackendsArrayCrashesSubmitOnce kills invoke at each named point of
// the exactly-once protocol while it runs an array of 3 tasks on the real
// HTCondor pool and the real Slurm over SSH, and restarts it: the restart
// adopts the array (after-submit: found by its key) and ends DONE=3, and
// the system knows exactly one array carrying the run's key, the one
// recorded.
func TestSSHBackendsArrayCrashesSubmitOnce(t *testing.T) {
	t.Parallel() // waits on real jobs; every run has its own --state-dir and key
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) {
			t.Parallel()
			srv := sys.srv(t)
			for _, point := range runner.CrashPoints {
				state := t.TempDir()
				args := []string{"--state-dir", state, "--job-name", "ssh-array-crash", "--backend", sys.backend, "--resource-url", srv.URL,
					"--credentials-dir", srv.CredsDir, "--script", "#!/bin/sh\nsleep 2\n", "--array", "0-2",
					"--update-interval", "1", "--submit-lease", "3s"}
				cmd, out := startInvoke(t, []string{"BRIDGE_CRASH_AT=" + point}, args...)
				require.Equal(t, -1, exitOf(cmd.Wait()), "invoke must die at %s: %s", point, out)
				code, text := runBinary(t, append([]string{"invoke"}, args...)...)
				require.Equal(t, 0, code, "after a crash at %s: %s", point, text)
				assert.Equal(t, "DONE=3", summary(t, text)["arrayCounts"], text)
				rec, err := record.NewFileStore(state, "ssh-array-crash").Get(context.Background())
				require.NoError(t, err)
				assert.Equal(t, map[string]bool{rec.Data[record.KeyID]: true}, arraysWithKey(t, sys.backend, srv, rec.Data[record.KeyKey]),
					"crash at %s: one array for the run, the one recorded", point)
			}
		})
	}
}
