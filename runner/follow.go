package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/record"
)

// notFoundGrace: a job the backend does not know yet right after submit is
// given this long to appear before it counts as lost.
const notFoundGrace = 30 * time.Second

// The delays between requests to a backend out of reach: the first retry
// after faultRetryFirst, then twice as long each time, jittered, up to
// cancelRetryMax for a cancel not accepted (a grace period of 25 s still
// gets five or six tries) and faultRetryMax (or the poll interval, if
// longer) for status polls.
const (
	faultRetryFirst = 250 * time.Millisecond
	cancelRetryMax  = 5 * time.Second
	faultRetryMax   = 10 * time.Second
)

// phase is one step of following a job. Each step does one thing and
// names the next; follow runs them until phaseDone.
type phase int

const (
	phasePoll   phase = iota // ask the backend for the job's state
	phaseOutput              // after a poll: read the job's output if due; stop at a final state (after its last output)
	phaseLogs                // between polls: read the job's output on its own cadence
	phaseRecord              // mirror the state into the record
	phaseCancel              // cancel the job when asked; stop waiting for the backend when due
	phaseWait                // wait for the next poll, a kill or SIGTERM
	phaseDone                // result and err hold the outcome
)

// follower is the memory of the machine that follows one job.
type follower struct {
	r     *run
	be    backends.Backend
	out   *jobOutput // nil when the job's output is not followed
	id    string
	log   *slog.Logger
	watch <-chan *record.Record
	poll  *record.Backoff
	// faults spaces the polls of an outage beyond poll's interval, and
	// cancelRetry the cancel requests the backend has not accepted: a
	// backend out of reach gets fewer requests the longer it is away.
	faults, cancelRetry *record.Backoff
	// cancelAt is when the next cancel request is due while the backend has
	// not accepted one.
	cancelAt time.Time
	// pollAt is when the next poll is due; zero right after a poll.
	pollAt time.Time
	// force makes the next poll ask the backend even while the cluster's
	// watcher serves this job (it saw a change).
	force bool
	// deferred: the last poll was skipped for the watcher; a change of its
	// lease that ends its service makes the wait poll at once.
	deferred bool
	// watcherHeard: when the watcher that served this job last had a query
	// work, since this invoke's own last answer (zero: none). The retry
	// budget of polls that fail after it counts from then: a member hears
	// of its job no longer than a polling step would.
	watcherHeard time.Time

	// sig is invoke's context: it ends on SIGTERM. ctx is the requests'
	// context: sig, and after SIGTERM the grace period's.
	sig, ctx  context.Context
	stopGrace context.CancelFunc

	start        time.Time
	last         backends.Status // the latest state the backend reported
	seen         bool            // the backend reported a state at least once
	failingSince time.Time       // when the first of the current run of failed polls was sent
	failCause    error           // the failure of that run that says most (not just the budget's deadline)
	cancel       cancellation
	pending      pendingWatch // how long the job waits to start (pending.go)
	end          endWatch     // the job's own announcement of its end (endwatch.go)
	// answerTook is how long the last answered status request took: the
	// next poll waits at least slowAnswerFactor times as long.
	answerTook time.Duration
	// assumed: last is PENDING as of this invoke's submit, not a state the
	// backend reported; the cluster's agent serves the job from then on,
	// so that no poll asks what the submit's answer already said.
	assumed bool
	mv      *mover // re-placement (replace.go); nil until the first look

	result backends.Status
	err    error
}

