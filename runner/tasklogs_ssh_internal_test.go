package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/record"
)

// growingTask is a TaskLogReader whose one task's output is out; it keeps
// which native array and task it was asked for.
type growingTask struct {
	out     string
	arrayID string
	task    int
}

func (g *growingTask) ReadTaskLogs(_ context.Context, id string, task int, offset int64, w io.Writer) (int64, error) {
	g.arrayID, g.task = id, task
	n, err := io.WriteString(w, g.out[offset:])
	return offset + int64(n), err
}

// TestTaskLogsShipBounded: the followed task's object is uploaded when its
// output grew and its upload is due, not at every read (a read every log
// interval, an upload at most every shipEvery); a failed upload is said
// (the read's bytes are kept) and tried again when due. The task is read
// in the chunk that runs it (user's index 3 of "100@0+101@2" is chunk 101's
// task 1).
func TestTaskLogsShipBounded(t *testing.T) {
	tr := &growingTask{out: "a\n"}
	var shipped []int64
	var fail error
	l := &taskLogs{tr: tr, task: 3, shipEvery: time.Hour}
	l.ship = func(ctx context.Context, id string) (int64, error) {
		if fail != nil {
			return 0, fail
		}
		n, err := tr.ReadTaskLogs(ctx, "101", 1, 0, io.Discard)
		shipped = append(shipped, n)
		return n, err
	}
	read := func(offset int64) int64 {
		var b strings.Builder
		next, err := l.ReadLogs(context.Background(), "100@0+101@2", offset, &b)
		require.NoError(t, err)
		assert.Equal(t, tr.out[offset:], b.String())
		return next
	}
	off := read(0)
	assert.Equal(t, "101", tr.arrayID)
	assert.Equal(t, 1, tr.task, "the user's index 3 is chunk 101's task 1")
	assert.Equal(t, []int64{2}, shipped, "the first output is uploaded at once")

	tr.out += "b\n"
	off = read(off)
	assert.Equal(t, []int64{2}, shipped, "grown, but not due: not uploaded")

	l.shipDue = time.Time{} // due now
	off = read(off)
	assert.Equal(t, []int64{2, 4}, shipped, "grown and due: uploaded")

	l.shipDue = time.Time{}
	off = read(off)
	assert.Equal(t, []int64{2, 4}, shipped, "due, but not grown: not uploaded")

	tr.out += "c\n"
	l.shipDue, fail = time.Time{}, errors.New("S3 is down")
	next, err := l.ReadLogs(context.Background(), "100@0+101@2", off, io.Discard)
	assert.Equal(t, int64(6), next, "the read's bytes are kept")
	require.ErrorContains(t, err, "uploading task 3's log to S3: S3 is down")
	l.shipDue, fail = time.Time{}, nil
	read(next)
	assert.Equal(t, []int64{2, 4, 6}, shipped, "uploaded again once due")
}

// TestLogTaskNeedsASourceOfAnyTask: --log-task is taken where the step's
// log can follow any task (a TaskLogReader's, the tasks' S3 objects) and
// refused, naming the flag, where it follows the lowest index only (a
// backend's own reader of an array: LSF).
func TestLogTaskNeedsASourceOfAnyTask(t *testing.T) {
	arr, err := backends.ParseArray("0-4")
	require.NoError(t, err)
	desc := &record.Description{Array: &arr}
	two := 2
	r := &run{Invoker: &Invoker{LogTask: &two, LogOut: &strings.Builder{}}}
	for _, src := range []backends.LogReader{&taskLogs{tr: &growingTask{}}, &s3Logs{}} {
		r.logSrc = src
		assert.NoError(t, r.checkLogTask(desc), "%T follows any task", src)
	}
	r.logSrc = firstChunk{}
	err = r.checkLogTask(desc)
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.ErrorContains(t, err, "log-task: ")
	assert.ErrorContains(t, err, "drop --log-task")
}

// faultyTasks is a TaskLogReader whose tasks print "task N", but those it
// maps to an error, which their reads return.
type faultyTasks map[int]error

func (f faultyTasks) ReadTaskLogs(_ context.Context, _ string, task int, offset int64, w io.Writer) (int64, error) {
	if err := f[task]; err != nil {
		return offset, err
	}
	n, err := fmt.Fprintf(w, "task %d\n", task)
	return offset + int64(n), err
}

