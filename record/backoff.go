package record

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff yields exponentially growing, jittered delays from Initial to Max.
// The zero Factor means 2 and the zero Jitter means ±20 %.
type Backoff struct {
	Initial, Max time.Duration
	Factor       float64
	Jitter       float64
	next         time.Duration
}

// Next returns the next delay.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.Initial
	}
	d := b.next
	f := b.Factor
	if f == 0 {
		f = 2
	}
	b.next = min(time.Duration(float64(b.next)*f), b.Max)
	return jitter(d, b.Jitter)
}

// Reset starts the sequence again from Initial.
func (b *Backoff) Reset() { b.next = 0 }

func jitter(d time.Duration, j float64) time.Duration {
	if j == 0 {
		j = 0.2
	}
	return time.Duration(float64(d) * (1 + j*(2*rand.Float64()-1)))
}

// SleepCtx sleeps for d or until ctx ends; it reports whether it slept fully.
func SleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
