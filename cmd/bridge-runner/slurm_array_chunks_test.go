package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// chunkIndexScript fails (exit 9) in a task whose SLURM_ARRAY_TASK_ID is
// not its BRIDGE_TASK_INDEX, and exits 3 in task 1002 alone: a chunk that
// ran its tasks under the chunk's own indexes (0, 1, ...) would fail
// other tasks, or none.
const chunkIndexScript = "#!/bin/sh\n[ \"$SLURM_ARRAY_TASK_ID\" = \"$BRIDGE_TASK_INDEX\" ] || exit 9\n[ \"$BRIDGE_TASK_INDEX\" = 1002 ] && exit 3\nexit 0\n"

// TestSlurmArrayPastMaxArraySize runs an array whose indexes cross the
// real clusters' MaxArraySize (1001, the default: 22.05 and 24.11 do not
// say it over REST, 26.05 does in GET conf): it runs as two native arrays
// under one record, each task sees the index the user gave, and the step
// reports one set of counts. On main it was refused with exit 2.
func TestSlurmArrayPastMaxArraySize(t *testing.T) {
	clearEnv(t)
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) {
			t.Parallel()
			state := t.TempDir()
			cmd := exec.Command(binary, "invoke", "--state-dir", state, "--job-name", "array-limit", "--backend", "slurm",
				"--resource-url", c.url, "--credentials-dir", c.creds, "--script", chunkIndexScript,
				"--array", "0,1000-1002", "--update-interval", "1")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.Equal(t, 1, exitOf(cmd.Run()), "one task fails: exit 1: %s", out.String())
			sum := summary(t, out.String())
			assert.Equal(t, "DONE=3 FAILED=1", sum["arrayCounts"], out.String())
			assert.Equal(t, "1002", sum["arrayFailed"], "the failed task by the user's index: %s", out.String())
			rec, err := record.NewFileStore(state, "array-limit").Get(context.Background())
			require.NoError(t, err)
			lines := strings.Split(rec.Data[record.KeyArrayChunks], "\n")
			require.Len(t, lines, 3, rec.Data[record.KeyArrayChunks])
			assert.Equal(t, "size 1001", lines[0])
			assert.True(t, strings.HasPrefix(lines[1], "0,1000 "), lines[1])
			assert.True(t, strings.HasPrefix(lines[2], "1001-1002 "), lines[2])
		})
	}
}

// TestSlurmArrayChunkCrashesSubmitOnce kills invoke with SIGKILL at each
// named point, those between chunks included, while it runs an array of
// three chunks (0-5/2) on the real Slurm 22.05, then restarts it: the
// restart ends DONE=6, and slurmctld knows exactly one array of two tasks
// per chunk key, the one the record lists.
func TestSlurmArrayChunkCrashesSubmitOnce(t *testing.T) {
	clearEnv(t)
	c := slurmClusters(t)[0]
	require.Equal(t, "22.05", c.release)
	for _, point := range append(append([]string{}, runner.ChunkCrashPoints...), runner.CrashPoints...) {
		t.Run(point, func(t *testing.T) {
			state := t.TempDir()
			args := []string{"--state-dir", state, "--job-name", "chunk-crash", "--backend", "slurm", "--resource-url", c.url,
				"--credentials-dir", c.creds, "--script", "#!/bin/sh\nsleep 1\n", "--array", "0-5/2",
				"--update-interval", "1", "--submit-lease", "3s"}
			cmd, out := startInvoke(t, []string{"BRIDGE_CRASH_AT=" + point}, args...)
			err := cmd.Wait()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL,
				"invoke must die at %s: %s", point, out)
			again := exec.Command(binary, append([]string{"invoke"}, args...)...)
			var out2 bytes.Buffer
			again.Stdout, again.Stderr = &out2, &out2
			require.Equal(t, 0, exitOf(again.Run()), "after a crash at %s: %s", point, out2.String())
			assert.Equal(t, "DONE=6", summary(t, out2.String())["arrayCounts"], out2.String())
			rec, err := record.NewFileStore(state, "chunk-crash").Get(context.Background())
			require.NoError(t, err)
			lines := strings.Split(rec.Data[record.KeyArrayChunks], "\n")
			require.Len(t, lines, 4, "size and three chunks: %q", rec.Data[record.KeyArrayChunks])
			for k, line := range lines[1:] {
				_, id, _ := strings.Cut(line, " ")
				arrays := slurmArraysByComment(t, c, runner.ChunkKey(rec.Data[record.KeyKey], k))
				assert.Equal(t, map[string]int{id: 2}, arrays, "crash at %s: chunk %d is one array of 2 tasks, the one recorded", point, k)
			}
		})
	}
}

// TestSSHSlurmArrayPastMaxArraySize: over SSH the limit is scontrol show
// config's MaxArraySize (1001 on the suite's 22.05): the array crossing
// it runs as two native arrays, each task with the user's index.
func TestSSHSlurmArrayPastMaxArraySize(t *testing.T) {
	clearEnv(t)
	srv := testssh.Default(t)
	state := t.TempDir()
	code, text := runBinary(t, "invoke", "--state-dir", state, "--job-name", "ssh-array-limit", "--backend", "slurm",
		"--resource-url", srv.URL, "--credentials-dir", srv.CredsDir, "--script", chunkIndexScript,
		"--array", "0,1000-1002", "--update-interval", "1")
	require.Equal(t, 1, code, "one task fails: exit 1: %s", text)
	sum := summary(t, text)
	assert.Equal(t, "DONE=3 FAILED=1", sum["arrayCounts"], text)
	assert.Equal(t, "1002", sum["arrayFailed"], text)
	rec, err := record.NewFileStore(state, "ssh-array-limit").Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(rec.Data[record.KeyArrayChunks], "\n"), "size and two chunks: %q", rec.Data[record.KeyArrayChunks])
	assert.True(t, strings.HasPrefix(rec.Data[record.KeyArrayChunks], "size 1001\n"), rec.Data[record.KeyArrayChunks])
}
