// Package fake is an in-memory backend for tests, driven by each job's
// jobproperties (like nomad's mock driver) and by fault-injection hooks. It
// counts every call so tests can assert requests per job and exactly-once
// submission. It is not compiled into bridge-runner.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Properties drive a fake job's life: pending for Pending, running for Run,
// then Final (default DONE) with ExitCode.
type Properties struct {
	Pending  string `json:"pending"`
	Run      string `json:"run"`
	Final    string `json:"final"`
	ExitCode int    `json:"exitCode"`
	// Category is the final status's failure category (backends.Category).
	Category string `json:"category"`
	// FailIndexes are the tasks of an array that end FAILED with exit
	// code 3 (the others end as Final says).
	FailIndexes []int `json:"failIndexes"`
}

// Job is one submitted fake job.
type Job struct {
	ID, Key   string
	Submitted time.Time
	Pending   time.Duration
	Run       time.Duration
	Final     backends.State
	ExitCode  int
	Category  backends.Category
	Cancelled *time.Time
	Vanished  bool // Status says not found
}

// Backend is the fake. The zero value is not usable; use New.
type Backend struct {
	mu   sync.Mutex
	jobs map[string]*Job
	// arrays are the submitted arrays by id (SubmitArray).
	arrays map[string]fakeArray
	next   int
	Calls  map[string]int // "submit", "status", "cancel", "find"

	// ArrayMax, when set, is the fake cluster's array limit (ArrayLimit):
	// SubmitArray refuses an index at or past it, as Slurm's MaxArraySize.
	ArrayMax int
	// SubmitDelay is slept inside Submit (to widen race windows).
	SubmitDelay time.Duration
	// SubmitFaults are returned by the next Submit calls, in order, before
	// any job is made.
	SubmitFaults []error
	// LoseResponses makes the next N submits create the job but return a
	// transient error, as when a response is lost on the wire.
	LoseResponses int
	// InfraFailures makes the next N submitted jobs end FAILED with the
	// category infrastructure (raw NODE_FAIL), whatever their properties
	// say: a node failure that a later attempt does not meet.
	InfraFailures int
	// BatchFault and BatchHold shape StatusMany (see there; set with SetBatch).
	BatchFault error
	BatchHold  bool
	// StatusFaults are returned by the next Status calls, in order.
	StatusFaults []error
	// StartOnCancel and CancelIfPendingFaults shape CancelIfPending.
	StartOnCancel         bool
	CancelIfPendingFaults []error
	// down: every call fails as with a backend out of reach (see SetDown).
	down bool
	// LoadCountsJobs makes ProbeLoad count the fake's own jobs not yet
	// over into the load SetLoad gave, a CPU each (free CPUs first, then
	// pending jobs), as a real scheduler's figures show the jobs placed on
	// it: a probe taken again after a burst's placements sees them.
	LoadCountsJobs bool
	// load and probeFault shape ProbeLoad (see SetLoad).
	load       *backends.Load
	probeFault error
	now        func() time.Time
}

// errDown is what calls return while the fake is down; its text stands for
// a server's, which must not reach a record or an output.
var errDown = backends.Transient(fmt.Errorf("fake: connection refused (server text 5ecret-detail)"))

// SetDown makes every call fail with a transient error from now on (down),
// or work again: an outage of the backend.
func (b *Backend) SetDown(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
}

// New returns an empty fake.
func New() *Backend {
	return &Backend{jobs: map[string]*Job{}, Calls: map[string]int{}, now: time.Now}
}

// Factory returns a registry factory that always yields b.
func (b *Backend) Factory() backends.Factory {
	return func(backends.Config) (backends.Backend, error) { return b, nil }
}

// Close counts its calls: the runner closes every backend it built.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Calls["close"]++
	return nil
}

// Jobs returns a snapshot of the submitted jobs.
func (b *Backend) Jobs() []Job {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Job, 0, len(b.jobs))
	for i := 1; i <= b.next; i++ {
		if j, ok := b.jobs[fmt.Sprintf("fake-%d", i)]; ok {
			out = append(out, *j)
		}
	}
	return out
}

// Count returns the number of calls of op.
func (b *Backend) Count(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Calls[op]
}

// Vanish makes the job unknown to Status from now on.
func (b *Backend) Vanish(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.jobs[id].Vanished = true
}

func (b *Backend) Validate(job backends.Job) error {
	_, err := parse(job.Properties)
	return err
}

func parse(raw json.RawMessage) (Properties, error) {
	var p Properties
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return p, backends.Invalid("jobproperties", "%v", err)
		}
	}
	for _, d := range []string{p.Pending, p.Run} {
		if d != "" {
			if _, err := time.ParseDuration(d); err != nil {
				return p, backends.Invalid("jobproperties", "%v", err)
			}
		}
	}
	if p.Final != "" && !backends.State(p.Final).Final() {
		return p, backends.Invalid("jobproperties", "final %q is not a final state", p.Final)
	}
	return p, nil
}

