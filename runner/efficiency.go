package runner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// AccountingWait is the ceiling on reading an ended job's accounting:
// slurmdbd writes a job's end asynchronously, so its record may lag the
// state slurmctld reported. Past it the record says the accounting was
// unavailable; the step's outcome never waits longer for it.
const AccountingWait = 10 * time.Second

// recordEfficiency reads what the ended job used (backends.Accountant),
// within AccountingWait and never after SIGTERM, and writes it to the
// result and to the record. A backend that keeps no accounting (local,
// Ray, LSF, Quantum) gets no efficiency at all, not an "unavailable" one:
// nothing was expected of it, and the queue wait is in the record's times
// and outputs already. It is best-effort: no failure here changes the
// step's outcome; it is logged.
func (r *run) recordEfficiency(ctx context.Context, be backends.Backend, id string, st backends.Status, log *slog.Logger) {
	acct, ok := unwrapArray(be).(backends.Accountant)
	if !ok || r.result.Efficiency != "" { // none, or written with the final state (peekEfficiency)
		return
	}
	r.result.Efficiency = r.efficiency(ctx, acct, id, st, log).String()
	wctx, cancel := r.stopping(ctx, AccountingWait)
	defer cancel()
	err := r.update(wctx, func(d map[string]string) (bool, error) {
		c := record.Set(d, record.KeyEfficiency, r.result.Efficiency)
		if n := r.backendRequests(); n != "" { // the accounting's own requests
			c = record.Set(d, record.KeyBackendRequests, n) || c
		}
		return c, nil
	})
	if err != nil {
		log.Warn("could not record the job's efficiency; the step output has it", "record", r.Store.Describe(), "err", err)
	}
}

// efficiencyPeek bounds peekEfficiency's one request: the longest the
// final state waits for the accounting.
const efficiencyPeek = 2 * time.Second

// peekEfficiency asks the accounting once, before the job's final state is
// written, so that one write carries both when the accounting already
// knows the job's end, or knows it keeps none (24.11 without slurmdbd):
// the write of its own after the final state is then saved. It never
// waits for an accounting that lags (no retry: recordEfficiency's, after
// the final write), so the final state is held back by one request at
// most, within efficiencyPeek.
func (r *run) peekEfficiency(ctx context.Context, be backends.Backend, id string, st backends.Status) {
	acct, ok := unwrapArray(be).(backends.Accountant)
	if !ok || !st.State.Final() || ctx.Err() != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, efficiencyPeek)
	defer cancel()
	u, err := acct.Usage(pctx, id)
	switch {
	case err == nil:
		r.result.Efficiency = record.NewEfficiency(u, st.SubmitTime, st.StartTime).String()
	case errors.Is(err, backends.ErrNoAccounting):
		r.result.Efficiency = record.Unavailable(keepsNone, st.SubmitTime, st.StartTime).String()
	}
}

// keepsNone is why a cluster without accounting has no efficiency.
const keepsNone = "the cluster keeps none"

// efficiency asks the backend's accounting until it knows the job's end,
// with jittered back-off, for at most AccountingWait. Its reason for
// unavailable accounting is ours alone (the server's words go to the log).
func (r *run) efficiency(ctx context.Context, acct backends.Accountant, id string, st backends.Status, log *slog.Logger) record.Efficiency {
	if ctx.Err() != nil {
		return record.Unavailable("the step was stopped before it was read", st.SubmitTime, st.StartTime)
	}
	actx, cancel := context.WithTimeout(ctx, AccountingWait)
	defer cancel()
	b := record.Backoff{Initial: 500 * time.Millisecond, Max: 3 * time.Second}
	for {
		u, err := acct.Usage(actx, id)
		if err == nil {
			return record.NewEfficiency(u, st.SubmitTime, st.StartTime)
		}
		lagging := errors.Is(err, backends.ErrNotFound) || errors.Is(err, backends.ErrTransient)
		if !lagging || !record.SleepCtx(actx, b.Next()) {
			if errors.Is(err, backends.ErrNoAccounting) {
				// Nothing failed: the cluster keeps none (no slurmdbd), which
				// the efficiency output says; not worth a line in every step.
				log.Debug("the cluster keeps no accounting")
			} else {
				log.Info("the job's accounting could not be read", "err", err)
			}
			why := "reading it failed (the step's log says why)"
			switch {
			case errors.Is(err, backends.ErrNoAccounting):
				why = keepsNone
			case lagging:
				why = "the accounting did not know the job's end within " + AccountingWait.String()
			}
			return record.Unavailable(why, st.SubmitTime, st.StartTime)
		}
	}
}
