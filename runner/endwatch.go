package runner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// endConfirmFor is how long the follow loop keeps asking the scheduler
// again, with short jittered delays, after a job announced its end while
// the scheduler still reports it running: slurmctld may learn of a batch
// script's exit a second or two after it. Past it, the normal polls go on
// (a marker alone never decides a state).
const endConfirmFor = 10 * time.Second

// endWatch runs a backend's WaitEnd (backends.EndWatcher) beside the
// follow loop's polls, from the first poll that saw the job until follow
// ends. When the job announces its end, the loop asks the scheduler at
// once, and again on a short back-off while the answer is not final.
type endWatch struct {
	ended   chan struct{} // closed when the job announced its end
	stop    context.CancelFunc
	until   time.Time      // the end of the confirmation's re-asks
	confirm record.Backoff // their delays
}

// endAnnounced returns the channel that is closed when the job announces
// its end, starting the watch the first time it is asked once the job was
// seen and is not final; nil (never ready) when the backend cannot watch.
// After it fired once the loop gets nil again: one announcement, one
// confirmation.
func (f *follower) endAnnounced() <-chan struct{} {
	e := &f.end
	ew, ok := f.be.(backends.EndWatcher)
	if e.stop == nil && ok && f.seen && !f.last.State.Final() {
		ctx, stop := context.WithCancel(f.sig)
		e.ended, e.stop = make(chan struct{}), stop
		go watchEnd(ctx, ew, f.id, e.ended, f.log)
	}
	return e.ended
}

// watchEnd waits for the job's end announcement and closes ended when it
// comes. A connection that fails is tried again on a jittered back-off; a
// job the backend cannot watch is left to the polls.
func watchEnd(ctx context.Context, ew backends.EndWatcher, id string, ended chan<- struct{}, log *slog.Logger) {
	retry := record.Backoff{Initial: faultRetryFirst, Max: faultRetryMax}
	for {
		err := ew.WaitEnd(ctx, id)
		switch {
		case err == nil:
			close(ended)
			return
		case ctx.Err() != nil:
			return
		case !errors.Is(err, backends.ErrTransient):
			log.Debug("the job's end is found by polling alone", "why", err)
			return
		}
		if !record.SleepCtx(ctx, retry.Next()) {
			return
		}
	}
}

// onEndAnnounced: the job says it ended; the scheduler is asked at once,
// and again soon while it does not agree (see recheckAt).
func (f *follower) onEndAnnounced() phase {
	f.end.ended = nil
	f.end.until = time.Now().Add(endConfirmFor)
	f.end.confirm = record.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Factor: 1.5, Jitter: 0.2}
	f.log.Debug("the job announced its end; asking the backend")
	f.force = true
	return phasePoll
}

// recheckAt is when the scheduler is asked again while it has not
// confirmed an announced end; ok is false outside that window.
func (e *endWatch) recheckAt(now time.Time) (time.Time, bool) {
	if e.until.IsZero() || !now.Before(e.until) {
		return time.Time{}, false
	}
	return now.Add(e.confirm.Next()), true
}

// stopWatching ends the watch (its remote command with it).
func (e *endWatch) stopWatching() {
	if e.stop != nil {
		e.stop()
	}
}