func dur(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

func (b *Backend) Submit(ctx context.Context, job backends.Job) (string, error) {
	b.mu.Lock()
	b.Calls["submit"]++
	delay := b.SubmitDelay
	b.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return "", backends.Transient(ctx.Err())
		}
	}
	p, err := parse(job.Properties)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.SubmitFaults) > 0 {
		err := b.SubmitFaults[0]
		b.SubmitFaults = b.SubmitFaults[1:]
		return "", err
	}
	b.next++
	j := &Job{ID: fmt.Sprintf("fake-%d", b.next), Key: job.Key, Submitted: b.now(),
		Pending: dur(p.Pending), Run: dur(p.Run), Final: backends.State(p.Final), ExitCode: p.ExitCode, Category: backends.Category(p.Category)}
	if j.Final == "" {
		j.Final = backends.Done
	}
	if b.InfraFailures > 0 {
		b.InfraFailures--
		j.Final, j.Category = backends.Failed, backends.CategoryInfrastructure
	}
	b.jobs[j.ID] = j
	if b.LoseResponses > 0 {
		b.LoseResponses--
		return "", backends.Transient(fmt.Errorf("fake: response lost"))
	}
	return j.ID, nil
}

func (b *Backend) Status(_ context.Context, id string) (backends.Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Calls["status"]++
	if b.down {
		return backends.Status{}, errDown
	}
	if len(b.StatusFaults) > 0 {
		err := b.StatusFaults[0]
		b.StatusFaults = b.StatusFaults[1:]
		return backends.Status{}, err
	}
	return b.statusLocked(id)
}

// StatusMany is the batched query (backends.StatusBatcher), counted as
// "statusmany". BatchFault, when set, is what every call returns; a call
// while BatchHold is set waits until it is cleared (a frozen watcher).
func (b *Backend) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	for {
		b.mu.Lock()
		if !b.BatchHold {
			break
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer b.mu.Unlock()
	b.Calls["statusmany"]++
	if b.down {
		return nil, errDown
	}
	if b.BatchFault != nil {
		return nil, b.BatchFault
	}
	out := make(map[string]backends.Status, len(ids))
	for _, id := range ids {
		if st, err := b.statusLocked(id); err == nil {
			out[id] = backends.Status{State: st.State, Raw: st.Raw}
		}
	}
	return out, nil
}

// SetBatch sets the batched query's fault and hold (see StatusMany).
func (b *Backend) SetBatch(fault error, hold bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.BatchFault, b.BatchHold = fault, hold
}

func (b *Backend) statusLocked(id string) (backends.Status, error) {
	j, ok := b.jobs[id]
	if !ok || j.Vanished {
		return backends.Status{}, fmt.Errorf("fake job %s: %w", id, backends.ErrNotFound)
	}
	now := b.now()
	st := backends.Status{SubmitTime: j.Submitted}
	startAt, endAt := j.Submitted.Add(j.Pending), j.Submitted.Add(j.Pending+j.Run)
	switch {
	case j.Cancelled != nil:
		st.State, st.Raw, st.EndTime = backends.Killed, "CANCELLED", *j.Cancelled
	case now.Before(startAt):
		st.State, st.Raw = backends.Pending, "QUEUED"
	case now.Before(endAt):
		st.State, st.Raw, st.StartTime = backends.Running, "RUNNING", startAt
	default:
		code := j.ExitCode
		st.State, st.Raw, st.StartTime, st.EndTime, st.ExitCode = j.Final, "END_"+string(j.Final), startAt, endAt, &code
		st.Category = j.Category
		if j.Category == backends.CategoryInfrastructure {
			st.Raw = "NODE_FAIL"
		}
	}
	return st, nil
}

func (b *Backend) Cancel(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Calls["cancel"]++
	if b.down {
		return errDown
	}
	j, ok := b.jobs[id]
	if !ok {
		return fmt.Errorf("fake job %s: %w", id, backends.ErrNotFound)
	}
	now := b.now()
	if j.Cancelled == nil && now.Before(j.Submitted.Add(j.Pending+j.Run)) {
		j.Cancelled = &now
	}
	return nil
}

func (b *Backend) FindByKey(_ context.Context, key string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Calls["find"]++
	if b.down {
		return "", errDown
	}
	for _, j := range b.jobs {
		if j.Key == key {
			return j.ID, nil
		}
	}
	return "", nil
}

// WithoutFinder hides FindByKey, for tests of backends that cannot find
// jobs by key.
func WithoutFinder(b *Backend) backends.Backend { return plain{b} }

type plain struct{ b *Backend }

func (p plain) Submit(ctx context.Context, j backends.Job) (string, error) { return p.b.Submit(ctx, j) }
func (p plain) Status(ctx context.Context, id string) (backends.Status, error) {
	return p.b.Status(ctx, id)
}
func (p plain) Cancel(ctx context.Context, id string) error { return p.b.Cancel(ctx, id) }

// SubmitArray submits the array as one fake job whose tasks share its
// timing (counted as a "submit"); FailIndexes pick the tasks that fail.
func (b *Backend) SubmitArray(ctx context.Context, job backends.Job, a backends.Array) (string, error) {
	b.mu.Lock()
	l := b.ArrayMax
	b.mu.Unlock()
	if l > 0 && a.Max() >= l {
		return "", backends.Invalid("array", "index %d is past the fake's limit, %d", a.Max(), l)
	}
	id, err := b.Submit(ctx, job)
	if err != nil {
		return id, err
	}
	p, _ := parse(job.Properties)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.arrays == nil {
		b.arrays = map[string]fakeArray{}
	}
	b.arrays[id] = fakeArray{arr: a, fail: p.FailIndexes}
	return id, nil
}

// ArrayLimit is ArrayMax (backends.ArrayLimiter).
func (b *Backend) ArrayLimit(context.Context) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Calls["arraylimit"]++
	return b.ArrayMax, nil
}