// follow polls the job until it reaches a final state. Polling is adaptive:
// fast after each state change, backing off to maxPoll, jittered. A kill
// request (record watch) or SIGTERM (ctx) cancels the remote job and waits,
// within CancelWait or Grace, for the backend to confirm.
func (r *run) follow(ctx context.Context, be backends.Backend, id string, maxPoll time.Duration,
	watch <-chan *record.Record, log *slog.Logger) (backends.Status, error) {
	f := &follower{r: r, be: be, id: id, log: log, watch: watch, sig: ctx, ctx: ctx, stopGrace: func() {},
		start: time.Now(), poll: &record.Backoff{Initial: min(r.MinPoll, maxPoll), Max: maxPoll, Factor: 1.6, Jitter: 0.1},
		faults:      &record.Backoff{Initial: faultRetryFirst, Max: max(maxPoll, faultRetryMax)},
		cancelRetry: &record.Backoff{Initial: faultRetryFirst, Max: cancelRetryMax}}
	f.pending = newPendingWatch(r.rec.Data)
	if !r.submittedAt.IsZero() && r.w.AgentServes() {
		f.last, f.assumed = assumedPending(r.submittedAt), true
	}
	r.logOff, _ = strconv.ParseInt(r.rec.Data[record.KeyLogOffset], 10, 64)
	f.out = r.newJobOutput(r.logSrc, maxPoll)
	defer func() {
		if f.out != nil {
			f.out.finish()
		}
		f.end.stopWatching()
		f.stopGrace()
	}()
	if killRequested(r.rec.Data) && f.cancel.kill(time.Now()) {
		// A re-attach to a job whose cancel an earlier invoke could not
		// confirm: finish the cancel before anything else.
		log.Info("cancelling the remote job", "why", "kill=true in "+r.Store.Describe()+" (a cancel not yet confirmed)")
		f.requestCancel()
	}
	for p := phasePoll; p != phaseDone; p = f.step(p) {
	}
	if f.cancel.unconfirmed() && !f.result.State.Final() {
		return f.result, r.cancelPending(f.sig, f.result)
	}
	if f.pending.over != "" && f.err == nil && f.result.State.Final() {
		return f.result, r.endPending(f.sig, f.result, f.pending)
	}
	return f.result, f.err
}

// assumedPending is the state of a job just submitted at submitted, as a
// step assumes it while its cluster's agent serves the job: PENDING, until
// the agent tells more.
func assumedPending(submitted time.Time) backends.Status {
	return backends.Status{State: backends.Pending, Raw: string(backends.Pending), SubmitTime: submitted}
}

// step runs phase p and returns the next.
func (f *follower) step(p phase) phase {
	switch p {
	case phasePoll:
		return f.pollStatus()
	case phaseOutput:
		return f.readOutput()
	case phaseLogs:
		f.readLogs()
		return phaseWait
	case phaseRecord:
		return f.recordState()
	case phaseCancel:
		return f.checkCancel()
	case phaseWait:
		return f.wait()
	}
	panic(fmt.Sprintf("follow: no phase %d", p))
}

// finish ends following with st and err.
func (f *follower) finish(st backends.Status, err error) phase {
	f.result, f.err = st, err
	return phaseDone
}

// pollStatus asks the backend for the job's state.
func (f *follower) pollStatus() phase {
	if !f.force && f.served() {
		// The cluster's watcher asks for this job; look again when it
		// says the job changed, or at the longest interval.
		f.pollAt = time.Now().Add(f.r.w.NextLook(f.poll.Max))
		f.deferred = true
		f.checkPending()
		return phaseOutput
	}
	f.force, f.deferred = false, false
	f.pollAt = time.Time{}
	started := time.Now()
	// The retry budget is a ceiling: a request to a server that never
	// answers ends with it, counted from the first failed request's start
	// (or the watcher's last working query, see watcherHeard).
	pctx, cancel := f.requestCtx(0)
	st, err := f.be.Status(pctx, f.id)
	cancel()
	if err != nil {
		return f.pollFailed(err, started)
	}
	f.failingSince, f.failCause, f.watcherHeard = time.Time{}, nil, time.Time{}
	f.answerTook = time.Since(started)
	f.faults.Reset()
	f.catchUp(st)
	if !f.seen || st.State != f.last.State || st.Raw != f.last.Raw {
		f.log.Info("job state", "state", st.State, "backend_state", st.Raw, "reason", st.Reason)
		f.poll.Reset()
		if f.out != nil {
			f.out.soon()
		}
	}
	f.seen, f.last = true, st
	f.checkPending()
	return phaseOutput
}

