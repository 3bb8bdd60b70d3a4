package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// An array on a backend that reads each task's output itself (a
// TaskLogReader: Slurm over SSH, HTCondor) ships nothing from the cluster: invoke
// reads the followed task's output for the step's log and keeps its object
// (tasks/<index>.log) up to date while it runs, and at the end uploads
// every task's output to its object. Reads stay bounded: one task's while
// the array runs, each task's once at its end.

// taskLogs follows one task of an array (the user's index) through a
// TaskLogReader and, with S3, uploads its whole output when it grew, at
// most every shipEvery.
type taskLogs struct {
	tr        backends.TaskLogReader
	task      int
	ship      func(ctx context.Context, id string) (int64, error) // nil without S3
	shipEvery time.Duration
	shipped   int64     // the output's size at its last upload
	shipDue   time.Time // the next upload, if it grew
}

func (r *run) taskLogSource(desc *record.Description, tr backends.TaskLogReader) *taskLogs {
	l := &taskLogs{tr: tr, task: r.liveTask(), shipEvery: max(r.LogInterval, minShipEvery)}
	if r.s3 != nil && desc.UploadBucket != "" {
		l.ship = func(ctx context.Context, id string) (int64, error) {
			return r.uploadTaskLog(ctx, desc.UploadBucket, tr, id, l.task)
		}
	}
	return l
}

func (l *taskLogs) ReadLogs(ctx context.Context, id string, offset int64, w io.Writer) (int64, error) {
	c := taskChunk(id, l.task)
	next, err := l.tr.ReadTaskLogs(ctx, c.id, l.task-c.offset, offset, w)
	if err != nil || l.ship == nil || next <= l.shipped || time.Now().Before(l.shipDue) {
		return next, err
	}
	l.shipDue = time.Now().Add(l.shipEvery)
	n, err := l.ship(ctx, id)
	if err != nil {
		// The step's log is read; its object in S3 is tried again next time
		// (and uploaded whole at the end).
		return next, fmt.Errorf("uploading task %d's log to S3: %w", l.task, err)
	}
	l.shipped = n
	return next, nil
}

// uploadTaskLogs uploads the output of each of the array's tasks to its
// object, one task at a time. A task without output (never started) has
// none; nor has one whose output cannot be uploaded for good (job.log says
// "-"), which is said once for all. A fault that outlasts the retries
// fails the upload as it is (transient: a retry of the step re-attaches
// and uploads them again).
func (r *run) uploadTaskLogs(ctx context.Context, bucket string, tr backends.TaskLogReader, id string) error {
	var failed []int
	var firstErr error
	for _, rg := range r.arr.arr.Ranges {
		for i := rg.First; i <= rg.Last; i++ {
			err := retryTransient(ctx, min(r.RetryBudget, 2*time.Minute), func(ctx context.Context) error {
				_, err := r.uploadTaskLog(ctx, bucket, tr, id, i)
				return err
			})
			switch {
			case err == nil, errors.Is(err, backends.ErrNotFound):
			case ctx.Err() != nil, errors.Is(err, backends.ErrTransient):
				return fmt.Errorf("uploading task %d's log to s3://%s/%s failed: %w", i, bucket, r.taskLogPrefix(), err)
			default:
				if firstErr == nil {
					firstErr = err
				}
				failed = append(failed, i)
			}
		}
	}
	if len(failed) > 0 {
		r.Log.Warn("some array tasks' logs are not uploaded (job.log lists them with -)", "tasks", len(failed), "first", failed[0], "err", firstErr)
	}
	return nil
}

// uploadTaskLog uploads the whole output of the array's task i (the user's
// index), scrubbed, to tasks/<i>.log and returns its size on the cluster.
// ErrNotFound: the task has no output. The output is spooled to a file
// first: its size known, a small log is one PUT (not a multipart upload's
// three) and memory does not grow with it.
func (r *run) uploadTaskLog(ctx context.Context, bucket string, tr backends.TaskLogReader, id string, i int) (int64, error) {
	spool, err := os.CreateTemp("", "bridge-task-log-*")
	if err != nil {
		return 0, err
	}
	defer func() { spool.Close(); os.Remove(spool.Name()) }()
	c := taskChunk(id, i)
	out := &outputWriter{w: spool, secrets: r.Secrets}
	tail := &tailWriter{w: out}
	size, err := tr.ReadTaskLogs(ctx, c.id, i-c.offset, 0, tail)
	if er, ok := tr.(backends.TaskErrReader); ok && err == nil {
		err = appendTaskErrs(ctx, er, c, i, out, tail.last != 0 && tail.last != '\n')
	}
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		return 0, err
	}
	n, err := spool.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = spool.Seek(0, io.SeekStart)
	}
	if err != nil {
		return 0, err
	}
	_, err = r.s3.Upload(ctx, bucket, r.taskLogPrefix()+strconv.Itoa(i)+".log", spool, n)
	return size, err
}

// taskErrMarker heads a task's standard error in its log object, where the
// backend keeps it in a file of its own (backends.TaskErrReader).
const taskErrMarker = "--- standard error ---\n"

// appendTaskErrs writes the standard error of the array's task i (in
// chunk c) to w after taskErrMarker, on a line of its own (after a
// newline, if newline: the output did not end one); nothing when the task
// wrote none.
func appendTaskErrs(ctx context.Context, er backends.TaskErrReader, c chunkRef, i int, w io.Writer, newline bool) error {
	m := &markedWriter{w: w, marker: taskErrMarker, newline: newline}
	_, err := er.ReadTaskErrs(ctx, c.id, i-c.offset, 0, m)
	if errors.Is(err, backends.ErrNotFound) {
		return nil
	}
	return err
}

// markedWriter writes marker (after a newline, if newline) before the
// first bytes written to it.
type markedWriter struct {
	w       io.Writer
	marker  string
	newline bool
	started bool
}

func (m *markedWriter) Write(p []byte) (int, error) {
	if len(p) > 0 && !m.started {
		m.started = true
		head := m.marker
		if m.newline {
			head = "\n" + head
		}
		if _, err := io.WriteString(m.w, head); err != nil {
			return 0, err
		}
	}
	return m.w.Write(p)
}

// tailWriter remembers the last byte written through it (0: none).
type tailWriter struct {
	w    io.Writer
	last byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if n > 0 {
		t.last = p[n-1]
	}
	return n, err
}

// taskChunk is the native array (the chunk, when the array was split) that
// runs the user's index i of the array id.
func taskChunk(id string, i int) chunkRef {
	refs, chunked := parseChunkedID(id)
	if !chunked {
		refs = []chunkRef{{id, 0}}
	}
	return chunkOf(refs, i)
}
