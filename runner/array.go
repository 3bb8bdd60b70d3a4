package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/record"
)

// A job array (the description's `array` key) is one job to the rest of
// the runner: arrayBackend submits it with the backend's SubmitArray and
// folds the states of its tasks, read with one ArrayStatus query, into the
// array's one state. Exactly once, the record, cancellation (the array's
// id cancels every task) and re-attach (FindByKey) are those of a job.

// arrayBackend is a backend that runs every job as the array arr.
type arrayBackend struct {
	backends.Backend
	as      backends.ArraySubmitter
	limiter backends.ArrayLimiter // nil: the backend takes any array in one
	arr     backends.Array
	cluster cluster.Cluster // the backend's: its ArrayLimit is asked of limiter once per cluster

	mu     sync.Mutex
	last   arraySummary            // the latest fold, for the record and the outputs
	tasks  map[int]backends.Status // the latest tasks' states, by index, for job.log
	size   int                     // the most indexes a chunk spans (arraychunks.go); 0 until known
	chunks []backends.Array        // the plan for size, once made

	progress taskProgress // what the step's log last said of the tasks

	// A spread array's shares and its other targets' backends, by name
	// (arrayspread.go); nil for an array on one target. targets[k] is the
	// target of chunks[k] ("" for this backend's own).
	shares  []record.Share
	home    string // the placed target, whose backend is the array's own
	peers   map[string]*peer
	targets []string
}

// asArray wraps be, an ArraySubmitter, for the array arr (newBackend
// does; checkCapabilities refuses an array for any other backend).
func asArray(be backends.Backend, arr backends.Array) *arrayBackend {
	l, _ := be.(backends.ArrayLimiter)
	return &arrayBackend{Backend: be, as: be.(backends.ArraySubmitter), limiter: l, arr: arr}
}

func (a *arrayBackend) Submit(ctx context.Context, job backends.Job) (string, error) {
	return a.as.SubmitArray(ctx, job, a.arr)
}

// Status is the array's state folded from its tasks' (see fold).
func (a *arrayBackend) Status(ctx context.Context, id string) (backends.Status, error) {
	var tasks map[int]backends.Status
	var err error
	if refs, ok := parseChunkedID(id); ok {
		tasks, err = a.chunkStatus(ctx, refs)
	} else {
		tasks, err = a.as.ArrayStatus(ctx, id)
	}
	if err != nil {
		return backends.Status{}, err
	}
	sum := foldArray(a.arr, tasks)
	a.mu.Lock()
	a.last, a.tasks = sum, tasks
	a.mu.Unlock()
	sum.Status.Message = fmt.Sprintf("array %s: %s", id, sum.describe())
	return sum.Status, nil
}

// unwrapArray is the backend under an array's wrapper: the live log of an
// array is what the backend reads or ships of it (its first task's, or the
// one LogTask chooses of those its tasks ship; see tasklogs.go), so the
// log sources look at the backend itself.
func unwrapArray(be backends.Backend) backends.Backend {
	if a, ok := be.(*arrayBackend); ok {
		return a.Backend
	}
	return be
}

