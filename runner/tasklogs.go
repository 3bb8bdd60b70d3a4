package runner

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// An array's logs: with the log shipper (Slurm over REST with an upload
// bucket) every task ships its own output to its own object under the
// attempt's prefix, tasks/<index>.log, named by the index the user gave
// (not a chunk's); the step's live log follows one of them (LogTask, by
// default the lowest index). Over SSH (Slurm, HTCondor) invoke reads the
// tasks' outputs on the cluster and uploads them to the same objects
// itself (see tasklogs_ssh.go). At the end, job.log beside the outputs
// lists every task: its index, the native array (chunk) and task it ran
// as, its state, exit code and where its log is.

// taskLogPrefix is the key prefix of the objects an array's tasks ship
// their outputs to: the same for every retry of one attempt, so a
// re-attach reads on where the last invoke left off.
func (r *run) taskLogPrefix() string {
	return RunPrefix(r.JobName, AttemptKey(r.rec.UID, attemptOf(r.rec.Data)), "") + "tasks/"
}

// liveTask is the index of the array's task whose output is the step's
// live log: LogTask, else the array's lowest index.
func (r *run) liveTask() int {
	if r.LogTask != nil {
		return *r.LogTask
	}
	return r.arr.arr.Ranges[0].First
}

// checkLogTask refuses a LogTask that cannot be honoured: the job is no
// array, the index is not one of its tasks, or the step's log is read from
// a source that follows the lowest index only.
func (r *run) checkLogTask(desc *record.Description) error {
	if r.LogTask == nil || r.LogOut == io.Discard {
		return nil
	}
	n := *r.LogTask
	if desc.Array == nil {
		return backends.Invalid("log-task", "is %d, but the job is not an array; drop --log-task", n)
	}
	if !hasIndex(*desc.Array, n) {
		return backends.Invalid("log-task", "is %d, not an index of the array %s; give one of its indexes", n, desc.Array.Indexes())
	}
	if !r.followsAnyTask() {
		return backends.Invalid("log-task", "chooses the task the step's log follows among the logs an array's tasks ship to S3 or write to --log-dir (Slurm over REST), or that invoke reads over SSH (Slurm over SSH, HTCondor); this step's log follows the lowest index only: drop --log-task")
	}
	return nil
}

// followsAnyTask reports whether the step's log source can follow any
// task of an array (LogTask), not only the lowest index's.
func (r *run) followsAnyTask() bool {
	switch src := r.logSrc.(type) {
	case *s3Logs:
		return true
	case *fileLogs:
		return src.task != nil
	case *taskLogs:
		return true
	}
	return false
}

// fileLogTask is the task a fileLogs source of be follows: LogTask when
// be can locate one task's output, else nil (the first task's).
func (r *run) fileLogTask(be backends.Backend) *int {
	if _, ok := be.(backends.TaskOutputLocator); ok && r.arr != nil {
		return r.LogTask
	}
	return nil
}

// hasIndex reports whether i is one of a's indexes.
func hasIndex(a backends.Array, i int) bool {
	for _, r := range a.Ranges {
		if i >= r.First && i <= r.Last {
			return true
		}
	}
	return false
}

// taskShipEvery is how often the tasks whose output the step does not
// follow ship it while they run (and once at their end): a thousand tasks
// at once cost some 17 PUTs a second, not 200.
const taskShipEvery = time.Minute

// taskShip presigns the POST form with which every task of the array ships
// its output to its own object. Tasks may start long after the submit (a
// throttled or queued array): the form lives at least shipURLDefault.
func (r *run) taskShip(ctx context.Context, desc *record.Description, life time.Duration) (*backends.LogShip, error) {
	life = max(life, shipURLDefault)
	prefix := r.taskLogPrefix()
	u, fields, err := r.s3.PresignPostPrefix(ctx, desc.UploadBucket, prefix, life)
	if err != nil {
		return nil, err
	}
	r.Secrets.Add(fields["x-amz-signature"])
	r.Log.Info("the array's tasks ship their outputs to S3, each to its own object", "prefix", "s3://"+desc.UploadBucket+"/"+prefix,
		"live_task", r.liveTask(), "valid_for", life.String())
	live := -1
	if _, ok := r.logSrc.(*s3Logs); ok {
		live = r.liveTask()
	}
	return &backends.LogShip{URL: u, Every: max(r.LogInterval, minShipEvery),
		Tasks: &backends.TaskShip{KeyPrefix: prefix, Fields: fields, Live: live, OthersEvery: taskShipEvery}}, nil
}

