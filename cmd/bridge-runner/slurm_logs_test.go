package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// printingScript prints a numbered line every second, n times.
func printingScript(n int) string {
	return "#!/bin/bash\nfor i in $(seq 1 " + strconv.Itoa(n) + "); do echo \"slurm line $i\"; sleep 1; done\n"
}

// assertStreamed checks that every line reached invoke's stderr once and in
// order, and that the first one was there before invoke saw the job end
// (so it was read while the job ran, not only at the end).
func assertStreamed(t *testing.T, out string, n int) {
	t.Helper()
	last := -1
	for i := 1; i <= n; i++ {
		line := "slurm line " + strconv.Itoa(i) + "\n"
		assert.Equal(t, 1, strings.Count(out, line), "%q once in the step's log:\n%s", line, out)
		at := strings.Index(out, line)
		assert.Greater(t, at, last, "in order")
		last = at
	}
	end := strings.Index(out, "state=DONE")
	require.Positive(t, end, out)
	assert.Less(t, strings.Index(out, "slurm line 1\n"), end, "the output was streamed while the job ran:\n%s", out)
}

// sharedLogDir is a folder under the host's /tmp that the job's user
// (another user) may write its output into, removed after the test.
func sharedLogDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "bridge-logs-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	return dir
}

// TestSlurmLogsFromSharedFile: the job writes its output where the pod sees
// it (here the real Slurm runs on this machine, so its /tmp is shared);
// --log-dir says where, and invoke streams the file to its stderr.
func TestSlurmLogsFromSharedFile(t *testing.T) {
	clearEnv(t)
	url, creds := slurmEnv(t)
	dir := sharedLogDir(t)
	code, out := runBinary(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "slurm-file-logs", "--backend", "slurm",
		"--resource-url", url, "--credentials-dir", creds, "--script", printingScript(6),
		"--job-properties", `{"standard_output":"`+dir+`/%j.out"}`, "--update-interval", "5",
		"--log-interval", "500ms", "--log-dir", dir)
	require.Equal(t, 0, code, out)
	assertStreamed(t, out, 6)
}

// TestSlurmLogsThroughS3Shipper: no shared file system; the job ships its
// output to a presigned URL while it runs, and invoke reads the object with
// ranged GETs. No S3 key reaches the job (only the URL, in its environment).
func TestSlurmLogsThroughS3Shipper(t *testing.T) {
	clearEnv(t)
	url, slurmCreds := slurmEnv(t)
	endpoint, access, secret, s3Creds := tests3.Env(t)
	bucket := tests3.Bucket(t, "logs")
	state := t.TempDir()
	code, out := runBinary(t, "invoke", "--state-dir", state, "--job-name", "slurm-ship", "--backend", "slurm",
		"--resource-url", url, "--credentials-dir", slurmCreds, "--s3-credentials-dir", s3Creds,
		"--script", printingScript(8)+"env | grep -c -e "+access+" -e "+secret+" -e BRIDGE_LOG_URL || true\n",
		"--s3-endpoint", endpoint, "--s3-secure", "false", "--s3-upload-bucket", bucket,
		"--update-interval", "5", "--log-interval", "1s")
	require.Equal(t, 0, code, out)
	assertStreamed(t, out, 8)
	assert.Contains(t, out, "\n0\n", "neither S3 keys nor the URL are in the job's environment")
	assert.NotContains(t, out, "X-Amz-Signature", "the presigned URL is a secret")

	rec, err := record.NewFileStore(state, "slurm-ship").Get(context.Background())
	require.NoError(t, err)
	o, err := tests3.Client(t).GetObject(context.Background(), bucket, runner.RunPrefix("slurm-ship", rec.Data[record.KeyKey], "")+"job.live.log", minio.GetObjectOptions{})
	require.NoError(t, err)
	live, err := io.ReadAll(o)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(live), "slurm line 1\n"), "the shipped object is the job's output: %q", live)
	assert.Equal(t, strconv.Itoa(len(live)), rec.Data[record.KeyLogOffset], "the record holds the offset")
}