// TestUploadTaskLogsSkipsWhatCannotBeRead (real S3): at the end every
// task's output is uploaded to its object; a task without output (not
// found) or whose output cannot be read for good gets none (job.log says
// "-") and the others are still uploaded; a transient fault that outlasts
// the retries fails the upload as transient (a retry re-attaches).
func TestUploadTaskLogsSkipsWhatCannotBeRead(t *testing.T) {
	endpoint, _, _, creds := tests3.Env(t)
	s3, err := NewS3Store(S3Config{Endpoint: endpoint, Credentials: DirCredentials{Dir: creds, Secrets: &Secrets{}}})
	require.NoError(t, err)
	bucket := tests3.Bucket(t, "tasklogs")
	arr, err := backends.ParseArray("0-3")
	require.NoError(t, err)
	r := &run{Invoker: &Invoker{JobName: "task-logs", RetryBudget: time.Second, Secrets: &Secrets{}, Log: slog.New(slog.DiscardHandler)},
		rec: &record.Record{UID: "uid-1", Data: map[string]string{}}, arr: &arrayBackend{arr: arr}, s3: s3}
	tr := faultyTasks{1: errors.New("permission denied"), 2: fmt.Errorf("not started: %w", backends.ErrNotFound)}
	ctx := context.Background()
	require.NoError(t, r.uploadTaskLogs(ctx, bucket, tr, "7"))
	prefix := r.taskLogPrefix()
	keys, err := s3.Keys(ctx, bucket, prefix)
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{prefix + "0.log": true, prefix + "3.log": true}, keys)
	obj, err := s3.client.GetObject(ctx, bucket, prefix+"3.log", minio.GetObjectOptions{})
	require.NoError(t, err)
	got, err := io.ReadAll(obj)
	require.NoError(t, err)
	assert.Equal(t, "task 3\n", string(got))

	tr[1] = backends.Transient(errors.New("the SSH connection was cut"))
	err = r.uploadTaskLogs(ctx, bucket, tr, "7")
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.ErrorContains(t, err, "uploading task 1's log")
}

// splitTasks is a TaskLogReader and TaskErrReader (HTCondor's shape):
// task i's output is out[i] and its standard error err[i]; a task missing
// from err has no error file.
type splitTasks struct{ out, err map[int]string }

func (s splitTasks) ReadTaskLogs(_ context.Context, _ string, task int, offset int64, w io.Writer) (int64, error) {
	n, err := io.WriteString(w, s.out[task][offset:])
	return offset + int64(n), err
}

func (s splitTasks) ReadTaskErrs(_ context.Context, _ string, task int, offset int64, w io.Writer) (int64, error) {
	e, ok := s.err[task]
	if !ok {
		return offset, fmt.Errorf("no task-%d.err: %w", task, backends.ErrNotFound)
	}
	n, err := io.WriteString(w, e[offset:])
	return offset + int64(n), err
}

// TestUploadTaskLogsAppendStandardError (real S3): where a task's standard
// error is a file of its own, its object holds the output, then a marker
// line and the standard error (on a line of its own even after output
// without a final newline, scrubbed like the output); no marker when the
// task wrote no error, or has no error file.
func TestUploadTaskLogsAppendStandardError(t *testing.T) {
	endpoint, _, _, creds := tests3.Env(t)
	s3, err := NewS3Store(S3Config{Endpoint: endpoint, Credentials: DirCredentials{Dir: creds, Secrets: &Secrets{}}})
	require.NoError(t, err)
	bucket := tests3.Bucket(t, "tasklogs")
	arr, err := backends.ParseArray("0-3")
	require.NoError(t, err)
	secrets := &Secrets{}
	secrets.Add("hunter2-secret")
	r := &run{Invoker: &Invoker{JobName: "task-errs", RetryBudget: time.Second, Secrets: secrets, Log: slog.New(slog.DiscardHandler)},
		rec: &record.Record{UID: "uid-2", Data: map[string]string{}}, arr: &arrayBackend{arr: arr}, s3: s3}
	tr := splitTasks{
		out: map[int]string{0: "out 0\n", 1: "out 1 without newline", 2: "out 2\n", 3: "out 3\n"},
		err: map[int]string{0: "err 0 hunter2-secret\n", 1: "err 1\n", 2: ""},
	}
	ctx := context.Background()
	require.NoError(t, r.uploadTaskLogs(ctx, bucket, tr, "7"))
	want := map[int]string{
		0: "out 0\n--- standard error ---\n" + secrets.Scrub("err 0 hunter2-secret\n"),
		1: "out 1 without newline\n--- standard error ---\nerr 1\n",
		2: "out 2\n",
		3: "out 3\n",
	}
	require.NotContains(t, want[0], "hunter2-secret")
	for i, w := range want {
		obj, err := s3.client.GetObject(ctx, bucket, r.taskLogPrefix()+fmt.Sprint(i)+".log", minio.GetObjectOptions{})
		require.NoError(t, err)
		got, err := io.ReadAll(obj)
		require.NoError(t, err)
		assert.Equal(t, w, string(got), "task %d's object", i)
	}
}
