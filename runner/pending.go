package runner

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// pendingHeartbeat is how often the step's log says that the job still
// waits to start, with the scheduler's reason and how long it has waited:
// a job that can never start (Slurm's PartitionConfig, BadConstraints, ...)
// would otherwise sit silent for ever.
const pendingHeartbeat = time.Minute

// noReason is the reason logged for a wait the scheduler gives none for.
const noReason = "none given"

// pendingQuiet is how long a wait the scheduler gives no reason for goes
// unsaid: a job started at once (the local backend's first poll, a free
// cluster) is no news; one still waiting after it is. A job with a
// pendingLimit has its wait said from the start.
const pendingQuiet = 10 * time.Second

// pendingWatch follows how long the job has waited to start, says so in
// the log, and ends the wait at the job's pendingLimit.
type pendingWatch struct {
	limit  time.Duration // 0: none
	since  time.Time     // when the current wait began; zero while not pending
	said   time.Time     // the last heartbeat
	reason string        // the reason the last heartbeat gave
	// left: the job was seen in another state (a requeued job waits
	// again from when it was seen pending, not from its first submit).
	left bool
	// over is the message of a wait ended by the limit ("" if not), cause
	// the scheduler's reason for that wait (kept: the cancelled job's
	// states that follow reset reason).
	over, cause string
}

// newPendingWatch reads the job's pendingLimit from its record (checked
// by Parse before anything was submitted).
func newPendingWatch(data map[string]string) pendingWatch {
	limit, _ := record.ParsePendingLimit(record.SpecFromData(data).PendingLimit)
	return pendingWatch{limit: limit}
}

// observe takes a state the backend reported at now. It logs the wait
// when the reason changes and every pendingHeartbeat, and reports whether
// the wait is over the limit (once).
func (p *pendingWatch) observe(st backends.Status, id string, now time.Time, log *slog.Logger) bool {
	if st.State != backends.Pending {
		p.since, p.said, p.reason, p.left = time.Time{}, time.Time{}, "", true
		return false
	}
	if p.since.IsZero() {
		// The backend's submit time counts a re-attach's earlier wait; a
		// requeued job waits again from now.
		p.since = now
		if !p.left && !st.SubmitTime.IsZero() && st.StartTime.IsZero() && st.SubmitTime.Before(now) {
			p.since = st.SubmitTime
		}
	}
	waited := now.Sub(p.since).Round(time.Second)
	reason := cmp.Or(st.Reason, noReason)
	due := now.Sub(p.said) >= pendingHeartbeat
	if p.said.IsZero() && p.limit == 0 {
		due = waited >= pendingQuiet
	}
	if reason != p.reason && st.Reason != "" || due {
		p.reason, p.said = reason, now
		args := []any{"reason", reason, "waited", waited.String(), "message", st.Message}
		if p.limit > 0 {
			args = append(args, "pending_limit", p.limit.String())
		}
		log.Info("job pending: it has not started", args...)
	}
	if p.limit == 0 || p.over != "" || waited < p.limit {
		return false
	}
	p.cause = st.Reason
	p.over = fmt.Sprintf("job %s was still PENDING after %s (the scheduler's reason: %s), over its pendingLimit of %s; it was cancelled. "+
		"Ask for what the cluster can give (the reason says what it lacks), or raise pendingLimit", id, waited, reason, p.limit)
	log.Warn("cancelling the remote job", "why", "pendingLimit "+p.limit.String()+" reached", "reason", reason, "waited", waited.String())
	return true
}

// checkPending looks at the job's latest state (its own poll's or, while
// the cluster's watcher serves it, the last one seen) and cancels the job
// once its wait is over the limit, as a kill would.
func (f *follower) checkPending() {
	if f.pending.observe(f.last, f.id, time.Now(), f.log) && f.cancel.kill(time.Now()) {
		f.requestCancel()
	}
}

// endPending ends a run whose job was cancelled at its pendingLimit: the
// final state is recorded with the message and the reason of the wait (not
// the cancel's: HTCondor's removed job says only "via condor_rm"), and
// the error makes invoke exit 2 (the job as given does not start there;
// a retry as it is would wait again).
func (r *run) endPending(ctx context.Context, st backends.Status, p pendingWatch) error {
	msg := p.over
	st.Message = msg
	if p.cause != "" {
		st.Reason = p.cause
	}
	if err := r.final(ctx, st); err != nil {
		return err
	}
	return backends.Invalid("pendingLimit", "%s", r.Secrets.Scrub(msg))
}