// pollFailed judges a failed status request sent at started: a job the
// backend forgot, or a fault ridden out within the retry budget.
func (f *follower) pollFailed(err error, started time.Time) phase {
	notFound := errors.Is(err, backends.ErrNotFound)
	switch {
	case notFound && backends.State(f.r.rec.Data[record.KeyJobStatus]).Final():
		// A re-attach (say, to finish uploads) after the backend forgot
		// the job: what we recorded at its end stands.
		return f.finish(f.r.recordedStatus(), nil)
	case notFound && (f.seen || time.Since(f.start) > notFoundGrace):
		msg := fmt.Sprintf("the backend no longer knows job %s", f.id)
		if f.seen {
			msg += fmt.Sprintf(" (last seen %s)", f.last.Raw)
		}
		return f.finish(backends.Status{State: backends.Unknown, Raw: f.last.Raw, Message: msg,
			SubmitTime: f.last.SubmitTime, StartTime: f.last.StartTime}, nil)
	case record.Permanent(err): // no retry mends it (a TLS verification failure, say)
		return f.finish(f.last, err)
	case f.ctx.Err() != nil: // stopping: the cancel step decides
		return phaseCancel
	}
	if f.failingSince.IsZero() {
		f.failingSince = f.heardSince(started)
	}
	f.failCause = telling(f.failCause, err)
	if time.Since(f.failingSince) >= f.r.RetryBudget {
		return f.finish(f.last, backends.Transient(fmt.Errorf("lost contact with the backend for %s: %w", f.r.RetryBudget, unanswered(f.failCause))))
	}
	ra := httpx.RetryAfterOf(err) // no poll before the server's time
	if ra > 0 && time.Since(f.failingSince)+ra > f.r.RetryBudget {
		return f.finish(f.last, fmt.Errorf("%w; the server asked to wait %s before trying again (Retry-After), longer than the retry budget (%s) left",
			err, ra, f.r.RetryBudget))
	}
	f.pollAt = f.retryAt(time.Now(), max(ra, f.poll.Next(), f.faults.Next()), ra)
	f.log.Warn("status request failed; will try again", "err", err)
	return phaseCancel
}

