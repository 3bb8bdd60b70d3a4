package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// Cleaner runs the cleanup step: cancel the remote job if it may still be
// running, then delete the record. Every part is idempotent, so cleanup can
// run in onExit whatever happened before, and again.
//
// It never lies about the job and never loses it: the record is deleted only
// once its job is known to have ended, or the backend accepted its cancel,
// or nothing was ever submitted from it (or with Force). Otherwise the record
// stays, with kill=true, for a retry of cleanup or invoke to finish the
// cancel, and Run returns the error (exit 75 when it is temporary).
//
// cleanup reads the record, chooses and builds the backend, finds a job by
// its idempotency key and writes the record with the very code invoke uses
// (a run): a record IBM's operator wrote (no backend key) is cleaned up as
// invoke would follow it.
type Cleaner struct {
	Store    record.Store
	Registry *backends.Registry
	Backend  backends.Config
	Log      *slog.Logger
	// RetryBudget bounds retries of transient faults.
	RetryBudget time.Duration
	// Wait is how long a live invoker is given to report the cancellation
	// (it writes KILLED) before the record is deleted.
	Wait time.Duration
	// SubmitLease is how long a live invoker's submit intent is waited out
	// before cleanup concludes that nothing was submitted (see adopt).
	SubmitLease time.Duration
	// BackendChoice is the backend given on the command line or in the
	// environment, as invoke's (see SelectBackend).
	BackendChoice string
	// Owner names the task this cleanup runs for (StepOwner); a record
	// another run owns is left alone (see owns). Empty: outside a pod, where
	// cleanup is a person's explicit command: no check.
	Owner string
	// AnyOwner acts on the record whoever owns it.
	AnyOwner bool
	// Force deletes the record even when its job's end could not be
	// confirmed (the job may run on untracked).
	Force bool
}

// CleanupResult is what cleanup did and why: the step's JSON summary.
type CleanupResult struct {
	Record string `json:"record"`
	// ID is the remote job's id, when the record names one or one was found
	// by the idempotency key.
	ID string `json:"id,omitempty"`
	// Cancelled: the backend accepted the cancel request of this cleanup.
	Cancelled bool `json:"cancelled"`
	// Deleted: this cleanup deleted the record.
	Deleted bool `json:"deleted"`
	// Owner is the record's owner when it is not this cleanup's run (the
	// record was left alone).
	Owner string `json:"owner,omitempty"`
	// Reason says, in bridge-runner's words, why the record was deleted or
	// kept.
	Reason string `json:"reason"`
}

// errNotOwned stops cleanup at a record another run owns.
var errNotOwned = errors.New("another run owns the record")

// forceDeleteWait bounds the record's deletion by --force after the retry
// budget was spent on the job.
const forceDeleteWait = 5 * time.Second

// Run performs cleanup and reports what it did. An error means the record
// was kept (unless Force) and the job's fate is not settled.
func (c *Cleaner) Run(ctx context.Context) (*CleanupResult, error) {
	iv := &Invoker{Store: c.Store, Registry: c.Registry, Backend: c.Backend, Log: c.Log, RetryBudget: c.RetryBudget,
		SubmitLease: c.SubmitLease, BackendChoice: c.BackendChoice, StatusKeys: record.StatusKeysOurs} // reads IBM's KILL as KILLED
	r := &run{Invoker: iv.withDefaults()}
	res := &CleanupResult{Record: r.Store.Describe()}
	bctx, cancel := withBudget(ctx, r.RetryBudget) // a ceiling on all of it
	defer cancel()
	err := c.reconcile(bctx, r, res)
	switch {
	case errors.Is(err, errNotOwned):
		r.Log.Warn("the record belongs to another run; not cancelling or deleting anything", "record", res.Record, "owner", res.Owner, "this_run", c.Owner)
		return res, nil
	case err != nil && c.Force:
		r.Log.Warn("deleting the record though its job's end is not confirmed (--force); the job may run on untracked", "job_id", res.ID, "err", err)
		res.Reason = "deleted by --force, though " + res.Reason
		// The budget may be spent: the delete gets a few seconds of its own.
		dctx, cancel := context.WithTimeout(ctx, forceDeleteWait)
		defer cancel()
		return res, c.delete(dctx, r, res)
	case err != nil:
		r.Log.Warn("the record stays: its job's end is not confirmed", "record", res.Record, "job_id", res.ID, "err", err)
	}
	return res, err
}

