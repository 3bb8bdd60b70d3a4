package agent

import (
	"context"
	"sync"
)

// outbox holds the observations the agent's rounds found, the newest one
// per record, until its writers write them. A round only queues them: a
// round that waited for its writes kept no cadence at a burst (the first
// round of 1,000 new jobs wrote 1,000 observations to a loaded apiserver
// for 22 s, and no job's end was seen meanwhile). And the writers take a
// job's end before any other news, so that a backlog of PENDING and
// RUNNING news does not hold it back.
type outbox struct {
	mu     sync.Mutex
	queued map[string]queuedChange // by record (namespace/name)
	busy   map[string]string       // the observation being written, by record
	seq    uint64
	ready  chan struct{} // a change may be waiting
}

type queuedChange struct {
	change
	seq uint64 // the order it was queued in
}

func newOutbox() *outbox {
	return &outbox{queued: map[string]queuedChange{}, busy: map[string]string{}, ready: make(chan struct{}, 1)}
}

func recordKey(j job) string { return j.ns + "/" + j.name }

// put queues c, in place of a change of its record still waiting.
func (o *outbox) put(c change) {
	o.mu.Lock()
	o.seq++
	o.queued[recordKey(c.j)] = queuedChange{change: c, seq: o.seq}
	o.mu.Unlock()
	o.wake()
}

// holds reports whether obs (Observation.String) is queued or being
// written for record k: a round need not queue it again.
func (o *outbox) holds(k, obs string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	q, ok := o.queued[k]
	return o.busy[k] == obs || ok && q.obs.String() == obs
}

// take is the change to write next, marked busy until done: a job's end
// before other news, then the longest waiting; never one of a record
// being written (its next change waits for that write).
func (o *outbox) take() (change, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var best *queuedChange
	for k, q := range o.queued {
		if _, busy := o.busy[k]; busy {
			continue
		}
		if best == nil || before(q, *best) {
			best = &q
		}
	}
	if best == nil {
		return change{}, false
	}
	k := recordKey(best.j)
	delete(o.queued, k)
	o.busy[k] = best.obs.String()
	return best.change, true
}

// before orders changes: final states first, then by when queued.
func before(a, b queuedChange) bool {
	if fa, fb := a.obs.State.Final(), b.obs.State.Final(); fa != fb {
		return fa
	}
	return a.seq < b.seq
}

// done ends the write of record k's change.
func (o *outbox) done(k string) {
	o.mu.Lock()
	delete(o.busy, k)
	waiting := len(o.queued) > 0
	o.mu.Unlock()
	if waiting {
		o.wake() // a change of k may have waited for this write
	}
}

func (o *outbox) wake() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// drain writes the queued changes with write until ctx ends; the agent
// runs writers of these at once.
func (o *outbox) drain(ctx context.Context, write func(context.Context, change)) {
	for {
		c, ok := o.take()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-o.ready:
				continue
			}
		}
		o.wake() // another writer may take the next one meanwhile
		write(ctx, c)
		o.done(recordKey(c.j))
		if ctx.Err() != nil {
			return
		}
	}
}
