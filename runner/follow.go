package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// notFoundGrace: a job the backend does not know yet right after submit is
// given this long to appear before it counts as lost.
const notFoundGrace = 30 * time.Second

// follow polls the job until it reaches a final state. Polling is adaptive:
// fast after each state change, backing off to maxPoll, jittered. A kill
// request (record watch) or SIGTERM (ctx) cancels the remote job and waits,
// within CancelWait or Grace, for the backend to confirm.
func (iv *Invoker) follow(ctx context.Context, be backends.Backend, id string, maxPoll time.Duration,
	watch <-chan *Record, log *slog.Logger) (backends.Status, error) {
	poll := &Backoff{Initial: min(iv.MinPoll, maxPoll), Max: maxPoll, Factor: 1.6, Jitter: 0.1}
	logs, _ := be.(backends.LogReader)
	iv.logOff, _ = strconv.ParseInt(iv.rec.Data[KeyLogOffset], 10, 64)
	out := &scrubWriter{w: iv.LogOut, secrets: iv.Secrets}
	defer func() { _ = out.Flush() }()
	var (
		last          backends.Status
		seen          bool
		start         = time.Now()
		failingSince  time.Time
		lastErr       error
		cancelAt      time.Time
		cancelled     bool // the backend accepted the cancel
		terminated    bool
		pctx          = ctx
		stopGraceTime = func() {}
	)
	defer func() { stopGraceTime() }()
	requestCancel := func(why string) {
		if cancelAt.IsZero() {
			cancelAt = time.Now()
			log.Info("cancelling the remote job", "why", why)
		}
		if cancelled {
			return
		}
		cctx, cancel := context.WithTimeout(pctx, 10*time.Second)
		defer cancel()
		if err := be.Cancel(cctx, id); err != nil {
			log.Warn("cancel failed; will try again", "err", err)
			return
		}
		cancelled = true
		poll.Reset()
	}
	readLogs := func() {
		if logs == nil {
			return
		}
		next, err := logs.ReadLogs(pctx, id, iv.logOff, out)
		if err != nil {
			log.Debug("reading job output", "err", err)
		}
		iv.logOff = max(iv.logOff, next)
	}
	for {
		st, err := be.Status(pctx, id)
		if err == nil {
			failingSince, lastErr = time.Time{}, nil
			if !seen || st.State != last.State || st.Raw != last.Raw {
				log.Info("job state", "state", st.State, "backend_state", st.Raw, "reason", st.Reason)
				poll.Reset()
			}
			seen, last = true, st
			readLogs()
			if st.State.Final() {
				return st, nil
			}
			wstart := time.Now()
			if werr := iv.writeStatus(pctx, st); werr != nil {
				log.Warn("could not record the job state; will try again", "err", werr)
			} else {
				log.Debug("recorded the job state", "state", st.State, "took", time.Since(wstart).Round(time.Millisecond))
			}
			if st.State == backends.Running {
				crashPoint("following")
			}
		} else if errors.Is(err, backends.ErrNotFound) && backends.State(iv.rec.Data[KeyJobStatus]).Final() {
			// A re-attach (say, to finish uploads) after the backend forgot
			// the job: what we recorded at its end stands.
			return iv.recordedStatus(), nil
		} else if errors.Is(err, backends.ErrNotFound) && (seen || time.Since(start) > notFoundGrace) {
			msg := fmt.Sprintf("the backend no longer knows job %s", id)
			if seen {
				msg += fmt.Sprintf(" (last seen %s)", last.Raw)
			}
			return backends.Status{State: backends.Unknown, Raw: last.Raw, Message: msg,
				SubmitTime: last.SubmitTime, StartTime: last.StartTime}, nil
		} else if pctx.Err() == nil {
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			lastErr = err
			if time.Since(failingSince) > iv.RetryBudget {
				return last, backends.Transient(fmt.Errorf("lost contact with the backend for %s: %w", iv.RetryBudget, err))
			}
			log.Warn("status request failed; will try again", "err", err)
		}
		if !cancelAt.IsZero() {
			if !cancelled {
				requestCancel("retry")
			}
			limit := iv.CancelWait
			if terminated {
				limit = iv.Grace
			}
			if time.Since(cancelAt) >= limit || (terminated && pctx.Err() != nil) {
				msg := "cancelled"
				if !cancelled {
					msg = "cancel requested, but the backend did not accept it"
					if lastErr != nil {
						msg += ": " + lastErr.Error()
					}
				} else if seen {
					msg += fmt.Sprintf("; the backend still reported %s when invoke stopped waiting", last.Raw)
				}
				return backends.Status{State: backends.Killed, Raw: last.Raw, Message: msg,
					SubmitTime: last.SubmitTime, StartTime: last.StartTime, EndTime: time.Now()}, nil
			}
		}
		d := poll.Next()
		if !cancelAt.IsZero() {
			d = min(d, 250*time.Millisecond)
		}
		// Wait until the next poll is due. A change of the record that is
		// not a kill (most are our own writes) must not poll early: that
		// would also advance the backoff, and a short job would be seen late.
		due := time.Now().Add(d)
		for wait := true; wait; {
			timer := time.NewTimer(time.Until(due))
			select {
			case <-timer.C:
				wait = false
			case rec, ok := <-watch:
				if !ok {
					watch = nil
					break
				}
				if rec.UID == iv.rec.UID {
					iv.rec = rec
				}
				if killRequested(rec.Data) && cancelAt.IsZero() {
					requestCancel("kill=true in " + iv.Store.Describe())
					wait = false
				}
			case <-pctx.Done():
				wait = false
				if !terminated && iv.detach(ctx, log) {
					timer.Stop()
					return last, backends.Transient(fmt.Errorf("this pod was deleted while following job %s, which keeps running for the retry to re-attach", id))
				}
				if !terminated {
					terminated = true
					log.Info("stop requested", "cause", context.Cause(ctx), "grace", iv.Grace)
					var cancel context.CancelFunc
					pctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), iv.Grace)
					stopGraceTime = cancel
					cancelled = false // cancel again under the new context if the first try failed
					requestCancel(context.Cause(ctx).Error())
				}
			}
			timer.Stop()
		}
	}
}