// reconcile settles the job's fate and deletes the record once it is known.
// On an error res.Reason says why the record stays.
func (c *Cleaner) reconcile(ctx context.Context, r *run, res *CleanupResult) error {
	err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error {
		rec, err := r.Store.Get(ctx)
		if err == nil {
			r.observe(rec)
		}
		return err
	})
	if errors.Is(err, record.ErrNoRecord) {
		res.Reason = "there is no record: nothing to clean up"
		r.Log.Info(res.Reason, "record", res.Record)
		return nil
	}
	if err != nil {
		res.Reason = "the record could not be read"
		return fmt.Errorf("reading %s: %w", res.Record, err)
	}
	res.ID = r.rec.Data[record.KeyID]
	if err := c.owns(r.rec.Data, res); err != nil {
		return err
	}
	if st := backends.State(r.rec.Data[record.KeyJobStatus]); jobEnded(st) {
		res.Reason = fmt.Sprintf("the job had ended (%s)", st)
		return c.deleteEnded(ctx, r, res)
	}
	if err := c.requestKill(ctx, r, res); err != nil || res.Reason != "" {
		return err
	}
	if r.rec.Data[record.KeyID] == "" && r.rec.Data[record.KeyIntent] == "" {
		// kill=true is in: no invoker will submit from this record now.
		res.Reason = "nothing was submitted from the record"
		return c.delete(ctx, r, res)
	}
	return c.cancel(ctx, r, res)
}

// jobEnded: the backend reported the job's end. UNKNOWN is final for invoke
// but says nothing about the job, which may run on: cleanup cancels it.
func jobEnded(st backends.State) bool {
	return st.Final() && st != backends.Unknown
}

// owns checks that the record is this run's (or nobody's); see RunOf.
func (c *Cleaner) owns(d map[string]string, res *CleanupResult) error {
	cur := d[record.KeyOwner]
	if c.Owner == "" || c.AnyOwner || cur == "" || RunOf(cur) == RunOf(c.Owner) {
		return nil
	}
	res.Owner = cur
	res.Reason = fmt.Sprintf("the record belongs to another run (%s), not to this one (%s): its job was neither cancelled nor the record deleted; "+
		"if that run is gone, run cleanup with --any-owner", RunOf(cur), RunOf(c.Owner))
	return errNotOwned
}

// RunOf is the run part of a task's owner (StepOwner): the Argo Workflow
// without its node, the Job without its completion index. cleanup runs in
// the same run as invoke (an exit handler, a later step) but in another
// task, so ownership is checked per run.
func RunOf(owner string) string {
	for _, sep := range []string{" node ", " index "} {
		if i := strings.LastIndex(owner, sep); i >= 0 {
			owner = owner[:i]
		}
	}
	return owner
}

// requestKill sets kill=true in the record, so that a live invoker cancels
// the job and reports KILLED, and no invoker submits from it any more. The
// owner is checked again in the same write. When the record is gone or its
// job ended meanwhile, res.Reason says so and there is nothing more to do.
func (c *Cleaner) requestKill(ctx context.Context, r *run, res *CleanupResult) error {
	err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error {
		return r.update(ctx, func(d map[string]string) (bool, error) {
			if err := c.owns(d, res); err != nil {
				return false, err
			}
			if jobEnded(backends.State(d[record.KeyJobStatus])) {
				return false, nil
			}
			return record.Set(d, record.KeyKill, "true"), nil
		})
	})
	switch {
	case errors.Is(err, record.ErrNoRecord):
		res.Reason = "the record was deleted meanwhile"
		return nil
	case err != nil:
		if res.Reason == "" {
			res.Reason = "kill=true could not be written to the record"
		}
		return fmt.Errorf("setting kill=true in %s: %w", res.Record, err)
	}
	if st := backends.State(r.rec.Data[record.KeyJobStatus]); jobEnded(st) {
		res.Reason = fmt.Sprintf("the job had ended (%s)", st)
		return c.deleteEnded(ctx, r, res)
	}
	return nil
}