// retryAt is when a failed poll is tried again, d from now: the back-off,
// but never so late that the budget ends without a last try (a tenth of
// the budget is kept for it), and never sooner than faultRetryFirst (nor
// the server's Retry-After, ra).
func (f *follower) retryAt(now time.Time, d, ra time.Duration) time.Time {
	at := now.Add(d)
	if last := f.failingSince.Add(f.r.RetryBudget - f.r.RetryBudget/10); at.After(last) {
		at = last
	}
	return maxTime(at, now.Add(max(faultRetryFirst, ra)))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// requestCtx is the context of one request of the loop (a poll, a read of
// the job's output, a cancel): it ends after d (0: no limit of its own),
// and where the retry budget does, counted from the start of the first of
// the current run of failed polls, or from now. The budget is a ceiling:
// no request outlives it on a timeout of its own (a log read's 30 s over a
// silent SSH connection made a 60 s budget 65-80 s).
func (f *follower) requestCtx(d time.Duration) (context.Context, context.CancelFunc) {
	now := time.Now()
	end := cmp.Or(f.failingSince, f.heardSince(now)).Add(f.r.RetryBudget)
	if d > 0 && now.Add(d).Before(end) {
		end = now.Add(d)
	}
	return context.WithDeadline(f.ctx, end)
}

// readLogs reads the job's new output within the retry budget.
func (f *follower) readLogs() {
	ctx, cancel := f.requestCtx(0)
	defer cancel()
	f.out.readNew(ctx, f.id, f.log)
}

// served reports whether the cluster's watcher follows this job for now,
// so that its own poll may wait: only once the job was seen, while no
// cancel or failure is being dealt with.
func (f *follower) served() bool {
	w := f.r.w
	if w == nil || (!f.seen && !f.assumed) || f.last.State.Final() || f.cancel.requested() || !f.failingSince.IsZero() || !w.Serving(f.ctx) {
		return false
	}
	f.watcherHeard = w.WorkedAt()
	return true
}

// heardSince is when this invoke last heard of its job, for a poll sent at
// started that fails: the watcher's last working query if it served the
// job since, else started (as for a polling step, its first failed poll).
func (f *follower) heardSince(started time.Time) time.Time {
	if !f.watcherHeard.IsZero() && f.watcherHeard.Before(started) {
		return f.watcherHeard
	}
	return started
}

// readOutput copies the job's new output to LogOut when a read is due, and
// always at a final state, where following ends after the last output.
func (f *follower) readOutput() phase {
	if f.moveJob() {
		return phaseDone
	}
	final := f.last.State.Final()
	if f.out != nil && (final || !time.Now().Before(f.out.due)) {
		f.readLogs()
	}
	if final {
		return f.finish(f.last, nil)
	}
	return phaseRecord
}

// recordState mirrors the job's state into the record.
func (f *follower) recordState() phase {
	start := time.Now()
	if err := f.r.writeStatus(f.ctx, f.last); err != nil {
		f.log.Warn("could not record the job state; will try again", "err", err)
	} else {
		f.log.Debug("recorded the job state", "state", f.last.State, "took", time.Since(start).Round(time.Millisecond))
	}
	if f.last.State == backends.Running {
		crashPoint("following")
	}
	return phaseCancel
}

// checkCancel asks the backend again to cancel if it has not accepted yet.
// Once the wait for its confirmation is over, the job is KILLED if the
// backend accepted the cancel request; if not, the cancel is pending and
// follow ends with the job's last known state (see cancelPending).
func (f *follower) checkCancel() phase {
	if !f.cancel.requested() {
		return phaseWait
	}
	if !f.cancel.accepted {
		f.requestCancel()
	}
	if !f.cancel.expire(time.Now(), f.r.CancelWait, f.r.RetryBudget, f.r.Grace, f.ctx.Err() != nil) {
		return phaseWait
	}
	if !f.cancel.accepted {
		return f.finish(f.lastKnown(), nil)
	}
	return f.finish(f.killedStatus(), nil)
}

// lastKnown is the job's latest state: as the backend last reported it in
// this run, else as the record holds it.
func (f *follower) lastKnown() backends.Status {
	if f.seen {
		return f.last
	}
	return f.r.recordedStatus()
}

// requestCancel asks the backend to cancel the job, unless it already
// accepted or the next request is not due yet: a cancel not accepted is
// asked again after a growing, jittered delay (cancelRetry), not at every
// wake of the loop.
func (f *follower) requestCancel() {
	if f.cancel.accepted || time.Now().Before(f.cancelAt) {
		return
	}
	cctx, cancel := f.requestCtx(10 * time.Second)
	defer cancel()
	if err := f.be.Cancel(cctx, f.id); err != nil {
		f.cancelAt = time.Now().Add(f.cancelRetry.Next())
		f.log.Warn("cancel not accepted; will try again", "err", err, "in", time.Until(f.cancelAt).Round(time.Millisecond))
		return
	}
	f.cancel.accepted = true
	f.poll.Reset()
	f.pollAt = time.Time{} // look soon for the job's end
}

// killedStatus is the final status once the backend accepted the cancel
// request and invoke stops waiting for it to report the job's end.
func (f *follower) killedStatus() backends.Status {
	msg := "cancelled"
	if f.seen {
		msg += fmt.Sprintf("; the backend still reported %s when invoke stopped waiting", f.last.Raw)
	}
	return backends.Status{State: backends.Killed, Raw: f.last.Raw, Message: msg,
		SubmitTime: f.last.SubmitTime, StartTime: f.last.StartTime, EndTime: time.Now()}
}

// wait waits until the next poll is due, a kill is requested or SIGTERM
// comes. A change of the record that is not a kill (most are our own
// writes) must not poll early: that would also advance the backoff, and a
// short job would be seen late.
//
// Reading the job's output has its own cadence: a due read is done and
// the wait goes on until the poll is due.
func (f *follower) wait() phase {
	f.schedulePoll()
	at, next := f.pollAt, phasePoll
	if f.out != nil && f.out.due.Before(at) {
		at, next = f.out.due, phaseLogs
	}
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return next
		case rec, ok := <-f.watch:
			if !ok {
				f.watch = nil
				continue
			}
			f.r.observeWatched(rec)
			if killRequested(rec.Data) && f.cancel.kill(time.Now()) {
				f.log.Info("cancelling the remote job", "why", "kill=true in "+f.r.Store.Describe())
				f.requestCancel()
				return phasePoll
			}
			if f.r.w != nil && f.r.w.Changed(f.ctx, rec.Data, f.id, f.last) {
				f.force = true // the backend's own answer decides
				return phasePoll
			}
		case <-f.endAnnounced():
			return f.onEndAnnounced()
		case <-f.r.w.LeaseChanges():
			if f.deferred && !f.served() {
				return phasePoll // the watcher serves this job no longer
			}
		case <-f.ctx.Done():
			return f.onSignal()
		}
	}
}

