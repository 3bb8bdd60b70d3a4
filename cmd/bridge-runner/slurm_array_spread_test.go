package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// spreadScript fails (exit 9) in a task whose SLURM_ARRAY_TASK_ID is not
// its BRIDGE_TASK_INDEX (a share run under its chunk's own indexes) and
// exits 3 in task 7 alone: the merged counts show both.
const spreadScript = "#!/bin/sh\n[ \"$SLURM_ARRAY_TASK_ID\" = \"$BRIDGE_TASK_INDEX\" ] || exit 9\n[ \"$BRIDGE_TASK_INDEX\" = 7 ] && exit 3\nsleep 1\n"

// TestSlurmArraySpreadOverTwoClusters spreads an array of 20 tasks over
// the suite's real Slurm 22.05 and 24.11 (placement: spread): one record,
// one set of counts, and every task run exactly once: each chunk the
// record lists is one native array on its own cluster, of as many tasks
// as its indexes, and no other cluster has an array with its key. The
// clusters are shared with other tests, so the shares are not asserted,
// only that both clusters got tasks when both had enough free CPUs when
// probed to earn one.
func TestSlurmArraySpreadOverTwoClusters(t *testing.T) {
	clearEnv(t)
	old, young := twoSlurms(t)
	state := t.TempDir()
	code, text := runBinary(t, "invoke", "--state-dir", state, "--job-name", "spread", "--backend", "slurm",
		"--targets", twoTargets(old, young), "--placement", "spread", "--array", "0-19",
		"--job-properties", `{"partition":"debug","time_limit":5}`, "--script", spreadScript, "--update-interval", "1", "--watcher=false")
	require.Equal(t, 1, code, "task 7 fails: exit 1: %s", text)
	sum := summary(t, text)
	assert.Equal(t, "DONE=19 FAILED=1", sum["arrayCounts"], text)
	assert.Equal(t, "7", sum["arrayFailed"], text)

	rec, err := record.NewFileStore(state, "spread").Get(context.Background())
	require.NoError(t, err)
	p, err := record.ParsePlaced(rec.Data[record.KeyPlacement])
	require.NoError(t, err)
	require.NotNil(t, p)
	t.Logf("placement: %s\nchunks: %s", rec.Data[record.KeyPlacement], rec.Data[record.KeyArrayChunks])
	// Each target's exact share, 20 × its free CPUs over both's: at least
	// one task each when both are 1 or more (each task asks one CPU).
	if free := freeAtProbe(p); 20*free["old"] >= free["old"]+free["young"] && 20*free["young"] >= free["old"]+free["young"] && free["old"] > 0 {
		require.Len(t, p.Shares, 2, "both clusters had free CPUs when probed: both get tasks")
		assert.Equal(t, "old,young", sum["target"], "the outputs name both targets")
	}

	assertSpreadOnce(t, rec, p, map[string]slurmCluster{"old": old, "young": young}, 20)
}

// assertSpreadOnce: each chunk the record lists (or the one array of a
// job that went to one target alone, unsplit) is one native array on its own
// cluster, of as many tasks as its indexes, and no other cluster has an
// array with its key; the chunks hold every task.
func assertSpreadOnce(t *testing.T, rec *record.Record, p *record.Placed, clusters map[string]slurmCluster, total int) {
	t.Helper()
	lines := strings.Split(rec.Data[record.KeyArrayChunks], "\n")[1:]
	if rec.Data[record.KeyArrayChunks] == "" {
		lines = []string{"0-" + strconv.Itoa(total-1) + " " + rec.Data[record.KeyID]}
	}
	tasks := 0
	for k, line := range lines {
		idx, id, _ := strings.Cut(line, " ")
		target, raw, ok := strings.Cut(id, ":")
		if !ok {
			target, raw = p.Target, id
		}
		part, err := backends.ParseArray(idx)
		require.NoError(t, err, line)
		tasks += part.Count()
		key := runner.ChunkKey(rec.Data[record.KeyKey], k)
		if rec.Data[record.KeyArrayChunks] == "" {
			key = rec.Data[record.KeyKey]
		}
		for name, c := range clusters {
			want := map[string]int{}
			if name == target {
				want[raw] = part.Count()
			}
			assert.Equal(t, want, slurmArraysByComment(t, c, key), "chunk %d (%s) on %s", k, line, name)
		}
	}
	assert.Equal(t, total, tasks, "the chunks cover the array")
}

// freeAtProbe is each target's free CPUs as the placement recorded them.
func freeAtProbe(p *record.Placed) map[string]int {
	out := map[string]int{}
	for _, pr := range p.Probes {
		if pr.FreeCPUs != nil {
			out[pr.Target] = *pr.FreeCPUs
		}
	}
	return out
}

