package cluster

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"
)

// Book is what a process has learnt of its clusters, each asked once:
// the steps that run in one process (the benchmarks' hundreds of invokes,
// a long-lived service) share one, so that N steps on one cluster ask its
// array limit once, not N times, as its agent asks discovery once for
// every step. A Cluster made with a Book (Spec.Book) has the limits the
// book knows filled in, and asks for the others through it. Make it with
// NewBook.
type Book struct {
	mu     sync.Mutex
	arrays map[string]*asking // by bookKey
}

// asking is one cluster's array limit: being asked (done open) or known
// (done closed, as of at).
type asking struct {
	done chan struct{}
	n    int
	at   time.Time
}

// LimitsAge is how long a limit the book read stays known: a setting of
// the cluster, read again after a while in case it changed (as the agent
// reads it again, see agent.LimitEvery).
const LimitsAge = 10 * time.Minute

// NewBook makes an empty book.
func NewBook() *Book { return &Book{arrays: map[string]*asking{}} }

// known is the limits the book knows of the cluster of key (zero for
// unknown or too old).
func (b *Book) known(key string) Limits {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.arrays[key]
	if e == nil || !e.current() {
		return Limits{}
	}
	return Limits{MaxArraySize: e.n}
}

// current reports whether e was answered within LimitsAge.
func (e *asking) current() bool {
	return isClosed(e.done) && !e.at.IsZero() && time.Since(e.at) < LimitsAge
}

// arrayLimit is the array limit of the cluster of key, asked with ask
// only when the book does not know it: one ask at a time per cluster, the
// others wait for its answer (or their ctx). A failed ask is not kept:
// the next caller asks again.
func (b *Book) arrayLimit(ctx context.Context, key string, ask func(context.Context) (int, error)) (int, error) {
	for {
		b.mu.Lock()
		e := b.arrays[key]
		switch {
		case e != nil && e.current():
			b.mu.Unlock()
			return e.n, nil
		case e != nil && !isClosed(e.done): // being asked: its answer serves
			b.mu.Unlock()
			select {
			case <-e.done:
				continue // answered (or failed) meanwhile: look again
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		// Unknown, failed or too old: this caller asks.
		e = &asking{done: make(chan struct{})}
		b.arrays[key] = e
		b.mu.Unlock()
		n, err := ask(ctx)
		b.mu.Lock()
		if err == nil {
			e.n, e.at = n, time.Now()
		} else if b.arrays[key] == e {
			delete(b.arrays, key)
		}
		close(e.done)
		b.mu.Unlock()
		return n, err
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// bookKey is the cluster's identity as a Book files it (in memory only):
// its backend, URL and credentials, as its Group is derived from, without
// the slow digest.
func (id *identity) bookKey() string {
	sum := sha256.Sum256([]byte(id.backend + "\x00" + id.url + "\x00" + id.text))
	return string(sum[:])
}