// A server that answers slowly has too much to do: after an answer that
// took over slowAnswerFloor, the next poll waits at least slowAnswerFactor
// times as long as it took (at most maxSlowWait), so every step asks less
// as the server slows, and asks at its interval again once it answers
// quickly. 500 steps each polling one slurmrestd 24.11 every 5 s kept it
// past the 30 s request timeout until 253 of them gave up (BENCHMARKS.md,
// 2026-11-29); each waiting its interval regardless is what fed that. The
// floor keeps a daemon that answers within a second on a busy machine from
// slowing detection: that is not a daemon we swamp.
const (
	slowAnswerFloor  = time.Second
	slowAnswerFactor = 4
	maxSlowWait      = 2 * time.Minute
)

// slowAnswerWait is the least wait after an answer that took took.
func slowAnswerWait(took time.Duration) time.Duration {
	if took <= slowAnswerFloor {
		return 0
	}
	return min(slowAnswerFactor*took, maxSlowWait)
}

// schedulePoll sets when the next poll is due: after the poll interval
// (longer after a slow answer), sooner when a cancel request is due again
// or the retry budget ends.
func (f *follower) schedulePoll() {
	if f.pollAt.IsZero() {
		f.pollAt = time.Now().Add(max(f.poll.Next(), slowAnswerWait(f.answerTook)))
		if at, ok := f.end.recheckAt(time.Now()); ok && at.Before(f.pollAt) {
			f.pollAt, f.force = at, true // an announced end the backend did not confirm yet
		}
	}
	if f.cancel.requested() && !f.cancel.accepted && f.cancelAt.Before(f.pollAt) {
		f.pollAt = f.cancelAt // ask again when the next cancel request is due
	}
	if end := f.failingSince.Add(f.r.RetryBudget); !f.failingSince.IsZero() && end.Before(f.pollAt) {
		f.pollAt = end // the budget's end: the poll there gives up
	}
}

// onSignal handles the end of the requests' context. The first time it is
// SIGTERM: leave the job to the retry when only this pod goes away, else
// cancel it within the grace period. After that it is the grace period's
// end, which the cancel step turns into KILLED after one more poll.
func (f *follower) onSignal() phase {
	if f.cancel.state == cancelBySignal {
		return phasePoll
	}
	detached := f.r.detach(f.sig, f.log)
	wasRequested := f.cancel.requested()
	f.cancel.signal(time.Now(), detached)
	if f.cancel.state == cancelDetached {
		return f.finish(f.last, backends.Transient(fmt.Errorf("this pod was deleted while following job %s, which keeps running for the retry to re-attach", f.id)))
	}
	cause := context.Cause(f.sig)
	f.log.Info("stop requested", "cause", cause, "grace", f.r.Grace)
	if !wasRequested {
		f.log.Info("cancelling the remote job", "why", cause.Error())
	}
	// The wait for the backend ends a little before the grace deadline:
	// the rest is for recording the outcome and writing the outputs.
	end := f.r.graceDeadline(f.sig).Add(-f.r.graceReserve())
	f.ctx, f.stopGrace = context.WithDeadline(context.WithoutCancel(f.sig), end)
	f.cancelAt = time.Time{} // the grace period's own request goes out at once
	f.requestCancel()
	return phasePoll
}

// detach asks, within a few seconds of the grace period, whether SIGTERM
// only took this pod away (see Invoker.Detach).
func (r *run) detach(ctx context.Context, log *slog.Logger) bool {
	if r.Detach == nil {
		return false
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(5*time.Second, r.Grace/3))
	defer cancel()
	ok, why := r.Detach(qctx)
	if ok {
		log.Warn("leaving the job running for the retry to re-attach", "why", why)
	} else {
		log.Info("SIGTERM stops the step", "why", why)
	}
	return ok
}