// cancel cancels the job the record names, or the one its idempotency key
// finds, with the backend invoke would use; then deletes the record.
func (c *Cleaner) cancel(ctx context.Context, r *run, res *CleanupResult) error {
	desc, err := r.description(ctx)
	if err != nil {
		res.Reason = "the record's backend could not be chosen or its job description is invalid, so its job could not be cancelled"
		return err
	}
	be, err := r.newBackend(desc)
	if err != nil {
		res.Reason = "the backend could not be set up, so the job could not be cancelled"
		return err
	}
	defer closeBackend(be, r.Log)
	if err := checkRecordedID(r.rec); err != nil {
		res.Reason = "the record's id is not the job it submitted; nothing was cancelled" // never cancel another job
		return err
	}
	id := r.rec.Data[record.KeyID]
	if id == "" {
		if id, err = c.adopt(ctx, r, be); err != nil {
			res.Reason = "a job may have been submitted (a submit intent is recorded), but looking for it by its idempotency key failed"
			return err
		}
		if id == "" {
			res.Reason = "nothing was submitted: no job carries the record's idempotency key"
			return c.delete(ctx, r, res)
		}
	}
	res.ID = id
	ended, err := c.cancelJob(ctx, r, be, id, res)
	if err != nil {
		return err
	}
	if !ended {
		awaitInvoker(ctx, r, c.Wait)
	}
	if err := c.delete(ctx, r, res); err != nil {
		return err
	}
	forget(ctx, be, id, c.Wait, r.Log)
	return nil
}

// adopt finds the job of a record with a submit intent and no id, as invoke
// does when it takes over another invoker's intent: by the idempotency key,
// waiting out a live holder's lease; a job it finds is recorded at once.
func (c *Cleaner) adopt(ctx context.Context, r *run, be backends.Backend) (string, error) {
	finder, _ := be.(backends.Finder)
	if finder == nil {
		return "", backends.Invalid("backend", "cannot look for jobs by key, so the job a submit intent stands for cannot be found; cancel it by hand, then run cleanup with --force")
	}
	// The intent is the current attempt's, so is the key it submits with.
	key := jobKey(r.rec.UID, r.rec.Data)
	find := func(ctx context.Context) (string, error) { return r.findByKey(ctx, finder, key) }
	watch, stop := r.watchRecord(ctx)
	defer stop()
	for {
		if id := r.rec.Data[record.KeyID]; id != "" {
			return id, checkRecordedID(r.rec) // recorded meanwhile by a live invoker
		}
		cur, ok := parseIntent(r.rec.Data[record.KeyIntent])
		if !ok {
			id, err := find(ctx)
			return r.adopted(ctx, id, key, err)
		}
		id, waited, err := r.othersIntent(ctx, cur, find, watch, r.Log)
		if err != nil || id != "" || !waited {
			return r.adopted(ctx, id, key, err)
		}
	}
}

// adopted records the id of a job found by key.
func (r *run) adopted(ctx context.Context, id, key string, err error) (string, error) {
	if err != nil || id == "" {
		return "", err
	}
	r.Log.Info("found the job by its idempotency key", "job_id", id, "key", key)
	return id, r.recordID(ctx, id, nil)
}

