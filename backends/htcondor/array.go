package htcondor

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
)

// An array is one cluster: its procs are the tasks, proc n running the
// n-th index of the array (an itemized queue), which the proc carries in
// the job attribute BridgeTaskIndex and its script in BRIDGE_TASK_INDEX.
const (
	taskMacro = "TaskIndex"
	taskAttr  = "BridgeTaskIndex"
	countAttr = "BridgeTaskCount"
	taskOut   = "task-$(" + taskMacro + ").out"
	taskErr   = "task-$(" + taskMacro + ").err"
)

// outputs are the files HTCondor writes in the job's directory: the output
// and error of the job (a nil) or of each of the array a's tasks, and the
// event log.
func outputs(a *backends.Array) []string {
	if a == nil {
		return []string{outFile, errFile, logFile}
	}
	names := []string{logFile}
	for _, r := range a.Ranges {
		for i := r.First; i <= r.Last; i++ {
			n := "$(" + taskMacro + ")"
			names = append(names, strings.ReplaceAll(taskOut, n, strconv.Itoa(i)), strings.ReplaceAll(taskErr, n, strconv.Itoa(i)))
		}
	}
	return names
}

var _ backends.ArraySubmitter = (*Backend)(nil)

var clusterID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d+$`) })

// writeQueue ends an array's submit description: the task attributes,
// max_materialize for %M (HTCondor's late materialization: at most M of
// the cluster's procs exist in the queue at once, the next coming as one
// leaves it), and the queue of the indexes.
func writeQueue(b *strings.Builder, a backends.Array) {
	if a.MaxParallel > 0 {
		fmt.Fprintf(b, "max_materialize = %d\n", a.MaxParallel)
	}
	fmt.Fprintf(b, "+%s = $(%s)\n+%s = %d\n", taskAttr, taskMacro, countAttr, a.Count())
	fmt.Fprintf(b, "queue %s from (\n", taskMacro)
	for _, r := range a.Ranges {
		for i := r.First; i <= r.Last; i++ {
			b.WriteString(strconv.Itoa(i))
			b.WriteByte('\n')
		}
	}
	b.WriteString(")\n")
}

var submittedCluster = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d+)\.\d+ - \d+\.\d+$`) })

// SubmitArray submits the job as one cluster of a's tasks; the array's id
// is the cluster's ("123", where a single job's is "123.0").
func (b *Backend) SubmitArray(ctx context.Context, job backends.Job, a backends.Array) (string, error) {
	if a.Count() == 0 {
		return "", backends.Invalid("array", "no index given: write indexes as 0-999 or 1,3,8-15")
	}
	out, dir, err := b.condorSubmit(ctx, job, &a)
	if err != nil {
		return "", err
	}
	m := submittedCluster().FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("condor_submit printed no cluster id (%d bytes, not shown)", len(out))
	}
	b.remember(m[1], dir)
	b.rememberArray(m[1], a.Count(), a.Ranges[0].First)
	return m[1], nil
}

// arrayInfo is what is known of an array without asking: its size (the
// condor_history limit) and its first index (whose output ReadLogs reads).
type arrayInfo struct{ count, first int }

func (b *Backend) rememberArray(id string, count, first int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.arrays[id]; ok && old.first < first {
		first = old.first
	}
	b.arrays[id] = arrayInfo{count, first}
}

func (b *Backend) array(id string) (arrayInfo, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.arrays[id]
	return a, ok
}

// ArrayStatus reads the cluster's procs: one condor_q of the cluster, then,
// unless every task is still queued, one condor_history of it, stopped
// once it found the tasks that left the queue. A task not yet
// materialized (max_materialize) is in neither and left out.
func (b *Backend) ArrayStatus(ctx context.Context, id string) (map[int]backends.Status, error) {
	if !clusterID().MatchString(id) {
		return nil, fmt.Errorf("%q is not an HTCondor array id (CLUSTER): %w", id, backends.ErrNotFound)
	}
	queued, err := b.query(ctx, false, 0, id)
	if err != nil {
		return nil, err
	}
	out := map[int]backends.Status{}
	b.collectTasks(id, queued, out)
	info, known := b.array(id)
	if known && len(out) >= info.count {
		return out, nil
	}
	limit := 0 // the whole history: the size is unknown
	if known {
		limit = info.count - len(out)
	}
	ended, err := b.query(ctx, true, limit, id)
	if err != nil {
		return nil, err
	}
	b.collectTasks(id, ended, out)
	if len(out) == 0 {
		return nil, fmt.Errorf("HTCondor cluster %s is neither in condor_q nor in condor_history: %w", id, backends.ErrNotFound)
	}
	return out, nil
}

// collectTasks adds the tasks' statuses to out by index (one already
// there, from the queue, is the newer) and learns the array's size and
// directory from them.
func (b *Backend) collectTasks(id string, ads []*jobAd, out map[int]backends.Status) {
	for _, ad := range ads {
		if ad.TaskIndex == nil || ad.ProcID < 0 || strconv.FormatInt(ad.ClusterID, 10) != id {
			continue
		}
		if _, done := out[*ad.TaskIndex]; !done {
			out[*ad.TaskIndex] = ad.status()
		}
		b.remember(id, ad.Iwd)
		b.remember(ad.id(), ad.Iwd)
		if ad.TaskCount != nil {
			b.rememberArray(id, *ad.TaskCount, *ad.TaskIndex)
		}
	}
}

// clusterStatus is Status for an array id: its tasks folded the simple
// way (going while any task is, else the first failure, else DONE). The
// runner folds ArrayStatus itself; this serves Status callers (logs).
func (b *Backend) clusterStatus(ctx context.Context, id string) (backends.Status, error) {
	tasks, err := b.ArrayStatus(ctx, id)
	if err != nil {
		return backends.Status{}, err
	}
	var going, failed *backends.Status
	var done backends.Status
	for _, st := range tasks {
		switch {
		case !st.State.Final():
			going = &st
		case st.State != backends.Done:
			failed = &st
		default:
			done = st
		}
	}
	if going != nil {
		return *going, nil
	}
	if failed != nil {
		return *failed, nil
	}
	return done, nil
}

// arrayEnded: no task of the array is left to remove (condor_rm of a
// cluster whose tasks left the queue, or are being removed, says it could
// not find its jobs).
func (b *Backend) arrayEnded(ctx context.Context, id string) bool {
	queued, err := b.query(ctx, false, 0, id)
	if err != nil {
		return false
	}
	for _, ad := range queued {
		if ad.JobStatus != 3 && ad.JobStatus != 4 { // neither removed nor completed
			return false
		}
	}
	return true
}