// recordedStatus rebuilds a status from the record's keys.
func (r *run) recordedStatus() backends.Status {
	d := r.rec.Data
	st := backends.Status{State: backends.State(d[record.KeyJobStatus]), Raw: d[record.KeyRawState], Reason: d[record.KeyReason], Message: d[record.KeyMessage],
		Category: backends.Category(d[record.KeyFailureCategory])}
	if c, err := strconv.Atoi(d[record.KeyExitCode]); err == nil {
		st.ExitCode = &c
	}
	st.SubmitTime, _ = time.Parse(time.RFC3339, d[record.KeySubmit])
	st.StartTime, _ = time.Parse(time.RFC3339, d[record.KeyStart])
	st.EndTime, _ = time.Parse(time.RFC3339, d[record.KeyEnd])
	return st
}

// scrubbed returns st with every text the backend gave scrubbed of secrets:
// a chatty or hostile server may echo a token in any of them.
func (r *run) scrubbed(st backends.Status) backends.Status {
	st.Message = truncate(r.Secrets.Scrub(st.Message), 4096)
	st.Raw = truncate(r.Secrets.Scrub(st.Raw), 256)
	st.Reason = truncate(r.Secrets.Scrub(st.Reason), 1024)
	return st
}

// statusData is the record's status keys for st.
func (r *run) statusData(st backends.Status) map[string]string {
	st = r.scrubbed(st)
	msg := st.Message
	if msg == "" {
		msg = fmt.Sprintf("job %s is %s", r.result.ID, st.State)
		if st.Raw != "" && st.Raw != string(st.State) {
			msg += " (" + st.Raw + ")"
		}
	}
	d := map[string]string{
		record.KeyJobStatus: string(st.State),
		record.KeyMessage:   truncate(r.Secrets.Scrub(msg), 4096),
		record.KeyRawState:  st.Raw,
		record.KeyReason:    st.Reason,
		record.KeySubmit:    rfc3339(st.SubmitTime),
		record.KeyStart:     rfc3339(st.StartTime),
		record.KeyEnd:       rfc3339(st.EndTime),
		record.KeyExitCode:  "",
		// Written with the final state, so that a record never says FAILED
		// without saying whose doing it was.
		record.KeyFailureCategory: string(st.FailureCategory()),
	}
	if st.ExitCode != nil {
		d[record.KeyExitCode] = strconv.Itoa(*st.ExitCode)
	}
	if r.logOff > 0 {
		d[record.KeyLogOffset] = strconv.FormatInt(r.logOff, 10)
	}
	if r.arr != nil {
		sum := r.arr.summary()
		d[record.KeyArrayCounts], d[record.KeyArrayFailed], d[record.KeyArrayExitCodes] = sum.countsText(), sum.failedText(), sum.codesText()
	}
	if r.w != nil && !st.State.Final() { // the watcher follows the job from its first state on
		d[record.KeyWatchGroup] = r.w.Group()
	}
	if st.State.Final() && r.result.Efficiency != "" { // peekEfficiency's, in the final write
		d[record.KeyEfficiency] = r.result.Efficiency
	}
	if n := r.backendRequests(); n != "" {
		d[record.KeyBackendRequests] = n
	}
	if e := observedStart(r.rec.Data[record.KeyStartEstimate], st, time.Now()); e != "" {
		d[record.KeyStartEstimate] = e
	}
	return d
}

// backendRequests is the record's request counts: those the record held
// when this invoke first wrote its status (earlier invokes' of this run)
// plus this process's own, HTTP requests and SSH commands.
func (r *run) backendRequests() string {
	if r.reqBase == nil {
		r.reqBase = record.ParseRequests(r.rec.Data[record.KeyBackendRequests])
	}
	counts := RequestsByClass(r.Backend.HTTPClient)
	for kind, n := range r.Backend.Commands.Counts() {
		counts[record.CommandClass(kind)] += n
	}
	for c, n := range r.reqBase {
		counts[c] += n
	}
	return record.FormatRequests(counts)
}

