package runner

import (
	"context"
	"errors"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// run is the state of one Run of an Invoker: the record as last seen, the
// status keys as last written, how much job output was copied, the S3
// client and the result. The embedded Invoker (defaults applied) is its
// fixed configuration; nothing in a run changes it.
type run struct {
	*Invoker

	rec     *Record             // the record as last seen; changed only by observe
	written map[string]string   // status keys as last written
	logOff  int64               // bytes of job output already copied to LogOut
	logSrc  backends.LogReader  // where the job's output is read from; nil if nowhere
	s3      *S3Store            // set when the job uses S3
	memo    backends.Rememberer // set when the backend remembers (memo.go)
	result  Result
	// offsetWritten is when logOff was last written to the record.
	offsetWritten time.Time

	// intentSeen is the submit intent of another invoker last seen, and
	// intentSeenAt when this process first saw it (see leaseLeft).
	intentSeen   string
	intentSeenAt time.Time
}

// observe makes rec the record as last seen. It is the one place that
// changes r.rec, and only the run's own goroutine calls it: the watch
// hands records over a channel (see observeWatched).
func (r *run) observe(rec *Record) { r.rec = rec }

// observeWatched takes a record the watch delivered, unless it is another
// record of the same name (deleted and created again since).
func (r *run) observeWatched(rec *Record) {
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
		if !errors.Is(err, ErrConflict) {
			return err
		}
		fresh, err := r.Store.Get(ctx)
		if err != nil {
			return err
		}
		r.observe(fresh)
	}
}
