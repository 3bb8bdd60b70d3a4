package runner

// Re-placement (replaceAfter): a job that still waits to start on its
// target after replaceAfter, while another of its targets would start it
// now, moves there, exactly once.
//
// The exactly-once argument. The record names at most one job at a time
// (id, or the submit intent that leads to one), and a job leaves the
// record only when its backend has confirmed it will never run:
//
//  1. Intent. A fenced (resourceVersion) update writes status.move (the
//     job's target and id, the new target's placement, the move's number)
//     only if the record still names this job and no move, no kill. Two
//     invokers of the record cannot both write it.
//  2. Ask. CancelIfPending asks the job's backend to cancel the job only
//     if it never started, atomically in the scheduler (Slurm: a hold,
//     then a read that says PENDING, then the cancel). Started: the move
//     is dropped and the job stays; it is never moved again. No answer
//     (dark, timeout, ambiguous): the job stays and is followed as before,
//     and the intent stays, so the question is asked again at the next
//     look (CancelIfPending is idempotent); nothing moves on a guess.
//  3. Commit. Only on a confirmed "cancelled, never started", one fenced
//     update records the new placement, moves the old id into
//     status.moves and clears the id and the move: the record now names
//     no job, and the one it named can never run.
//  4. Submit. Invoke starts again on the record (errMoved), which is a
//     first submission at the new target through the usual path: submit
//     intent, a key of its own (jobKey: the move's number is in it, so a
//     job left behind on a target is never adopted there), the id written
//     at once, the job found by its key after a crash.
//
// A SIGKILL anywhere resumes from the record: before the intent, nothing
// happened; with the intent (after-move-intent, after-move-cancel), the
// old job is asked again (cancelled: commit; started: stay); after the
// commit, the new target's submit path holds it (after-intent,
// after-submit, after-id). So two jobs never run, and while the record
// names a job, that job exists and can still run (our hold is lifted
// whenever we do not cancel).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// errMoved ends following a job that moved: invoke starts again on the
// record, which now names the new target and no job.
var errMoved = errors.New("the job moved to another target")

// moveAskTimeout bounds one CancelIfPending (a few requests).
const moveAskTimeout = 30 * time.Second

// mover is a follower's memory of re-placement.
type mover struct {
	after   time.Duration // replaceAfter; 0: never
	look    time.Time     // when the next look (a probe, or an ask) is due
	spacing record.Backoff
	stayed  bool // the job was found started: it moves no more
}

func newMover(d map[string]string) *mover {
	after, _ := record.ParseReplaceAfter(record.SpecFromData(d).ReplaceAfter)
	// Probes of the other targets come at most every after/2 (jittered
	// ±10 %), backing off to 2×after while none would start the job now.
	return &mover{after: after, spacing: record.Backoff{Initial: after / 2, Max: 2 * after, Jitter: 0.1}}
}

// moveJob is follow's hook: it resumes a move the record holds for this
// job, or starts one when the job has waited replaceAfter and another
// target starts it now. It reports whether following ends (moved, or the
// move's commit failed: f.result and f.err say).
func (f *follower) moveJob() bool {
	if f.mv == nil {
		f.mv = newMover(f.r.rec.Data)
	}
	if !f.mayMove() {
		return false
	}
	mv, err := record.ParseMove(f.r.rec.Data[record.KeyMove])
	if err != nil {
		f.log.Warn("not moving the job", "err", err)
		f.mv.stayed = true
		return false
	}
	mine := mv != nil && mv.FromID == f.id
	if mine && (f.last.State == backends.Running || f.last.State.Final() && f.last.State != backends.Killed) {
		f.r.dropMove(f.ctx, *mv, f.log) // it started: it stays
		return false
	}
	now := time.Now()
	if now.Before(f.mv.look) {
		return false
	}
	if mine {
		f.mv.look = now.Add(f.mv.spacing.Next())
		return f.settleMove(*mv)
	}
	if mv != nil || !f.waitedTooLong(now) {
		return false
	}
	f.mv.look = now.Add(f.mv.spacing.Next())
	mv = f.r.planMove(f.ctx, f.id, f.log)
	if mv == nil || !f.r.recordMoveIntent(f.ctx, *mv, f.log) {
		return false
	}
	crashPoint("after-move-intent")
	return f.settleMove(*mv)
}