// TestSlurmArrayLogsThroughS3Shipper: an array's step log is its first
// task's output, shipped while it runs (the lowest index, here 2, not 0);
// the other tasks print the same lines, which must not reach it.
func TestSlurmArrayLogsThroughS3Shipper(t *testing.T) {
	clearEnv(t)
	url, slurmCreds := slurmEnv(t)
	endpoint, _, _, s3Creds := tests3.Env(t)
	bucket := tests3.Bucket(t, "logs")
	state := t.TempDir()
	code, out := runBinary(t, "invoke", "--state-dir", state, "--job-name", "slurm-array-ship", "--backend", "slurm",
		"--resource-url", url, "--credentials-dir", slurmCreds, "--s3-credentials-dir", s3Creds,
		"--script", "#!/bin/bash\necho \"task $BRIDGE_TASK_INDEX\"\n"+strings.TrimPrefix(printingScript(6), "#!/bin/bash\n"),
		"--array", "2-4", "--s3-endpoint", endpoint, "--s3-secure", "false", "--s3-upload-bucket", bucket,
		"--update-interval", "5", "--log-interval", "1s")
	require.Equal(t, 0, code, out)
	assertStreamed(t, out, 6)
	assert.Equal(t, 1, strings.Count(out, "task 2\n"), "the first task's output:\n%s", out)
	assert.NotContains(t, out, "task 3\n", "only the first task's output:\n%s", out)
	assert.NotContains(t, out, "task 4\n", "only the first task's output:\n%s", out)
	assert.Equal(t, "DONE=3", summary(t, out)["arrayCounts"], out)
}

// TestSlurmArrayLogsFromSharedFile: with --log-dir an array's step log is
// its first task's output file, named with Slurm's array patterns (%A the
// array, %a the index, %j the task's own job id) and found while it runs,
// on 22.05 and 24.11 (whose jobs run in a root of their own: the file is
// under that root here, REMOTE_DIR:POD_DIR).
func TestSlurmArrayLogsFromSharedFile(t *testing.T) {
	clearEnv(t)
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) {
			root := c.root // 24.11's and 26.05's jobs run in their chroots
			if c.release != "22.05" {
				require.NotEmpty(t, root, "the %s cluster's env gives its _ROOT", c.release)
			}
			dir, err := os.MkdirTemp("/tmp", "bridge-logs-")
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			local := filepath.Join(root, dir)
			require.NoError(t, os.MkdirAll(local, 0o777))
			t.Cleanup(func() { os.RemoveAll(local) })
			require.NoError(t, os.Chmod(local, 0o777))
			code, out := runBinary(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "slurm-array-file-logs", "--backend", "slurm",
				"--resource-url", c.url, "--credentials-dir", c.creds,
				"--script", "#!/bin/bash\necho \"task $BRIDGE_TASK_INDEX\"\n"+strings.TrimPrefix(printingScript(6), "#!/bin/bash\n"),
				"--array", "2-4", "--job-properties", `{"standard_output":"`+dir+`/%A_%a_%j.out"}`, "--update-interval", "5",
				"--log-interval", "500ms", "--log-dir", dir+":"+local)
			require.Equal(t, 0, code, out)
			assertStreamed(t, out, 6)
			assert.Equal(t, 1, strings.Count(out, "task 2\n"), "the first task's output:\n%s", out)
			assert.NotContains(t, out, "task 3\n", "only the first task's output:\n%s", out)
			files, err := filepath.Glob(filepath.Join(local, "*_2_*.out"))
			require.NoError(t, err)
			require.Len(t, files, 1, "task 2 wrote its own file")
			assert.NotContains(t, files[0], "%", "Slurm expanded every pattern")
		})
	}
}

// taskScript prints its task's index on stdout and stderr, for a few
// seconds (so the live log is read while it runs), and fails task fail
// with exit code 3.
func taskScript(fail int) string {
	return "#!/bin/bash\nfor i in 1 2 3; do echo \"task $BRIDGE_TASK_INDEX out $i\"; echo \"task $BRIDGE_TASK_INDEX err $i\" >&2; sleep 1; done\n" +
		"[ \"$BRIDGE_TASK_INDEX\" != " + strconv.Itoa(fail) + " ] || exit 3\n"
}

// readObject is the text of bucket/key.
func readObject(t *testing.T, bucket, key string) string {
	t.Helper()
	o, err := tests3.Client(t).GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	require.NoError(t, err)
	b, err := io.ReadAll(o)
	require.NoError(t, err, "s3://%s/%s", bucket, key)
	return string(b)
}

