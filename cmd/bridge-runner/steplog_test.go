package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

// lastLineScript prints lines until its very last instant: its last line
// is written as the job ends, so that a read of its output made only after
// the state line came too late for it.
const lastLineScript = "#!/bin/bash\nfor i in $(seq 1 15); do echo \"out $i\"; sleep 0.2; done\necho \"out last\"\n"

// assertOutputBeforeEnd checks that the job's every line came, in order,
// before the line that said its final state.
func assertOutputBeforeEnd(t *testing.T, out, final string) {
	t.Helper()
	end := strings.LastIndex(out, `msg="job state"`)
	require.Positive(t, end, out)
	require.Contains(t, out[end:], "state="+final, out)
	at := strings.Index(out, "out 1\n")
	for _, line := range []string{"out 5\n", "out 15\n", "out last\n"} {
		i := strings.Index(out, line)
		require.GreaterOrEqual(t, i, 0, "%q is in the step's log:\n%s", line, out)
		assert.Greater(t, i, at, "%q in order", line)
		at = i
	}
	assert.Less(t, at, end, "the job's last output comes before its final state's line:\n%s", out)
}

// TestLastOutputBeforeTheFinalState: on the local backend and on the real
// Slurm over SSH (the login node's tail of the output file), the last
// lines of a job that prints to its end are in the step's log before the
// line of its final state. Before, they came after it: the output was
// read once more only after the state line was written. Polls every
// second and reads of the output every 30 s make the end's read the one
// that matters, whatever the machine's pace.
func TestLastOutputBeforeTheFinalState(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		clearEnv(t)
		code, out := runBinary(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "order", "--backend", "local",
			"--script", lastLineScript, "--update-interval", "1", "--log-interval", "30s")
		require.Equal(t, 0, code, out)
		assertOutputBeforeEnd(t, out, "DONE")
	})
	t.Run("slurm-ssh", func(t *testing.T) {
		clearEnv(t)
		srv := testssh.Default(t)
		code, out := runBinary(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "order-ssh", "--backend", "slurm",
			"--resource-url", srv.URL, "--credentials-dir", srv.CredsDir, "--script", lastLineScript,
			"--update-interval", "1", "--log-interval", "30s")
		require.Equal(t, 0, code, out)
		assertOutputBeforeEnd(t, out, "DONE")
	})
}

// TestSlurmArrayTasksInTheStepLog: an array on the real Slurm (22.05,
// 24.11; this test's own jobs) says its tasks by state in the step's log
// as they change, and the final count, every task done, before the line
// of the array's end.
func TestSlurmArrayTasksInTheStepLog(t *testing.T) {
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) {
			clearEnv(t)
			code, out := runBinary(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "array-tasks", "--backend", "slurm",
				"--resource-url", c.url, "--credentials-dir", c.creds, "--script", "#!/bin/sh\nsleep 2\n",
				"--array", "0-3%2", "--update-interval", "1")
			require.Equal(t, 0, code, out)
			var said []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, `msg="array tasks"`) {
					said = append(said, l)
				}
			}
			require.GreaterOrEqual(t, len(said), 2, "the tasks are said as they change:\n%s", out)
			assert.Contains(t, said[len(said)-1], `tasks="4 done" of=4`, out)
			assert.NotContains(t, said[0], `tasks="4 done"`, "the first count is said before the end:\n%s", out)
			assert.Less(t, strings.LastIndex(out, `msg="array tasks"`), strings.LastIndex(out, `msg="job state"`),
				"the final count before the final state's line:\n%s", out)
		})
	}
}
