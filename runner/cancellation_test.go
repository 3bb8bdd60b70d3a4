package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCancellationTransitions walks every transition of the cancellation
// state, one event at a time, from every state.
func TestCancellationTransitions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const wait, budget, grace = 30 * time.Second, time.Minute, 25 * time.Second
	type event func(c *cancellation) bool
	kill := func(c *cancellation) bool { return c.kill(t0.Add(time.Second)) }
	term := func(c *cancellation) bool { return c.signal(t0.Add(2*time.Second), false) }
	evicted := func(c *cancellation) bool { return c.signal(t0.Add(2*time.Second), true) }
	expireAt := func(d time.Duration, graceOver bool) event {
		return func(c *cancellation) bool { return c.expire(t0.Add(d), wait, budget, grace, graceOver) }
	}
	at := func(s cancelState, accepted bool) cancellation {
		c := cancellation{state: s, accepted: accepted}
		if s != cancelNone {
			c.since = t0
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		from     cancellation
		event    event
		to       cancelState
		changed  bool
		accepted bool
	}{
		{"none, kill: cancel and wait CancelWait", at(cancelNone, false), kill, cancelByKill, true, false},
		{"none, SIGTERM: cancel and wait Grace", at(cancelNone, false), term, cancelBySignal, true, false},
		{"none, SIGTERM on an evicted pod: leave the job", at(cancelNone, false), evicted, cancelDetached, true, false},
		{"none, time passes: nothing", at(cancelNone, false), expireAt(time.Hour, true), cancelNone, false, false},
		{"kill, kill again: nothing", at(cancelByKill, true), kill, cancelByKill, false, true},
		{"kill, SIGTERM: ask again under the grace context", at(cancelByKill, true), term, cancelBySignal, true, false},
		{"kill, SIGTERM on an evicted pod: leave the job", at(cancelByKill, false), evicted, cancelDetached, true, false},
		{"kill, before CancelWait: keep waiting", at(cancelByKill, true), expireAt(wait-time.Millisecond, false), cancelByKill, false, true},
		{"kill, CancelWait over: expired", at(cancelByKill, true), expireAt(wait, false), cancelExpired, true, true},
		{"kill not accepted, CancelWait over: keep asking within the budget", at(cancelByKill, false), expireAt(wait, false), cancelByKill, false, false},
		{"kill not accepted, budget over: expired (pending)", at(cancelByKill, false), expireAt(budget, false), cancelExpired, true, false},
		{"SIGTERM, kill: nothing more", at(cancelBySignal, true), kill, cancelBySignal, false, true},
		{"SIGTERM, SIGTERM again: nothing", at(cancelBySignal, true), term, cancelBySignal, false, true},
		{"SIGTERM, before Grace: keep waiting", at(cancelBySignal, false), expireAt(grace-time.Millisecond, false), cancelBySignal, false, false},
		{"SIGTERM, Grace over: expired", at(cancelBySignal, false), expireAt(grace, false), cancelExpired, true, false},
		{"SIGTERM, grace context ended: expired", at(cancelBySignal, true), expireAt(time.Millisecond, true), cancelExpired, true, true},
		{"detached, kill: final", at(cancelDetached, false), kill, cancelDetached, false, false},
		{"detached, SIGTERM: final", at(cancelDetached, false), term, cancelDetached, false, false},
		{"detached, time passes: final", at(cancelDetached, false), expireAt(time.Hour, true), cancelDetached, false, false},
		{"expired, kill: final", at(cancelExpired, true), kill, cancelExpired, false, true},
		{"expired, SIGTERM: final", at(cancelExpired, true), term, cancelExpired, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.from
			before := c.state
			tc.event(&c)
			assert.Equal(t, tc.to.String(), c.state.String())
			assert.Equal(t, tc.changed, c.state != before, "state changed")
			assert.Equal(t, tc.accepted, c.accepted, "whether the backend's earlier acceptance still counts")
			assert.Equal(t, c.state == cancelByKill || c.state == cancelBySignal, c.requested())
		})
	}
}

// TestCancellationClock: the wait for the backend is measured from the first
// request; a SIGTERM after a kill does not restart it, and the return
// values say whether an event changed anything.
func TestCancellationClock(t *testing.T) {
	t0 := time.Now()
	var c cancellation
	assert.True(t, c.kill(t0))
	assert.False(t, c.kill(t0.Add(time.Second)), "a kill seen again changes nothing")
	assert.True(t, c.signal(t0.Add(10*time.Second), false))
	assert.Equal(t, t0, c.since, "the kill's start stands")
	assert.False(t, c.signal(t0.Add(11*time.Second), false))
	assert.False(t, c.expire(t0.Add(24*time.Second), time.Second, time.Second, 25*time.Second, false),
		"after SIGTERM the limit is Grace, not CancelWait")
	assert.True(t, c.expire(t0.Add(25*time.Second), time.Second, time.Second, 25*time.Second, false))

	var fresh cancellation
	assert.True(t, fresh.signal(t0, false))
	assert.Equal(t, t0, fresh.since)
	assert.Equal(t, "invalid", cancelState(99).String())
}