// detach asks, within a few seconds of the grace period, whether SIGTERM
// only took this pod away (see Invoker.Detach).
func (iv *Invoker) detach(ctx context.Context, log *slog.Logger) bool {
	if iv.Detach == nil {
		return false
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(5*time.Second, iv.Grace/3))
	defer cancel()
	ok, why := iv.Detach(qctx)
	if ok {
		log.Warn("leaving the job running for the retry to re-attach", "why", why)
	} else {
		log.Info("SIGTERM stops the step", "why", why)
	}
	return ok
}

// recordedStatus rebuilds a status from the record's keys.
func (iv *Invoker) recordedStatus() backends.Status {
	d := iv.rec.Data
	st := backends.Status{State: backends.State(d[KeyJobStatus]), Raw: d[KeyRawState], Reason: d[KeyReason], Message: d[KeyMessage]}
	if c, err := strconv.Atoi(d[KeyExitCode]); err == nil {
		st.ExitCode = &c
	}
	st.SubmitTime, _ = time.Parse(time.RFC3339, d[KeySubmit])
	st.StartTime, _ = time.Parse(time.RFC3339, d[KeyStart])
	st.EndTime, _ = time.Parse(time.RFC3339, d[KeyEnd])
	return st
}

// scrubbed returns st with every text the backend gave scrubbed of secrets:
// a chatty or hostile server may echo a token in any of them.
func (iv *Invoker) scrubbed(st backends.Status) backends.Status {
	st.Message = truncate(iv.Secrets.Scrub(st.Message), 4096)
	st.Raw = truncate(iv.Secrets.Scrub(st.Raw), 256)
	st.Reason = truncate(iv.Secrets.Scrub(st.Reason), 1024)
	return st
}

// statusData is the record's status keys for st.
func (iv *Invoker) statusData(st backends.Status) map[string]string {
	st = iv.scrubbed(st)
	msg := st.Message
	if msg == "" {
		msg = fmt.Sprintf("job %s is %s", iv.result.ID, st.State)
		if st.Raw != "" && st.Raw != string(st.State) {
			msg += " (" + st.Raw + ")"
		}
	}
	d := map[string]string{
		KeyJobStatus: string(st.State),
		KeyMessage:   truncate(iv.Secrets.Scrub(msg), 4096),
		KeyRawState:  st.Raw,
		KeyReason:    st.Reason,
		KeySubmit:    rfc3339(st.SubmitTime),
		KeyStart:     rfc3339(st.StartTime),
		KeyEnd:       rfc3339(st.EndTime),
		KeyExitCode:  "",
	}
	if st.ExitCode != nil {
		d[KeyExitCode] = strconv.Itoa(*st.ExitCode)
	}
	if iv.logOff > 0 {
		d[KeyLogOffset] = strconv.FormatInt(iv.logOff, 10)
	}
	return d
}

// writeStatus writes the status keys if they changed since the last write.
func (iv *Invoker) writeStatus(ctx context.Context, st backends.Status) error {
	want := iv.statusData(st)
	if iv.written != nil && sameStatus(iv.written, want) {
		return nil
	}
	err := iv.update(ctx, func(d map[string]string) (bool, error) {
		changed := false
		for k, v := range want {
			changed = set(d, k, v) || changed
		}
		return changed, nil
	})
	if err == nil {
		iv.written = want
	}
	return err
}

// sameStatus compares two status maps, ignoring the log offset (which alone
// is not worth a write).
func sameStatus(a, b map[string]string) bool {
	for k, v := range b {
		if k != KeyLogOffset && a[k] != v {
			return false
		}
	}
	return true
}

// final records the final state; it must land, so it is retried within the
// retry budget, and failing that invoke exits 75 (a retry re-attaches and
// records it).
func (iv *Invoker) final(ctx context.Context, st backends.Status) error {
	if st.Message == "" {
		st.Message = iv.statusData(st)[KeyMessage]
	}
	st = iv.scrubbed(st)
	iv.result.fill(st)
	wctx := context.WithoutCancel(ctx)
	iv.written = nil
	err := retryTransient(wctx, iv.RetryBudget, func() error { return iv.writeStatus(wctx, st) })
	if errors.Is(err, ErrNoRecord) {
		// cleanup deleted the record while we were stopping the job: the
		// outputs still say what happened.
		iv.Log.Warn("the record was deleted before the final state could be written", "record", iv.Store.Describe())
		err = nil
	}
	if err != nil {
		return backends.Transient(fmt.Errorf("the job ended %s, but recording that in %s failed: %w", st.State, iv.Store.Describe(), err))
	}
	iv.Log.Info("job ended", "state", st.State, "backend_state", st.Raw, "message", st.Message)
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