// writeStatus writes the status keys if they changed since the last write.
func (r *run) writeStatus(ctx context.Context, st backends.Status) error {
	want := r.statusData(st)
	offsetDue := want[record.KeyLogOffset] != r.written[record.KeyLogOffset] && time.Since(r.offsetWritten) >= offsetWriteEvery
	if r.written != nil && sameStatus(r.written, want) && !offsetDue {
		return nil
	}
	err := r.update(ctx, func(d map[string]string) (bool, error) {
		changed := false
		for k, v := range want {
			changed = record.Set(d, k, v) || changed
		}
		return changed, nil
	})
	if err == nil {
		r.written, r.offsetWritten = want, time.Now()
	}
	return err
}

// sameStatus compares two status maps, ignoring the log offset (which alone
// is worth a write only every offsetWriteEvery) and the request counts
// (which change with every poll, and alone are worth no write at all).
func sameStatus(a, b map[string]string) bool {
	for k, v := range b {
		if k != record.KeyLogOffset && k != record.KeyBackendRequests && a[k] != v {
			return false
		}
	}
	return true
}

// cancelPending records a cancel the backend has not accepted: the job's
// last known state st stays (it is not final), kill=true is kept or set so
// that a retry of invoke, or cleanup, finishes the cancel, and the message
// says so. The record write is bounded like final's. It returns the
// transient error invoke exits 75 with; its text is ours alone (the
// server's answer is in the log, not in the record or outputs).
func (r *run) cancelPending(ctx context.Context, st backends.Status) error {
	st = r.scrubbed(st)
	st.Message = fmt.Sprintf("cancel of job %s requested but not yet confirmed: the backend did not accept the cancel request; "+
		"the job's last known state is %s; kill=true stays in the record, and a retry of invoke or cleanup finishes the cancel",
		r.result.ID, cmp.Or(string(st.State), "unknown"))
	st.EndTime = time.Time{}
	r.result.fill(st)
	wctx, cancel := r.stopping(ctx, 0)
	defer cancel()
	r.written = nil
	err := retryTransient(wctx, r.RetryBudget, func(wctx context.Context) error {
		return r.update(wctx, func(d map[string]string) (bool, error) {
			c := record.Set(d, record.KeyKill, "true")
			for k, v := range r.statusData(st) {
				c = record.Set(d, k, v) || c
			}
			return c, nil
		})
	})
	if err != nil {
		r.Log.Warn("could not record the pending cancel; the next invoke or cleanup must cancel the job", "record", r.Store.Describe(), "err", err)
	}
	r.Log.Warn("cancel not confirmed", "job_id", r.result.ID, "last_state", st.State)
	return backends.Transient(errors.New(st.Message))
}

// final records the final state; it must land, so it is retried within the
// retry budget (after SIGTERM, the grace period), and failing that invoke
// exits 75 (a retry re-attaches and records it), except for KILLED: a
// cancel the backend confirmed is the job's end whether or not the record
// says so.
func (r *run) final(ctx context.Context, st backends.Status) error {
	if st.Message == "" {
		st.Message = r.statusData(st)[record.KeyMessage]
	}
	st = r.scrubbed(st)
	r.result.fill(st)
	if r.arr != nil {
		sum := r.arr.summary()
		r.result.ArrayCounts, r.result.ArrayFailed = sum.countsText(), sum.failedText()
	}
	wctx, cancel := r.stopping(ctx, 0)
	defer cancel()
	r.written = nil
	err := retryTransient(wctx, r.RetryBudget, func(wctx context.Context) error { return r.writeStatus(wctx, st) })
	if errors.Is(err, record.ErrNoRecord) {
		// cleanup deleted the record while we were stopping the job: the
		// outputs still say what happened.
		r.Log.Warn("the record was deleted before the final state could be written", "record", r.Store.Describe())
		err = nil
	}
	if err != nil && st.State == backends.Killed {
		// The backend confirmed the cancel: KILLED is true and the step is
		// over (exit 3), though the record still shows the job's last state.
		// The next invoke or cleanup on it finds the job ended, or cancels
		// it again.
		r.Log.Warn("the job was cancelled, but recording KILLED failed; the record keeps its last state", "record", r.Store.Describe(), "err", err)
		return nil
	}
	if err != nil {
		return backends.Transient(fmt.Errorf("the job ended %s, but recording that in %s failed: %w", st.State, r.Store.Describe(), err))
	}
	r.Log.Info("job ended", "state", st.State, "backend_state", st.Raw, "message", st.Message)
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