// runTaskArray runs the array 0-4 of taskScript(3) on the real Slurm with
// the S3 log shipper and returns invoke's output, the record's attempt key
// and its output locations.
func runTaskArray(t *testing.T, name, bucket, array string, extra ...string) (string, string, []string) {
	t.Helper()
	url, slurmCreds := slurmEnv(t)
	return runTaskArrayAt(t, "slurm", url, slurmCreds, name, bucket, array, extra...)
}

// runTaskArrayAt is runTaskArray on backend's system at url (Slurm over
// REST or SSH, HTCondor).
func runTaskArrayAt(t *testing.T, backend, url, creds, name, bucket, array string, extra ...string) (string, string, []string) {
	t.Helper()
	endpoint, _, _, s3Creds := tests3.Env(t)
	state := t.TempDir()
	args := append([]string{"invoke", "--state-dir", state, "--job-name", name, "--backend", backend,
		"--resource-url", url, "--credentials-dir", creds, "--s3-credentials-dir", s3Creds,
		"--script", taskScript(3), "--array", array, "--s3-endpoint", endpoint, "--s3-secure", "false",
		"--s3-upload-bucket", bucket, "--update-interval", "5", "--log-interval", "1s"}, extra...)
	code, out := runBinary(t, args...)
	require.Equal(t, 1, code, "task 3 failed: the array FAILED\n%s", out)
	rec, err := record.NewFileStore(state, name).Get(context.Background())
	require.NoError(t, err)
	return out, rec.Data[record.KeyKey], strings.Split(rec.Data[record.KeyOutputs], "\n")
}

// TestSlurmArrayTaskLogsInS3: every task of an array ships its own output
// (stdout and stderr) to tasks/<index>.log under the step's prefix, named
// by the index the user gave even when the array runs as chunks (0-4/2:
// index 3 is the second chunk's task 1), and job.log beside the outputs
// lists every task with its chunk, state and exit code and its log. The
// step's live log is the lowest index's.
func TestSlurmArrayTaskLogsInS3(t *testing.T) {
	clearEnv(t)
	bucket := tests3.Bucket(t, "logs")
	out, key, outputs := runTaskArray(t, "slurm-task-logs", bucket, "0-4/2")
	assertTaskLogs(t, bucket, runner.RunPrefix("slurm-task-logs", key, "")+"tasks/", outputs, 2, true)
	assert.Contains(t, out, "task 0 out 1\n", "the step's live log is the lowest index's:\n%s", out)
	assert.NotContains(t, out, "task 3 out", "one task's output in the step's log:\n%s", out)
}

// assertTaskLogs checks the logs of the array 0-4 of taskScript(3), run as
// chunks of chunk tasks: each task's object under tasks holds its own
// lines (its standard error's too, when stderr: where the system writes
// both to one file), and job.log (the array's one output) lists every task
// with its task number in its chunk, its state, exit code and its object.
func assertTaskLogs(t *testing.T, bucket, tasks string, outputs []string, chunk int, stderr bool) {
	t.Helper()
	for i := 0; i <= 4; i++ {
		got := readObject(t, bucket, tasks+strconv.Itoa(i)+".log")
		for n := 1; n <= 3; n++ {
			assert.Contains(t, got, fmt.Sprintf("task %d out %d\n", i, n), "task %d's log", i)
			if stderr {
				assert.Contains(t, got, fmt.Sprintf("task %d err %d\n", i, n), "task %d's log", i)
			}
		}
		lines := 3
		if stderr {
			lines = 6
		}
		assert.Equal(t, lines, strings.Count(got, "task "), "task %d's log holds its own lines only: %q", i, got)
	}
	require.Len(t, outputs, 1, "job.log is the array's output")
	require.True(t, strings.HasPrefix(outputs[0], "s3://"+bucket+"/") && strings.HasSuffix(outputs[0], "/job.log"), outputs[0])
	jobLog := readObject(t, bucket, strings.TrimPrefix(outputs[0], "s3://"+bucket+"/"))
	lines := strings.Split(strings.TrimSpace(jobLog), "\n")
	require.Len(t, lines, 2+5, "a state line, a header and one line per task:\n%s", jobLog)
	for i, line := range lines[2:] {
		f := strings.Split(line, "\t")
		require.Len(t, f, 7, line)
		state, code := "DONE", "0"
		if i == 3 {
			state, code = "FAILED", "3"
		}
		assert.Equal(t, []string{strconv.Itoa(i), strconv.Itoa(i % chunk), state, code, "s3://" + bucket + "/" + tasks + strconv.Itoa(i) + ".log"},
			[]string{f[0], f[2], f[3], f[5], f[6]}, "task %d: index, its task number in its chunk, state, exit code, log", i)
	}
}

