package runner

import "time"

// cancelState says where the cancellation of the remote job stands while
// invoke follows it. Its transitions are the methods of cancellation; each
// is small enough to test on its own.
type cancelState int

const (
	// cancelNone: nobody asked to stop the job.
	cancelNone cancelState = iota
	// cancelByKill: kill=true in the record. Cancel the job and wait up to
	// CancelWait for the backend to confirm; while it has not accepted the
	// cancel request, keep asking for as long as the retry budget lasts.
	cancelByKill
	// cancelBySignal: SIGTERM (Argo stop or terminate, KFP terminate, a
	// deadline). Cancel the job and wait up to Grace.
	cancelBySignal
	// cancelDetached: SIGTERM, but only this pod is going away while its
	// step goes on: leave the job running for the retry. Final.
	cancelDetached
	// cancelExpired: the wait for the backend to confirm is over (CancelWait
	// or the retry budget after a kill, Grace after SIGTERM). Final. The job
	// is KILLED only if the backend accepted the cancel request; otherwise
	// the cancel is pending: kill=true stays in the record for a retry or
	// cleanup to finish, and invoke exits 75 (see cancelPending).
	cancelExpired
)

func (s cancelState) String() string {
	switch s {
	case cancelNone:
		return "none"
	case cancelByKill:
		return "kill requested"
	case cancelBySignal:
		return "terminated"
	case cancelDetached:
		return "detached"
	case cancelExpired:
		return "grace expired"
	}
	return "invalid"
}

// cancellation is the cancellation state with what its transitions need.
type cancellation struct {
	state    cancelState
	since    time.Time // when cancelling was first asked for
	accepted bool      // the backend accepted the cancel request
}

// unconfirmed reports whether the job was to be cancelled and the backend
// never accepted the cancel request.
func (c *cancellation) unconfirmed() bool {
	return c.state != cancelNone && c.state != cancelDetached && !c.accepted
}

// requested reports whether the job is being cancelled and invoke waits for
// the backend to confirm.
func (c *cancellation) requested() bool {
	return c.state == cancelByKill || c.state == cancelBySignal
}

// kill is kill=true seen in the record: none → byKill. It reports whether
// the state changed (a kill seen again changes nothing).
func (c *cancellation) kill(now time.Time) bool {
	if c.state != cancelNone {
		return false
	}
	c.state, c.since = cancelByKill, now
	return true
}

// signal is SIGTERM: none or byKill → detached when only this pod goes away
// (detached), else → bySignal. A kill's start time stands. The backend is
// asked again under the grace period's context, in case the earlier request
// failed with the cancelled one. It reports whether the state changed.
func (c *cancellation) signal(now time.Time, detached bool) bool {
	if c.state != cancelNone && c.state != cancelByKill {
		return false
	}
	if detached {
		c.state = cancelDetached
		return true
	}
	if c.since.IsZero() {
		c.since = now
	}
	c.state, c.accepted = cancelBySignal, false
	return true
}

// expire ends the wait for the backend to confirm when it is due: byKill →
// expired after cancelWait once the backend accepted the cancel request,
// else after budget (a backend out of reach is given the retry budget);
// bySignal → expired after grace or when the grace period's context is over
// (graceOver). It reports whether the state is expired.
func (c *cancellation) expire(now time.Time, cancelWait, budget, grace time.Duration, graceOver bool) bool {
	switch c.state {
	case cancelByKill:
		limit := cancelWait
		if !c.accepted {
			limit = max(cancelWait, budget)
		}
		if now.Sub(c.since) >= limit {
			c.state = cancelExpired
		}
	case cancelBySignal:
		if now.Sub(c.since) >= grace || graceOver {
			c.state = cancelExpired
		}
	}
	return c.state == cancelExpired
}