// uploadArrayLog uploads the array's job.log (see jobLogText) beside its
// outputs, after the tasks' own logs when invoke reads them (be is a
// TaskLogReader).
func (r *run) uploadArrayLog(ctx context.Context, desc *record.Description, be backends.Backend, id, prefix string) ([]string, []string, error) {
	if tr, ok := unwrapArray(be).(backends.TaskLogReader); ok {
		if err := r.uploadTaskLogs(ctx, desc.UploadBucket, r.arr.taskReader(tr), id); err != nil {
			return nil, nil, err
		}
	}
	var shipped map[string]bool
	err := retryTransient(ctx, min(r.RetryBudget, 2*time.Minute), func(ctx context.Context) (err error) {
		shipped, err = r.s3.Keys(ctx, desc.UploadBucket, r.taskLogPrefix())
		return err
	})
	if err != nil {
		return nil, nil, backends.Transient(fmt.Errorf("listing the array's task logs: %v", err))
	}
	logOf := func(i int) string {
		if key := r.taskLogPrefix() + strconv.Itoa(i) + ".log"; shipped[key] {
			return "s3://" + desc.UploadBucket + "/" + key
		}
		return "-"
	}
	text := r.Secrets.Scrub(jobLogText(id, r.arr, logOf))
	var loc string
	err = retryTransient(ctx, min(r.RetryBudget, 2*time.Minute), func(ctx context.Context) (err error) {
		loc, err = r.s3.Upload(ctx, desc.UploadBucket, prefix+record.LogObject, strings.NewReader(text), int64(len(text)))
		return err
	})
	if err != nil {
		return nil, nil, backends.Transient(fmt.Errorf("uploading the array's job.log to s3://%s/%s failed: %v", desc.UploadBucket, prefix, err))
	}
	return []string{loc}, nil, nil
}

// jobLogText is an array's job.log: a line of its state, then one
// tab-separated line per task, by index: the index the user gave, the
// native array (a chunk's id when the array was split) and its task
// number there (a spread array's chunk ids name their targets, "b:77"), the state, the backend's state, the exit code ("-" when
// none is known) and the task's log, logOf(index).
func jobLogText(id string, a *arrayBackend, logOf func(int) string) string {
	a.mu.Lock()
	sum, tasks := a.last, a.tasks
	a.mu.Unlock()
	refs, chunked := parseChunkedID(id)
	if !chunked {
		refs = []chunkRef{{id, 0}}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# array %s: %s\n", id, sum.describe())
	b.WriteString("index\tjob\ttask\tstate\tbackend_state\texit_code\tlog\n")
	for _, rg := range a.arr.Ranges { // ascending, as ParseArray merged them
		for i := rg.First; i <= rg.Last; i++ {
			t := tasks[i]
			if t.State == "" { // not listed yet: PENDING, as foldArray counts it
				t.State = backends.Pending
			}
			code := "-"
			if t.ExitCode != nil {
				code = strconv.Itoa(*t.ExitCode)
			}
			ref := chunkOf(refs, i)
			fmt.Fprintf(&b, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", i, a.chunkName(ref.id), i-ref.offset, t.State, orDash(t.Raw), code, logOf(i))
		}
	}
	return b.String()
}

// chunkOf is the chunk that ran index i: the one of the highest offset not
// past it.
func chunkOf(refs []chunkRef, i int) chunkRef {
	c := refs[0]
	for _, r := range refs {
		if r.offset <= i && r.offset >= c.offset {
			c = r
		}
	}
	return c
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