func (a *arrayBackend) summary() arraySummary {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// The optional capabilities an array keeps: finding it by key (re-attach),
// checking the job, releasing the backend.
// A chunked array is found by its chunks' keys: the id names those found,
// which may be fewer than all (complete tells): cleanup cancels what it
// finds, and invoke adopts only a whole array.
func (a *arrayBackend) FindByKey(ctx context.Context, key string) (string, error) {
	f, ok := a.Backend.(backends.Finder)
	if !ok {
		return "", nil
	}
	chunks, err := a.plan(ctx)
	if err != nil {
		return "", err
	}
	if len(chunks) == 1 && chunks[0].Offset == 0 {
		return f.FindByKey(ctx, key)
	}
	id, _, err := a.findChunks(ctx, key, chunks)
	return id, err
}

// Cancel cancels the array: every chunk of a chunked one.
func (a *arrayBackend) Cancel(ctx context.Context, id string) error {
	if refs, ok := parseChunkedID(id); ok {
		return a.cancelChunks(ctx, refs)
	}
	return a.Backend.Cancel(ctx, id)
}

func (a *arrayBackend) Validate(job backends.Job) error {
	if v, ok := a.Backend.(backends.Validator); ok {
		return v.Validate(job)
	}
	return nil
}

// Close closes the backend (an SSH connection) and returns its error for
// the run's closeBackend to log: closing it there with no logger would
// panic on that error.
func (a *arrayBackend) Close() error {
	var errs []error
	for _, p := range a.peers {
		if c, ok := p.be.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	if c, ok := a.Backend.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// arraySummary is an array's state and what the record and the outputs
// say of its tasks.
type arraySummary struct {
	Status backends.Status
	Total  int
	Counts map[backends.State]int
	// Failed are the indexes of the tasks that ended other than DONE: what
	// a retry of only those runs (the outputs' array-failed).
	Failed []int
	// Codes are the exit codes of the first failed tasks, by index.
	Codes map[int]int
}

// foldArray folds the tasks' states into the array's: final only once
// every task is (a task the backend does not list yet is PENDING); then
// FAILED if any task failed, else KILLED if any was cancelled, else
// UNKNOWN if any was lost, else DONE. Before that RUNNING while any task
// runs, else SUSPENDED if any is, else PENDING.
func foldArray(arr backends.Array, tasks map[int]backends.Status) arraySummary {
	s := arraySummary{Total: arr.Count(), Counts: map[backends.State]int{}, Codes: map[int]int{}}
	infra := true
	for _, r := range arr.Ranges {
		for i := r.First; i <= r.Last; i++ {
			t, ok := tasks[i]
			if !ok || t.State == "" {
				t.State = backends.Pending
			}
			s.Counts[t.State]++
			s.note(i, t, &infra)
		}
	}
	st := &s.Status
	st.State = s.state()
	if st.State == backends.Failed || st.State == backends.Killed {
		st.Category = backends.CategoryJob
		if infra && st.State == backends.Failed {
			st.Category = backends.CategoryInfrastructure
		}
	}
	return s
}

// note adds task i's outcome to s: its times into the array's, and a task
// that ended other than DONE to Failed (with its exit code, the first few).
func (s *arraySummary) note(i int, t backends.Status, infra *bool) {
	st := &s.Status
	if !t.SubmitTime.IsZero() && (st.SubmitTime.IsZero() || t.SubmitTime.Before(st.SubmitTime)) {
		st.SubmitTime = t.SubmitTime
	}
	if !t.StartTime.IsZero() && (st.StartTime.IsZero() || t.StartTime.Before(st.StartTime)) {
		st.StartTime = t.StartTime
	}
	if t.EndTime.After(st.EndTime) {
		st.EndTime = t.EndTime
	}
	if !t.State.Final() || t.State == backends.Done {
		return
	}
	s.Failed = append(s.Failed, i)
	if t.State == backends.Failed && t.FailureCategory() != backends.CategoryInfrastructure {
		*infra = false
	}
	if t.ExitCode != nil && len(s.Codes) < maxArrayCodes {
		s.Codes[i] = *t.ExitCode
		if st.ExitCode == nil {
			c := *t.ExitCode
			st.ExitCode = &c
		}
	}
}

// maxArrayCodes bounds the exit codes a record keeps of an array.
const maxArrayCodes = 10

func (s *arraySummary) state() backends.State {
	c := s.Counts
	final := c[backends.Done] + c[backends.Failed] + c[backends.Killed] + c[backends.Unknown]
	switch {
	case final == s.Total && c[backends.Failed] > 0:
		return backends.Failed
	case final == s.Total && c[backends.Killed] > 0:
		return backends.Killed
	case final == s.Total && c[backends.Unknown] > 0:
		return backends.Unknown
	case final == s.Total:
		return backends.Done
	case c[backends.Running] > 0:
		return backends.Running
	case c[backends.Suspended] > 0:
		return backends.Suspended
	}
	return backends.Pending
}

// countsText is the counts by state, "DONE=950 FAILED=50", in the states'
// order, without zeros.
func (s arraySummary) countsText() string {
	var parts []string
	for _, st := range []backends.State{backends.Pending, backends.Running, backends.Suspended, backends.Done, backends.Failed, backends.Killed, backends.Unknown} {
		if n := s.Counts[st]; n > 0 {
			parts = append(parts, string(st)+"="+strconv.Itoa(n))
		}
	}
	return strings.Join(parts, " ")
}

// maxFailedText bounds the failed indexes a record keeps: ranges keep
// a contiguous failure short, and a scattered one is cut with a count.
const maxFailedText = 4096

// failedText is the failed indexes as ranges ("3,17-19"), which the array
// key takes as it is: a retry of only those.
func (s arraySummary) failedText() string {
	sort.Ints(s.Failed)
	t := backends.FormatRanges(backends.RangesOf(s.Failed))
	if len(t) <= maxFailedText {
		return t
	}
	cut := strings.LastIndexByte(t[:maxFailedText], ',')
	return t[:cut] + fmt.Sprintf(" (cut: %d failed in all)", len(s.Failed))
}

// codesText is the first failed tasks' exit codes, "4:3 17:1".
func (s arraySummary) codesText() string {
	idx := make([]int, 0, len(s.Codes))
	for i := range s.Codes {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	parts := make([]string, 0, len(idx))
	for _, i := range idx {
		parts = append(parts, fmt.Sprintf("%d:%d", i, s.Codes[i]))
	}
	return strings.Join(parts, " ")
}

// describe is the array's one-line account, for its status message.
func (s arraySummary) describe() string {
	msg := fmt.Sprintf("%d tasks: %s", s.Total, s.countsText())
	if len(s.Failed) > 0 {
		msg += "; not DONE: " + truncate(s.failedText(), 256)
		if c := s.codesText(); c != "" {
			msg += " (exit codes " + c + ")"
		}
	}
	return msg
}

// arrayHeartbeat is how often the step's log repeats an array's tasks by
// state while they stay as they are: a long array is never silent, and a
// quiet one costs one line a minute.
const arrayHeartbeat = time.Minute

// taskProgress says an array's tasks by state in the step's log ("3 done,
// 2 running, 5 pending"): when the counts change, else at most every
// arrayHeartbeat.
type taskProgress struct {
	text string    // the counts last said
	said time.Time // when
}

// sayTasks logs the array's tasks by state as its latest poll found them
// (see taskProgress); it says nothing of a job that is no array.
func (f *follower) sayTasks() {
	if a := f.r.arr; a != nil {
		a.progress.observe(a.summary(), time.Now(), f.log)
	}
}

func (p *taskProgress) observe(sum arraySummary, now time.Time, log *slog.Logger) {
	text := sum.progressText()
	if text == "" || text == p.text && now.Sub(p.said) < arrayHeartbeat {
		return
	}
	p.text, p.said = text, now
	log.Info("array tasks", "tasks", text, "of", sum.Total)
}

// progressText is the counts as a person reads them, ended tasks first:
// "3 done, 2 running, 5 pending".
func (s arraySummary) progressText() string {
	var parts []string
	for _, st := range []backends.State{backends.Done, backends.Failed, backends.Killed, backends.Unknown, backends.Running, backends.Suspended, backends.Pending} {
		if n := s.Counts[st]; n > 0 {
			parts = append(parts, strconv.Itoa(n)+" "+strings.ToLower(string(st)))
		}
	}
	return strings.Join(parts, ", ")
}