// mayMove: re-placement is on, and no cancel, kill or SIGTERM is under way.
func (f *follower) mayMove() bool {
	return f.mv.after > 0 && !f.cancel.requested() && f.sig.Err() == nil && !killRequested(f.r.rec.Data)
}

// waitedTooLong: the job (not found started before) has waited
// replaceAfter by now.
func (f *follower) waitedTooLong(now time.Time) bool {
	return !f.mv.stayed && f.last.State == backends.Pending && !f.pending.since.IsZero() && now.Sub(f.pending.since) >= f.mv.after
}

// settleMove asks the job's backend to cancel it if it never started, and
// commits the move on a confirmed yes.
func (f *follower) settleMove(mv record.Move) bool {
	pc, ok := f.be.(backends.PendingCanceller)
	if !ok {
		f.log.Warn("not moving the job: its backend cannot cancel a job only if it never started")
		f.mv.stayed = true
		f.r.dropMove(f.ctx, mv, f.log)
		return false
	}
	ctx, cancel := context.WithTimeout(f.ctx, moveAskTimeout)
	ans, err := pc.CancelIfPending(ctx, f.id)
	cancel()
	switch {
	case err != nil:
		f.log.Warn("could not learn whether the job never started: it stays, and is asked again later",
			"target", mv.From, "why", skipReason(err))
		return false
	case !ans.Cancelled:
		f.log.Info("the job started before it could move: it stays", "target", mv.From, "evidence", f.r.Secrets.Scrub(ans.Evidence))
		f.mv.stayed = true
		f.r.dropMove(f.ctx, mv, f.log)
		return false
	}
	crashPoint("after-move-cancel")
	evidence := f.r.Secrets.Scrub(ans.Evidence)
	if err := f.r.commitMove(f.ctx, mv, evidence); err != nil {
		f.finish(ans.Last, err)
		return true
	}
	f.log.Info("moved the job", "from", mv.From, "to", mv.To.Target, "old_job_id", mv.FromID, "evidence", evidence)
	f.finish(ans.Last, errMoved)
	return true
}

// planMove probes the targets (or reads their agents' figures, as
// placement does) and returns the move to the best other target where
// the job starts now; nil if there is none.
func (r *run) planMove(ctx context.Context, id string, log *slog.Logger) *record.Move {
	desc, err := record.SpecFromData(r.rec.Data).Parse()
	if err != nil {
		return nil
	}
	cur, err := record.ParsePlaced(r.rec.Data[record.KeyPlacement])
	if err != nil || cur == nil {
		return nil
	}
	moves, _ := record.ParseMoves(r.rec.Data[record.KeyMoves])
	if len(moves) >= record.MaxMoves {
		log.Info("not moving the job again: it moved as often as a job may", "moves", len(moves))
		return nil
	}
	cands := r.probeTargets(ctx, desc)
	to := moveTarget(desc.Policy, cands, cur.Target)
	if to < 0 {
		log.Debug("the job still waits; no other target starts it now", "probes", placementSummary(probes(cands)))
		return nil
	}
	still := func(e shareEntry) bool { return moveTarget(desc.Policy, withShared(cands, to, e), cur.Target) == to }
	if sh := cands[to].share; sh != nil && !sh.reserve(context.WithoutCancel(ctx), cands[to].load, still) {
		// Other placements counted themselves into the figures the move
		// was chosen on, and it no longer starts the job first: the next
		// check chooses on the new ones.
		return nil
	}
	now := time.Now().UTC().Truncate(time.Second)
	p := probes(cands)
	p.Target, p.Backend, p.Policy, p.At = cands[to].target.Name, cands[to].target.Backend, desc.Policy, now
	log.Info("the job waits; another target starts it now", "from", cur.Target, "to", p.Target, "probes", placementSummary(p))
	return &record.Move{From: cur.Target, FromID: id, To: *p, N: len(moves) + 1, At: now}
}

func probes(cands []candidate) *record.Placed {
	p := &record.Placed{}
	for _, c := range cands {
		p.Probes = append(p.Probes, c.probe())
	}
	return p
}

// moveTarget is the target, other than from, that starts the job now (the
// policy's choice among several), or -1. Its estimates are judged as a
// first placement's are (trustEstimates: absurd ones rank nothing, learnt
// errors correct the rest) on a copy, so the record keeps the scheduler's.
func moveTarget(policy string, cands []candidate, from string) int {
	others := slices.Clone(cands)
	trustEstimates(others, time.Now())
	for i := range others {
		if others[i].target.Name == from || others[i].skip == "" && !startsNow(others[i].load) {
			others[i].skip = "does not start it now"
		}
	}
	i, err := choose(policy, others)
	if err != nil {
		return -1
	}
	return i
}

