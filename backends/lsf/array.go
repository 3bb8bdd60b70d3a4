package lsf

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Job arrays. LSF numbers an array's elements from 1 (bsub refuses index
// 0), while an array key usually starts at 0, as Slurm's and HTCondor's
// do: the array index i is LSF's element i+1, always, so that one array
// key runs the same tasks on every backend. A task's script sees
// BRIDGE_TASK_INDEX = i (LSB_JOBINDEX, LSF's own, is i+1). The job name
// carries the elements, "<name>[1-5,9]%M" (bsub -J), and the array's id is
// the job id; GET ws/jobs/{id} lists its elements as "<id>[<element>]".

// maxArraySpec is the longest job array specification, "name[indexes]",
// LSF takes (its Job Arrays documentation).
const maxArraySpec = 255

// taskScript is the file the array's command runs: it sets the task's
// index from LSF's, in the job's shell (a command line is expanded by the
// application's submit script too, before LSF runs it), then runs the
// command a single job would run.
func taskScript(key string) string { return key + "-task.sh" }

// lsfIndexes writes a's indexes as LSF's elements (each one more).
func lsfIndexes(a backends.Array) string {
	rs := make([]backends.IndexRange, len(a.Ranges))
	for i, r := range a.Ranges {
		rs[i] = backends.IndexRange{First: r.First + 1, Last: r.Last + 1}
	}
	return backends.FormatRanges(rs)
}

// makeArray turns sp, built for one job, into the array a's submit.
func (sp *spec) makeArray(job backends.Job, a backends.Array) error {
	if a.Count() == 0 {
		return backends.Invalid("array", "no index given: write indexes as 0-999 or 1,3,8-15")
	}
	name := taskScript(job.Key)
	for _, f := range sp.files {
		if f.name == name {
			return backends.Invalid("jobdata.additionalData", "%s is the array's own file: rename the input", name)
		}
	}
	jobName := sp.jobName + "[" + lsfIndexes(a) + "]"
	if len(jobName) > maxArraySpec {
		return backends.Invalid("array", "%q as LSF's job array %q is %d characters, over LSF's %d: use fewer ranges (e.g. 0-99 rather than a list), or a shorter name or jobName",
			a.String(), jobName, len(jobName), maxArraySpec)
	}
	if a.MaxParallel > 0 {
		jobName += "%" + strconv.Itoa(a.MaxParallel)
	}
	for i, p := range sp.params {
		switch p[0] {
		case "COMMANDTORUN":
			script := "#!/bin/sh\n# The array task's index (LSF numbers elements from 1).\n" +
				backends.TaskIndexVar + "=$((LSB_JOBINDEX - 1))\nexport " + backends.TaskIndexVar + "\n" + p[1] + "\n"
			sp.files = append(sp.files, file{name: name, data: []byte(script)})
			sp.params[i][1] = "/bin/sh ./" + name
		case "JOB_NAME":
			sp.params[i][1] = jobName
		}
	}
	return nil
}

// SubmitArray submits the job as one LSF job array of a's tasks; its id is
// the array's job id.
func (b *Backend) SubmitArray(ctx context.Context, job backends.Job, a backends.Array) (string, error) {
	sp, err := buildSpec(job)
	if err != nil {
		return "", err
	}
	if err := sp.makeArray(job, a); err != nil {
		return "", err
	}
	id, err := b.submit(ctx, sp)
	if errors.Is(err, backends.ErrInvalid) {
		// The refusal may be the array's: say what LSF bounds.
		return "", backends.Invalid("array", "%v; an array's highest LSF element (%d here, the highest index + 1) must be within the cluster's MAX_JOB_ARRAY_SIZE, 1000 unless the site raised it",
			err, a.Max()+1)
	}
	return id, err
}

// element splits an entry's id "<id>[<n>]" (or a separate jobIndex field)
// into the array's id and LSF's element number; n is 0 for a plain job.
func element(e node) (string, int) {
	id := entryID(e)
	base, idx, ok := strings.Cut(id, "[")
	if ok {
		n, err := strconv.Atoi(strings.TrimSuffix(idx, "]"))
		if err != nil {
			return base, 0
		}
		return base, n
	}
	n, _ := strconv.Atoi(str(get(e, "jobIndex", "arrayIndex")))
	return base, n
}

// ArrayStatus reads the array's elements with one GET ws/jobs/{id}, each
// element reported under its array index (LSF's element less one). Once
// the array has left mbatchd (404), it is not found.
func (b *Backend) ArrayStatus(ctx context.Context, id string) (map[int]backends.Status, error) {
	if !digits(id) || !validID(id) {
		return nil, fmt.Errorf("LSF array id %q is not a job id: %w", id, backends.ErrNotFound)
	}
	entries, err := b.jobEntriesOf(ctx, id)
	if err != nil {
		return nil, err
	}
	out, err := elements(entries, id)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("LSF job %s lists no array elements: %w", id, backends.ErrNotFound)
	}
	return out, nil
}

// elements maps the entries that are elements of the array id by array
// index.
func elements(entries []node, id string) (map[int]backends.Status, error) {
	out := map[int]backends.Status{}
	for _, e := range entries {
		base, n := element(e)
		if base != id || n < 1 {
			continue
		}
		st, err := mapJob(e)
		if err != nil {
			return nil, err
		}
		out[n-1] = st
	}
	return out, nil
}

// jobEntriesOf reads GET ws/jobs/{id}'s job entries; ErrNotFound once
// Application Center no longer lists the job (404).
func (b *Backend) jobEntriesOf(ctx context.Context, id string) ([]node, error) {
	r := request{method: http.MethodGet, path: "/ws/jobs/" + id, accept: "application/json"}
	buf, err := b.do(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound {
		return nil, fmt.Errorf("LSF job %s is no longer listed: %w", id, backends.ErrNotFound)
	}
	if err != nil {
		return nil, transientOr(err)
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read the answer: %w", r, err)
	}
	return jobEntries(doc), nil
}

// foldElements is Status for an array id, from its elements: going while
// any element is, else the first failure, else DONE. The runner folds
// ArrayStatus itself; this serves Status callers (a Cancel's check).
func foldElements(tasks map[int]backends.Status) backends.Status {
	var going, failed *backends.Status
	var done backends.Status
	for _, i := range slices.Sorted(maps.Keys(tasks)) {
		st := tasks[i]
		switch {
		case !st.State.Final():
			going = cmp.Or(going, &st)
		case st.State != backends.Done:
			failed = cmp.Or(failed, &st)
		default:
			done = st
		}
	}
	if going != nil {
		return *going
	}
	if failed != nil {
		return *failed
	}
	return done
}
