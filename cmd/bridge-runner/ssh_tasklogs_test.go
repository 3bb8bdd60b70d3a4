package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestSSHBackendsArrayTaskLogsInS3: over SSH (Slurm, both HTCondors),
// invoke itself reads each task's output file on the cluster and uploads
// it to tasks/<index>.log under the step's prefix (its standard error
// too, which HTCondor keeps in a file of its own), named by the user's
// index (Slurm's 0-4/2 runs as three chunks), and job.log lists every task
// with its object, as over REST. --log-task 2 (Slurm's second chunk's task
// 0) streams task 2's lines while the array runs, and only those.
func TestSSHBackendsArrayTaskLogsInS3(t *testing.T) {
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) {
			clearEnv(t)
			srv := sys.srv(t)
			bucket := tests3.Bucket(t, "logs")
			name := "ssh-task-logs"
			// HTCondor does not split arrays, and writes a task's standard
			// error to a file of its own (task-N.err): its lines come in
			// the task's object after a marker line, after the output's.
			array, chunk := "0-4", 5
			if sys.backend == "slurm" {
				array, chunk = "0-4/2", 2
			}
			out, key, outputs := runTaskArrayAt(t, sys.backend, srv.URL, srv.CredsDir, name, bucket, array, "--log-task", "2")
			tasks := runner.RunPrefix(name, key, "") + "tasks/"
			assertTaskLogs(t, bucket, tasks, outputs, chunk, true)
			if sys.backend == "htcondor" {
				got := readObject(t, bucket, tasks+"1.log")
				assert.Regexp(t, `(?s)^task 1 out 1\n.*task 1 out 3\n--- standard error ---\ntask 1 err 1\n.*task 1 err 3\n$`, got, "task 1's output, then its standard error")
			}
			for n := 1; n <= 3; n++ {
				assert.Equal(t, 1, strings.Count(out, fmt.Sprintf("task 2 out %d\n", n)), "task 2's output, once:\n%s", out)
			}
			for _, other := range []string{"task 0 ", "task 1 ", "task 3 ", "task 4 "} {
				assert.NotContains(t, out, other, "only task 2's output:\n%s", out)
			}
			require.Contains(t, out, "task 2 out 1\n", out)
			assert.Less(t, strings.Index(out, "task 2 out 1\n"), strings.Index(out, "state=FAILED"), "read before the end was said:\n%s", out)
		})
	}
}