// cancelJob asks the backend to cancel job id. ended reports that the
// backend no longer knows the job or reports its end; otherwise the backend
// accepted the cancel request. A cancel that was not accepted is an error:
// the job may run on.
func (c *Cleaner) cancelJob(ctx context.Context, r *run, be backends.Backend, id string, res *CleanupResult) (ended bool, err error) {
	err = retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error { return be.Cancel(ctx, id) })
	if err == nil {
		res.Cancelled = true
		res.Reason = fmt.Sprintf("the backend accepted the cancel of job %s", id)
		r.Log.Info("cancelled the remote job", "job_id", id)
		return false, nil
	}
	if errors.Is(err, backends.ErrNotFound) {
		res.Reason = fmt.Sprintf("the backend no longer knows job %s: it has ended", id)
		return true, nil
	}
	// Some backends refuse to cancel a job that has ended: ask.
	st, serr := be.Status(ctx, id)
	switch {
	case serr == nil && jobEnded(st.State):
		res.Reason = fmt.Sprintf("job %s had ended (%s)", id, st.State)
		return true, nil
	case errors.Is(serr, backends.ErrNotFound):
		res.Reason = fmt.Sprintf("the backend no longer knows job %s: it has ended", id)
		return true, nil
	}
	r.Log.Warn("the backend did not accept the cancel", "job_id", id, "err", err)
	res.Reason = fmt.Sprintf("the cancel of job %s was not accepted (the backend did not answer or refused); kill=true stays in the record, "+
		"and a retry of cleanup or invoke finishes the cancel", id)
	if errors.Is(err, backends.ErrTransient) {
		return false, backends.Transient(errors.New(res.Reason))
	}
	return false, errors.New(res.Reason)
}

// delete deletes the record.
func (c *Cleaner) delete(ctx context.Context, r *run, res *CleanupResult) error {
	err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error { return r.Store.Delete(ctx) })
	if err != nil {
		res.Reason += "; the record could not be deleted"
		return fmt.Errorf("deleting %s: %w", res.Record, err)
	}
	res.Deleted = true
	r.Log.Info("deleted", "record", res.Record, "why", res.Reason)
	collectLease(ctx, r)
	return nil
}

// collectLease deletes the lease of the deleted record's watch group if it
// has lapsed (see watcher.CollectLease: a held lease is watched up to a
// TTL by this process's clock), so that a group whose last watcher died
// leaves no ConfigMap behind for good.
func collectLease(ctx context.Context, r *run) {
	cs, group := record.ConfigMapOf(r.Store), r.rec.Data[record.KeyWatchGroup]
	if cs == nil {
		return
	}
	name, collected, err := watcher.CollectLease(ctx, cs, group)
	switch {
	case err != nil:
		r.Log.Debug("looking at the watch group's lease", "configmap", name, "err", err)
	case collected:
		r.Log.Info("deleted the watch group's lapsed lease", "configmap", name)
	}
}

// deleteEnded deletes the record of a job that has ended, then lets its
// backend drop what it keeps of the job on this side. The record names its
// backend (invoke wrote it), so nothing is chosen or written again.
func (c *Cleaner) deleteEnded(ctx context.Context, r *run, res *CleanupResult) error {
	if err := c.delete(ctx, r, res); err != nil {
		return err
	}
	id := r.rec.Data[record.KeyID]
	desc, err := record.DescribeRecord(r.rec.Data)
	if id == "" || err != nil {
		return nil
	}
	be, err := r.newBackend(desc)
	if err != nil {
		r.Log.Debug("the job's backend could not be set up to drop its files", "err", err)
		return nil
	}
	defer closeBackend(be, r.Log)
	forget(ctx, be, id, c.Wait, r.Log)
	return nil
}

// awaitInvoker gives a live invoker up to wait to record the final state, so
// it is not left writing to a deleted record.
func awaitInvoker(ctx context.Context, r *run, wait time.Duration) {
	if wait <= 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	watch, stop := r.watchRecord(wctx)
	defer stop()
	for rec := range watch {
		if backends.State(rec.Data[record.KeyJobStatus]).Final() {
			return
		}
	}
}

// forget lets the backend drop what it keeps of the ended job on this side
// (the local backend's job directory), giving a cancelled job up to wait to
// stop. What stays is logged: the record is gone already.
func forget(ctx context.Context, be backends.Backend, id string, wait time.Duration, log *slog.Logger) {
	f, ok := be.(backends.Forgetter)
	if !ok {
		return
	}
	end := time.Now().Add(max(wait, time.Second))
	b := record.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for {
		err := f.Forget(ctx, id)
		if err == nil {
			return
		}
		if time.Now().After(end) || !record.SleepCtx(ctx, b.Next()) {
			log.Warn("the job's files stay", "job_id", id, "err", err)
			return
		}
	}
}