// Arrays are the submitted arrays by id, as SubmitArray got them.
func (b *Backend) Arrays() map[string]backends.Array {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]backends.Array{}
	for id, fa := range b.arrays {
		out[id] = fa.arr
	}
	return out
}

type fakeArray struct {
	arr  backends.Array
	fail []int
}

// ArrayStatus reports every task of the array (counted as "arraystatus").
func (b *Backend) ArrayStatus(_ context.Context, id string) (map[int]backends.Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Calls["arraystatus"]++
	if b.down {
		return nil, errDown
	}
	fa, ok := b.arrays[id]
	if !ok {
		return nil, fmt.Errorf("fake array %s: %w", id, backends.ErrNotFound)
	}
	base, err := b.statusLocked(id)
	if err != nil {
		return nil, err
	}
	out := map[int]backends.Status{}
	for _, r := range fa.arr.Ranges {
		for i := r.First; i <= r.Last; i++ {
			t := base
			if base.State == backends.Done && slices.Contains(fa.fail, i+fa.arr.Offset) { // the index its script sees
				code := 3
				t.State, t.Raw, t.ExitCode = backends.Failed, "END_FAILED", &code
			}
			out[i] = t
		}
	}
	return out, nil
}

// SetLoad sets what ProbeLoad reports (nil: every count unknown) and the
// error it returns instead (nil: none).
func (b *Backend) SetLoad(l *backends.Load, fault error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.load, b.probeFault = l, fault
}

// ProbeLoad reports the load SetLoad gave, counted as "probe"; the job's
// properties must be the fake's (as Submit reads them).
func (b *Backend) ProbeLoad(_ context.Context, job backends.Job, _ *backends.Array) (backends.Load, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Calls["probe"]++
	if b.down {
		return backends.Load{}, errDown
	}
	if _, err := parse(job.Properties); err != nil {
		return backends.Load{}, err
	}
	if b.probeFault != nil {
		return backends.Load{}, b.probeFault
	}
	if b.load == nil {
		return backends.UnknownLoad("fake"), nil
	}
	l := *b.load
	if b.LoadCountsJobs {
		for _, j := range b.jobs {
			if j.Cancelled != nil || !b.now().Before(j.Submitted.Add(j.Pending+j.Run)) {
				continue
			}
			if l.FreeCPUs > 0 {
				l.FreeCPUs--
			} else {
				l.PendingJobs++
			}
		}
	}
	return l, nil
}

// CancelIfPending cancels the job only if it has not started
// (backends.PendingCanceller), counted as "cancelifpending", atomically
// under the fake's lock as a scheduler's hold is. StartOnCancel starts a
// pending job just before (the job starting while the cancel is in
// flight); CancelIfPendingFaults are returned by the next calls, in order.
func (b *Backend) CancelIfPending(_ context.Context, id string) (backends.PendingCancel, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Calls["cancelifpending"]++
	if b.down {
		return backends.PendingCancel{}, errDown
	}
	if len(b.CancelIfPendingFaults) > 0 {
		err := b.CancelIfPendingFaults[0]
		b.CancelIfPendingFaults = b.CancelIfPendingFaults[1:]
		return backends.PendingCancel{}, err
	}
	j, ok := b.jobs[id]
	if !ok {
		return backends.PendingCancel{}, fmt.Errorf("fake job %s: %w", id, backends.ErrNotFound)
	}
	now := b.now()
	if b.StartOnCancel && j.Cancelled == nil && now.Before(j.Submitted.Add(j.Pending)) {
		j.Pending = now.Sub(j.Submitted)
	}
	if j.Cancelled == nil && now.Before(j.Submitted.Add(j.Pending)) {
		j.Cancelled = &now
	}
	st, _ := b.statusLocked(id)
	if j.Cancelled != nil && j.Cancelled.Before(j.Submitted.Add(j.Pending)) {
		return backends.PendingCancel{Cancelled: true, Last: st, Evidence: "fake job " + id + " cancelled while QUEUED"}, nil
	}
	return backends.PendingCancel{Last: st, Evidence: "fake job " + id + " is " + st.Raw}, nil
}