// recordMoveIntent writes mv (step 1) if the record still names the job
// and no move or kill; it reports whether this invoker's intent holds.
func (r *run) recordMoveIntent(ctx context.Context, mv record.Move, log *slog.Logger) bool {
	b, _ := json.Marshal(mv)
	won := false
	err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error {
		return r.update(ctx, func(d map[string]string) (bool, error) {
			won = d[record.KeyID] == mv.FromID && d[record.KeyMove] == "" && !killRequested(d)
			if won {
				d[record.KeyMove] = string(b)
			}
			return won, nil
		})
	})
	if err != nil {
		log.Warn("could not record the intent to move the job: it stays", "err", err)
		return false
	}
	return won
}

// dropMove removes the move mv from the record: the job stays (best
// effort: a move left behind is asked again, and found started, by the
// next look or the next invoke).
func (r *run) dropMove(ctx context.Context, mv record.Move, log *slog.Logger) {
	err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error {
		return r.update(ctx, func(d map[string]string) (bool, error) {
			cur, _ := record.ParseMove(d[record.KeyMove])
			if cur == nil || cur.FromID != mv.FromID || cur.N != mv.N {
				return false, nil
			}
			delete(d, record.KeyMove)
			return true, nil
		})
	})
	if err != nil {
		log.Warn("could not clear the intent to move the job", "err", err)
	}
}

// commitMove is step 3: the record names the new placement and no job,
// and lists the old job as cancelled, never started. It must land even
// during SIGTERM, within the grace period.
func (r *run) commitMove(ctx context.Context, mv record.Move, evidence string) error {
	wctx, cancel := r.stopping(ctx, 0)
	defer cancel()
	r.memo = nil // what the old target's backend learnt is not the new one's
	to, _ := json.Marshal(mv.To)
	err := retryTransient(wctx, r.RetryBudget, func(ctx context.Context) error {
		return r.update(ctx, func(d map[string]string) (bool, error) {
			moves, _ := record.ParseMoves(d[record.KeyMoves])
			if n := len(moves); n > 0 && moves[n-1].ID == mv.FromID && d[record.KeyID] == "" {
				return false, nil // committed already (an earlier ask of ours, before a crash)
			}
			cur, _ := record.ParseMove(d[record.KeyMove])
			if cur == nil || cur.FromID != mv.FromID || cur.N != mv.N || d[record.KeyID] != mv.FromID {
				return false, fmt.Errorf("the record changed while job %s moved", mv.FromID)
			}
			moves = append(moves, record.Moved{Target: mv.From, ID: mv.FromID, To: mv.To.Target, At: time.Now().UTC().Truncate(time.Second), Evidence: evidence})
			mb, _ := json.Marshal(moves)
			d[record.KeyMoves], d[record.KeyPlacement] = string(mb), string(to)
			for _, k := range []string{record.KeyMove, record.KeyID, record.KeyIDFingerprint, record.KeyIntent, record.KeyStartEstimate, record.KeyBackendMemo, record.KeyLogOffset} {
				delete(d, k)
			}
			d[record.KeyJobStatus] = string(backends.Pending)
			d[record.KeyMessage] = fmt.Sprintf("moved from %s (job %s: cancelled, never started) to %s", mv.From, mv.FromID, mv.To.Target)
			return true, nil
		})
	})
	if err != nil {
		return fmt.Errorf("recording the move of job %s (cancelled, never started) to %s in %s (a retry of the step resumes it): %w",
			mv.FromID, mv.To.Target, r.Store.Describe(), err)
	}
	return nil
}

// jobKey is the idempotency key of the record's current job: its
// attempt's, and after a move, the move's own, so that the find by key at
// a target never adopts a job a move left behind there.
func jobKey(uid string, d map[string]string) string {
	n := attemptOf(d)
	moves, _ := record.ParseMoves(d[record.KeyMoves])
	if len(moves) == 0 {
		return AttemptKey(uid, n)
	}
	return IdempotencyKey(fmt.Sprintf("%s/attempt/%d/move/%d", uid, n, len(moves)))
}
