// Package runner implements bridge-runner's three steps (create-configmap,
// invoke, cleanup): the invoke state machine, the poll policy, S3 staging,
// credentials and step outputs. The record's contract (description, keys,
// states, stores) is package record's.
package runner

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// run is the state of one Run of an Invoker: the record as last seen, the
// status keys as last written, how much job output was copied, the S3
// client and the result. The embedded Invoker (defaults applied) is its
// fixed configuration; nothing in a run changes it.
type run struct {
	*Invoker

	rec     *record.Record      // the record as last seen; changed only by observe
	written map[string]string   // status keys as last written
	logOff  int64               // bytes of job output already copied to LogOut
	logSrc  backends.LogReader  // where the job's output is read from; nil if nowhere
	s3      *S3Store            // set when the job uses S3
	memo    backends.Rememberer // set when the backend remembers (memo.go)
	w       *watcher.Member     // set when the cluster's watcher applies (watchseam.go)
	arr     *arrayBackend       // set when the job is an array (array.go)
	result  Result
	// offsetWritten is when logOff was last written to the record.
	offsetWritten time.Time
	// reqBase is the record's backend request counts before this invoke
	// (nil until the first status write; see backendRequests).
	reqBase map[string]int64

	// placing is set in invoke: a job with targets and no placement yet is
	// placed (placement.go); cleanup never places.
	placing bool

	// foreign is set when another task owns the record (claim): this run
	// then writes nothing into it, not even the reason it was refused.
	foreign bool

	// intentSeen is the submit intent of another invoker last seen, and
	// intentSeenAt when this process first saw it (see leaseLeft).
	intentSeen   string
	intentSeenAt time.Time
	// ownIntent is the submit intent this invoke created the record with
	// (createRecord), and ownIntentAt when it did: empty once used or when
	// the record was not ours to create.
	ownIntent   string
	ownIntentAt time.Time

	// graceEnd is when invoke must be done after SIGTERM (unix ns; zero
	// until invoke first sees its context end): see stopping.
	graceEnd atomic.Int64

	// agentView follows the heartbeat of the cluster the record names from
	// before the submit (watchagent.go) until the watch member takes it.
	agentView *watcher.HeartbeatView
	// agentCluster is the cluster agentView follows the agent of (its
	// watch group's digest, slow on purpose, is made once).
	agentCluster cluster.Cluster
	// early is the view started while the record was created, until
	// followAgent takes it (watchseam.go).
	early *earlyView
	// submittedAt is when this invoke submitted its job (zero when it
	// re-attached or adopted one): the job is known to be PENDING then.
	submittedAt time.Time
}

// graceReserve is the part of the grace period kept for recording the
// outcome after the wait for the backend's cancel confirmation: a fifth of
// it, at most 5 s.
func (r *run) graceReserve() time.Duration { return min(5*time.Second, r.Grace/5) }

// graceDeadline is when invoke must have written its outputs after SIGTERM:
// Grace after it first saw its context end; zero while the context lasts.
func (r *run) graceDeadline(ctx context.Context) time.Time {
	if ctx.Err() == nil {
		return time.Time{}
	}
	r.graceEnd.CompareAndSwap(0, time.Now().Add(r.Grace).UnixNano())
	return time.Unix(0, r.graceEnd.Load())
}

// stopping returns the context for work that must go on after SIGTERM
// (recording the outcome, uploading outputs): it is not cancelled by the
// signal, but after SIGTERM it ends at the grace deadline, so that invoke
// writes its outputs and exits within the grace period even when the
// Kubernetes API does not answer; what did not land is left to the next
// invoke or cleanup. Before SIGTERM it ends after d (0: no limit).
func (r *run) stopping(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	wctx := context.WithoutCancel(ctx)
	if end := r.graceDeadline(ctx); !end.IsZero() {
		return context.WithDeadline(wctx, end)
	}
	if d > 0 {
		return context.WithTimeout(wctx, d)
	}
	return context.WithCancel(wctx)
}

// withinGrace runs fn, work after the job's end that talks to the
// Kubernetes API under timeouts of its own (the watcher's handover). Once
// SIGTERM came, it is waited for only until the grace deadline and then
// left behind: invoke must write its outputs and exit within the grace
// period whatever is dark, and the next invoke or cleanup, or the lease's
// expiry, mends what did not land.
func (r *run) withinGrace(ctx context.Context, what string, fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(time.Until(r.graceDeadline(ctx)))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.Log.Warn(what+" did not finish within the grace period; left undone", "grace", r.Grace)
	}
}

// observe makes rec the record as last seen. It is the one place that
// changes r.rec, and only the run's own goroutine calls it: the watch
// hands records over a channel (see observeWatched).
func (r *run) observe(rec *record.Record) { r.rec = rec }

// watchCarried follows the record in the watch of the early heartbeat
// view, which follows both by their label (one request where two
// watches were two); nil when there is none or it cannot carry the
// record (see watcher.HeartbeatView.Carry).
func (r *run) watchCarried(ctx context.Context) <-chan *record.Record {
	cs := record.ConfigMapOf(r.Store)
	if r.early == nil || cs == nil {
		return nil
	}
	ch, ok := r.early.v.Carry(ctx, cs, r.rec)
	if !ok {
		return nil
	}
	return ch
}

// observeWatched takes a record the watch delivered, unless it is another
// record of the same name (deleted and created again since).
func (r *run) observeWatched(rec *record.Record) {
	if rec.UID == r.rec.UID {
		r.observe(rec)
	}
}

// update applies mutate to the latest record and writes it, re-reading and
// re-applying on conflict. mutate reports whether it changed anything.
func (r *run) update(ctx context.Context, mutate func(d map[string]string) (bool, error)) error {
	for {
		next := r.rec.Clone()
		changed, err := mutate(next.Data)
		if err != nil || !changed {
			return err
		}
		r.keepMemo(next.Data)
		rec, err := r.Store.Update(ctx, next)
		if err == nil {
			r.observe(rec)
			return nil
		}
		if !errors.Is(err, record.ErrConflict) {
			return err
		}
		fresh, err := r.Store.Get(ctx)
		if err != nil {
			return err
		}
		r.observe(fresh)
	}
}

// watchRecord starts following the record and returns the channel with a
// stop that returns only once the watch has ended. A file store's watch
// takes the record's lock to read it: one left running past its run would
// make the lock file (and its directory) again after cleanup deleted them.
func (r *run) watchRecord(ctx context.Context) (<-chan *record.Record, func()) {
	wctx, cancel := context.WithCancel(ctx)
	ch := r.watchCarried(wctx)
	if ch == nil {
		ch = r.Store.Watch(wctx, r.rec)
	}
	return ch, func() {
		cancel()
		for range ch { // until the watch's goroutine closes it
		}
	}
}
