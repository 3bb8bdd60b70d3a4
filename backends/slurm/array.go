package slurm

// Job arrays (backends.ArraySubmitter). The array is Slurm's own: the job's
// "array" field over REST, sbatch --array over SSH, with the same key in
// comment as a job's, so FindByKey finds it (as the array's id: its tasks
// carry the key too). Each task's script runs inside the POSIX sh wrapper
// of wrapScript, which exports BRIDGE_TASK_INDEX from SLURM_ARRAY_TASK_ID
// before it runs the script through its #! interpreter. With the log
// shipper's task form (LogShip.Tasks) every task ships its output to an
// object of its own, named by its index; with a plain URL only the lowest
// index's task ships.
//
// Slurm keeps an array as one record per started task and one record for
// the tasks not started yet (array_task_string "5-999%50", with the
// array's id); when the last task starts, that record becomes the task's.
// GET job/{id} (or squeue -r -j) returns them all, so the tasks' states
// come in one query; the not-started ones are left out (pending). A task
// ended more than MinJobAge ago is only in the accounting: the same query
// to slurmdbd (sacct -j) fills those in.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/bridge-runner/bridge-runner/backends"
)

// SubmitArray submits job as a Slurm job array of a's tasks.
func (b *Backend) SubmitArray(ctx context.Context, job backends.Job, a backends.Array) (string, error) {
	if a.Count() == 0 {
		return "", backends.Invalid("array", "no indexes: give them as 0-99 or 1,3,8-15")
	}
	spec, err := buildJob(job)
	if err != nil {
		return "", err
	}
	spec.fields["array"] = mustJSON(a.String())
	w := wrapping{taskIndex: true, shipTask: a.Ranges[0].First + a.Offset, taskOffset: a.Offset}
	if job.LogShip != nil {
		if err := spec.shipLogs(*job.LogShip, w); err != nil {
			return "", err
		}
	} else {
		spec.script = wrapScript(spec.script, w)
	}
	return b.submitSpec(ctx, spec)
}

// ArrayStatus reads the array's tasks with GET job/{id}, and those
// slurmctld has forgotten from slurmdbd when the cluster keeps accounting.
func (b *Backend) ArrayStatus(ctx context.Context, id string) (map[int]backends.Status, error) {
	jobs, _, err := b.liveRecords(ctx, id)
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		return nil, err
	}
	live := err
	tasks := arrayTasks(jobs, id)
	if !validID(id) || b.noAccounting.Load() {
		return tasks, live
	}
	db, err := b.accountingRecords(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, dj := range db {
		j := dj.jobInfo()
		if idx, ok := taskIndex(j, id); ok {
			if _, known := tasks[idx]; !known {
				tasks[idx] = j.status()
			}
		}
	}
	if len(tasks) == 0 && live != nil {
		return nil, live
	}
	return tasks, nil
}

// arrayTasks are the tasks of array id among slurmctld's records jobs.
func arrayTasks(jobs []jobInfo, id string) map[int]backends.Status {
	tasks := map[int]backends.Status{}
	for i := range jobs {
		if idx, ok := taskIndex(&jobs[i], id); ok {
			tasks[idx] = jobs[i].status()
		}
	}
	for i := range jobs {
		if jobs[i].baseID() == id && jobs[i].ArrayTaskString != "" {
			unstarted(jobs[i].ArrayTaskString, jobs[i].status(), tasks)
		}
	}
	return tasks
}

// taskIndex is the index of array id's task whose record j is; ok is false
// for the record of the tasks not started yet and for other jobs' records.
func taskIndex(j *jobInfo, id string) (int, bool) {
	if j.baseID() != id {
		return 0, false
	}
	n, ok := number(j.ArrayTaskID)
	if !ok || n < 0 || n > backends.MaxArrayIndex {
		return 0, false
	}
	return int(n), true
}

// unstarted gives the tasks of spec ("5-999%50") that have no record of
// their own the state st of their common record when it is final: an array
// cancelled before its tasks started keeps them in that one record, and
// they would otherwise count as pending for ever. Tasks still waiting are
// left out.
func unstarted(spec string, st backends.Status, tasks map[int]backends.Status) {
	if !st.State.Final() {
		return
	}
	a, err := backends.ParseArray(spec)
	if err != nil {
		return
	}
	for _, r := range a.Ranges {
		for i := r.First; i <= r.Last; i++ {
			if _, ok := tasks[i]; !ok {
				tasks[i] = st
			}
		}
	}
}

// DefaultMaxArraySize is slurm.conf's MaxArraySize when it sets none.
const DefaultMaxArraySize = 1001

// ArrayLimit is the cluster's MaxArraySize (backends.ArrayLimiter), from
// GET conf: slurmrestd serves slurm.conf's values there from v0.0.45 (Slurm
// 26.05); 22.05's v0.0.38 and 24.11's v0.0.40-42 serve neither conf nor
// MaxArraySize in diag, so on those (404) it is Slurm's default, 1001, and
// a site that set another gives it in the array key ("0-4999/500").
func (b *Backend) ArrayLimit(ctx context.Context) (int, error) {
	if _, err := b.version(ctx); err != nil {
		return 0, err
	}
	r, err := b.do(ctx, http.MethodGet, b.apiPath("conf"), nil)
	if err != nil {
		return 0, err
	}
	if r.status == http.StatusNotFound {
		return DefaultMaxArraySize, nil
	}
	if r.status != http.StatusOK {
		return 0, b.classify(ctx, r, "")
	}
	var conf struct {
		SlurmConf struct {
			MaxArraySize *int `json:"MaxArraySize"`
		} `json:"slurm_conf"`
	}
	if err := json.Unmarshal(r.body, &conf); err != nil {
		return 0, fmt.Errorf("%s %s: cannot read the answer: %w", r.method, r.path, err)
	}
	if n := conf.SlurmConf.MaxArraySize; n != nil && *n > 0 {
		return *n, nil
	}
	return DefaultMaxArraySize, nil
}

var (
	_ backends.ArraySubmitter = (*Backend)(nil)
	_ backends.ArrayLimiter   = (*Backend)(nil)
)