// TestSlurmArraySpreadCrashesSubmitOnce kills invoke with SIGKILL between
// chunks of an array spread over the real 22.05 and 24.11 (each share
// split in chunks of 4, so that the points fire whatever the shares),
// then restarts it: the restart ends DONE=12 and every chunk is one
// native array on its own cluster, none doubled, none lost.
func TestSlurmArraySpreadCrashesSubmitOnce(t *testing.T) {
	clearEnv(t)
	old, young := twoSlurms(t)
	for _, point := range runner.ChunkCrashPoints {
		t.Run(point, func(t *testing.T) {
			state := t.TempDir()
			args := []string{"--state-dir", state, "--job-name", "spread-crash", "--backend", "slurm",
				"--targets", twoTargets(old, young), "--placement", "spread", "--array", "0-11/4",
				"--job-properties", `{"partition":"debug","time_limit":5}`, "--script", "#!/bin/sh\nsleep 1\n",
				"--update-interval", "1", "--submit-lease", "3s", "--watcher=false"}
			cmd, out := startInvoke(t, []string{"BRIDGE_CRASH_AT=" + point}, args...)
			err := cmd.Wait()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL,
				"invoke must die at %s: %s", point, out)
			code, text := runBinary(t, append([]string{"invoke"}, args...)...)
			require.Equal(t, 0, code, "after a crash at %s: %s", point, text)
			assert.Equal(t, "DONE=12", summary(t, text)["arrayCounts"], text)
			rec, err := record.NewFileStore(state, "spread-crash").Get(context.Background())
			require.NoError(t, err)
			p, err := record.ParsePlaced(rec.Data[record.KeyPlacement])
			require.NoError(t, err)
			require.NotNil(t, p)
			t.Logf("chunks: %s", rec.Data[record.KeyArrayChunks])
			assertSpreadOnce(t, rec, p, map[string]slurmCluster{"old": old, "young": young}, 12)
		})
	}
}

// TestSlurmArraySpreadTaskLogs spreads taskScript's array over two real
// Slurms with S3, over REST (22.05 and 24.11: each task ships its own log
// from its node) and over SSH (22.05's login node and 24.11's: invoke
// reads each task's output on the cluster that ran it, routed by its
// chunk's "target:id" as Status and Cancel are). Every task's log reaches
// tasks/<index>.log with its own lines, whichever cluster ran it, job.log
// lists each task's object (none "-"), and --log-task 4 (the last share's)
// is the step's live log. Before, over SSH, the tasks on the second
// cluster had no log and job.log said "-" for them.
func TestSlurmArraySpreadTaskLogs(t *testing.T) {
	t.Run("rest", func(t *testing.T) {
		old, young := twoSlurms(t)
		spreadTaskLogs(t, twoTargets(old, young))
	})
	t.Run("ssh", func(t *testing.T) {
		old := testssh.Default(t)
		young := testssh.Env(t, "BRIDGE_TEST_SLURM2411DBD_SSH", "hack/slurm2411dbd-up.sh starts its login node")
		spreadTaskLogs(t, fmt.Sprintf(`[{"name":"old","backend":"slurm","resourceURL":%q,"credentials":%q},{"name":"young","backend":"slurm","resourceURL":%q,"credentials":%q}]`,
			old.URL, old.CredsDir, young.URL, young.CredsDir))
	})
}

// spreadTaskLogs runs the array 0-4 of taskScript(3) spread over targets
// and checks every task's log and job.log.
func spreadTaskLogs(t *testing.T, targets string) {
	clearEnv(t)
	bucket := tests3.Bucket(t, "logs")
	endpoint, _, _, s3Creds := tests3.Env(t)
	state := t.TempDir()
	code, text := runBinary(t, "invoke", "--state-dir", state, "--job-name", "spread-logs", "--backend", "slurm",
		"--targets", targets, "--placement", "spread", "--array", "0-4", "--log-task", "4",
		"--job-properties", `{"partition":"debug","time_limit":5}`, "--script", taskScript(3),
		"--s3-credentials-dir", s3Creds, "--s3-endpoint", endpoint, "--s3-secure", "false", "--s3-upload-bucket", bucket,
		"--update-interval", "2", "--log-interval", "1s", "--watcher=false")
	require.Equal(t, 1, code, "task 3 fails: exit 1: %s", text)
	rec, err := record.NewFileStore(state, "spread-logs").Get(context.Background())
	require.NoError(t, err)
	t.Logf("placement: %s\nchunks: %s", rec.Data[record.KeyPlacement], rec.Data[record.KeyArrayChunks])
	p, err := record.ParsePlaced(rec.Data[record.KeyPlacement])
	require.NoError(t, err)
	require.NotNil(t, p)
	if free := freeAtProbe(p); free["old"] >= 1 && free["young"] >= 1 && 5*free["old"] >= free["old"]+free["young"] && 5*free["young"] >= free["old"]+free["young"] {
		require.Len(t, p.Shares, 2, "both clusters had free CPUs when probed: both get tasks")
	}
	tasks := runner.RunPrefix("spread-logs", rec.Data[record.KeyKey], "") + "tasks/"
	for i := 0; i <= 4; i++ {
		got := readObject(t, bucket, tasks+strconv.Itoa(i)+".log")
		for n := 1; n <= 3; n++ {
			assert.Contains(t, got, fmt.Sprintf("task %d out %d\n", i, n), "task %d's log", i)
			assert.Contains(t, got, fmt.Sprintf("task %d err %d\n", i, n), "task %d's log", i)
		}
		assert.Equal(t, 6, strings.Count(got, "task "), "task %d's log holds its own lines only: %q", i, got)
	}
	outputs := strings.Split(rec.Data[record.KeyOutputs], "\n")
	require.Len(t, outputs, 1, "job.log is the array's output")
	jobLog := readObject(t, bucket, strings.TrimPrefix(outputs[0], "s3://"+bucket+"/"))
	for i := 0; i <= 4; i++ {
		assert.Contains(t, jobLog, fmt.Sprintf("\ts3://%s/%s%d.log\n", bucket, tasks, i), "job.log lists task %d's object:\n%s", i, jobLog)
	}
	for n := 1; n <= 3; n++ {
		assert.Equal(t, 1, strings.Count(text, fmt.Sprintf("task 4 out %d\n", n)), "--log-task 4: task 4's output, once, in the step's log:\n%s", text)
	}
	assert.NotContains(t, text, "task 0 out", "one task's output in the step's log")
}