// TestSlurmArrayLogTaskSelector: --log-task chooses the task whose output
// is the step's live log (here 3, the failing one, in the second chunk of
// 0-4/3); the lowest index's is not there. A --log-task that is no index
// of the array is refused (exit 2) before anything is submitted.
func TestSlurmArrayLogTaskSelector(t *testing.T) {
	clearEnv(t)
	bucket := tests3.Bucket(t, "logs")
	url, slurmCreds := slurmEnv(t)
	code, out := runBinary(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "slurm-bad-log-task", "--backend", "slurm",
		"--resource-url", url, "--credentials-dir", slurmCreds, "--script", taskScript(3), "--array", "0-4", "--log-task", "7")
	require.Equal(t, 2, code, out)
	assert.Contains(t, out, "log-task: is 7, not an index of the array 0-4", out)
	assert.Contains(t, out, `msg="requests sent" backend=0 `, "nothing was submitted:\n%s", out)

	out, _, _ = runTaskArray(t, "slurm-log-task", bucket, "0-4/3", "--log-task", "3")
	for n := 1; n <= 3; n++ {
		assert.Equal(t, 1, strings.Count(out, fmt.Sprintf("task 3 out %d\n", n)), "task 3's output, once:\n%s", out)
	}
	for _, other := range []string{"task 0 ", "task 1 ", "task 2 ", "task 4 "} {
		assert.NotContains(t, out, other, "only task 3's output:\n%s", out)
	}
	assert.Less(t, strings.Index(out, "task 3 out 1\n"), strings.Index(out, "state=FAILED"), "read before the end was said:\n%s", out)
}

// TestSlurmArrayTaskLogsUnfollowed: an array's tasks ship their logs to S3
// even when the step does not follow its output (--follow-logs=false): they
// are the only copy of the tasks' logs there.
func TestSlurmArrayTaskLogsUnfollowed(t *testing.T) {
	clearEnv(t)
	bucket := tests3.Bucket(t, "logs")
	out, key, outputs := runTaskArray(t, "slurm-task-logs-unfollowed", bucket, "0-4", "--follow-logs=false")
	assert.NotContains(t, out, "task 0 out", "the step does not follow the output:\n%s", out)
	tasks := runner.RunPrefix("slurm-task-logs-unfollowed", key, "") + "tasks/"
	for i := 0; i <= 4; i++ {
		assert.Contains(t, readObject(t, bucket, tasks+strconv.Itoa(i)+".log"), fmt.Sprintf("task %d err 3\n", i))
	}
	require.Len(t, outputs, 1)
	assert.Contains(t, readObject(t, bucket, strings.TrimPrefix(outputs[0], "s3://"+bucket+"/")), "\n3\t", "job.log lists task 3")
}

// TestSlurmArrayLogTaskFromSharedFile: with --log-dir, --log-task follows
// that task's own output file (task 4 of 0-4/3 is the second chunk's task
// 1: the file is found in the chunk that runs it), not the lowest index's.
func TestSlurmArrayLogTaskFromSharedFile(t *testing.T) {
	clearEnv(t)
	url, creds := slurmEnv(t)
	dir := sharedLogDir(t)
	code, out := runBinary(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "slurm-log-task-file", "--backend", "slurm",
		"--resource-url", url, "--credentials-dir", creds, "--script", taskScript(3), "--array", "0-4/3",
		"--job-properties", `{"standard_output":"`+dir+`/%A_%a.out"}`, "--update-interval", "5",
		"--log-interval", "500ms", "--log-dir", dir, "--log-task", "4")
	require.Equal(t, 1, code, out)
	for n := 1; n <= 3; n++ {
		assert.Equal(t, 1, strings.Count(out, fmt.Sprintf("task 4 out %d\n", n)), "task 4's output, once:\n%s", out)
	}
	for _, other := range []string{"task 0 ", "task 1 ", "task 3 "} {
		assert.NotContains(t, out, other, "only task 4's output:\n%s", out)
	}
}
