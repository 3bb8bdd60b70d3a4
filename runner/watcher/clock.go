package watcher

import (
	"context"
	"time"
)

// Clock is the watcher's time, given at construction (MemberConfig.Clock;
// the real one when nil), as client-go's leaderelection takes one: every
// reading of the time and every wait in this package goes through it (an
// AST test holds that), so that a test drives a member's judgement with a
// clock of its own and two members with clocks an hour apart. A lease is
// judged by its reader's clock alone (see leaseJudge).
type Clock interface {
	Now() time.Time
	// NewTimer fires once, d from now by this clock.
	NewTimer(d time.Duration) Timer
	// NewTicker fires every d by this clock until stopped.
	NewTicker(d time.Duration) Timer
}

// Timer is a timer or ticker of a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop()
}

// RealClock is the machine's clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

func (RealClock) NewTicker(d time.Duration) Timer { return realTicker{t: time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop()               { r.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// clock is a Clock with the waits the watcher makes of it; its zero
// value is the machine's clock. Its methods are named as record's and
// time's are, so that internal/fixedwaits sees a fixed wait in a loop here
// too.
type clock struct{ c Clock }

// clockOf is c as the watcher uses it (nil: the machine's clock).
func clockOf(c Clock) clock { return clock{c} }

func (c clock) get() Clock {
	if c.c == nil {
		return RealClock{}
	}
	return c.c
}

func (c clock) Now() time.Time                  { return c.get().Now() }
func (c clock) NewTimer(d time.Duration) Timer  { return c.get().NewTimer(d) }
func (c clock) NewTicker(d time.Duration) Timer { return c.get().NewTicker(d) }

// Since is how long ago t was, by this clock.
func (c clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until is how long until t, by this clock.
func (c clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// SleepCtx waits d by this clock, or until ctx ends (false then), as
// record.SleepCtx does by the machine's.
func (c clock) SleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
