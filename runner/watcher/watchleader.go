package watcher

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/record"
)

// watchLeader is the watcher of a watch group, run by the invoke that
// holds the group's lease (see watchgroup.go). It follows the group's
// records through one Kubernetes watch of the namespace's records, asks
// the cluster for all their jobs in one batched query per round, and
// writes a state it saw into the record of a job whose invoke has not
// recorded it yet. It never submits, cancels, or writes a job's state.
type watchLeader struct {
	m       *Member
	be      backends.StatusBatcher
	closeBe func()
	version string // the lease's version this leader holds
	cancel  context.CancelFunc
	done    chan struct{}
	// firstRound closes after the first round: a stop waits for it (see stop).
	firstRound chan struct{}
	rounded    sync.Once
	// listed closes once the group's records were first listed.
	listed     chan struct{}
	listedOnce sync.Once
	// lost is set when another invoke took the lease: this watcher then
	// has nothing to hand on.
	lost atomic.Bool
	// noPatch: the Role denies patch; observations are updates instead.
	noPatch atomic.Bool
	// untrusted asks keepLease to hold the lease as just taken (distrust).
	untrusted atomic.Bool

	mu   sync.Mutex
	okAt time.Time // the last round that worked
	// lastAsk is when the last query was sent (a successor's first waits
	// for the budget's interval after it).
	lastAsk time.Time
	jobs    map[string]*record.Record // the group's followed jobs, by record name
	said    map[string]string         // the observation last written, by record name
	wrote   map[string]written        // and where, by record name
	// misses counts the rounds in a row whose query left a job out.
	misses map[string]int
	// queue holds the observations not written yet, by record name;
	// queued wakes a writer.
	queue  map[string]backends.Status
	queued chan struct{}
}

func startLeader(ctx context.Context, m *Member, version string, be backends.StatusBatcher, closeBe func()) *watchLeader {
	ctx, cancel := context.WithCancel(ctx)
	l := &watchLeader{m: m, be: be, closeBe: closeBe, version: version, cancel: cancel, done: make(chan struct{}), firstRound: make(chan struct{}), listed: make(chan struct{}),
		jobs: map[string]*record.Record{}, said: map[string]string{}, wrote: map[string]written{}, misses: map[string]int{},
		queue: map[string]backends.Status{}, queued: make(chan struct{}, 1)}
	go l.run(ctx)
	return l
}

// working reports whether the leader's queries work: its last good round
// worked within the TTL. A leader none of whose rounds has worked yet is
// not working: its own invoke polls.
//
// A query under way does not count: with it counted, a watcher whose
// queries all timed out (a black-holed or slow list query) kept its lease
// live for ever, and its group sent no request and never reached its
// retry budget (ten steps 11.5 min past their jobs' end on Slurm 22.05).
// A slow answer that comes within the TTL keeps the lease as any does;
// one slower than that leaves the group to poll for itself meanwhile.
func (l *watchLeader) working(now time.Time) bool {
	return l.okAge(now) < leaseTTL
}

// okAge is how long before now this watcher's last query worked (the TTL
// when none has, or longer: not live).
func (l *watchLeader) okAge(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.okAt.IsZero() {
		return leaseTTL
	}
	return max(now.Sub(l.okAt), 0)
}

// queryTimeout bounds one batched query.
const queryTimeout = 30 * time.Second

// slowPause is the longest pause after a slow answer: pausing three times
// its time, up to 5 s, left a starting burst of 100 jobs unwatched for
// 4-8 s at a time while slurmctld was busy with their submits.
const slowPause = 2500 * time.Millisecond

func (l *watchLeader) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// run does a round at most MaxRequestsPerSecond times a second (slow
// answers slow it further: rounds never overlap, and each slow one is
// followed by a pause as long), backs off after a failed
// query (at least as long as a Retry-After says), and renews the lease
// only while rounds work, so that a failing watcher's lease goes stale
// and the invokes poll for themselves. It ends when the lease is lost.
func (l *watchLeader) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer func() {
		l.cancel()
		wg.Wait()
		l.closeBe()
		close(l.done)
	}()
	wg.Add(2 + observeWriters)
	go func() { defer wg.Done(); l.follow(ctx) }()
	go func() { defer wg.Done(); l.keepLease(ctx) }()
	for range observeWriters {
		go func() { defer wg.Done(); l.writeLoop(ctx) }()
	}
	every := time.Duration(float64(time.Second) / l.m.rps)
	back := record.Backoff{Initial: every, Max: 30 * time.Second, Factor: 2, Jitter: 0.1}
	l.awaitListed(ctx)
	l.m.clock.SleepCtx(ctx, l.m.clock.Until(l.m.notBefore)) // the predecessor's last query counts
	for ctx.Err() == nil {
		start := l.m.clock.Now()
		took, asked, err := l.round(ctx)
		// The budget is of requests: a round whose query the backend split
		// into several (500 jobs: three GET jobs/state/ on Slurm 24.11)
		// spends as many intervals. A slow answer (a busy slurmctld, a
		// long job list) spaces the rounds out: after it the watcher
		// pauses as long as it took (up to slowPause), so it never has the
		// cluster's attention more than half the time. The query alone
		// counts: writing the records is the apiserver's time (counting it
		// too left 24.11's cluster unasked for 5 s while a round wrote 100
		// jobs' first observations).
		wait := max(every*time.Duration(backends.BatchRequests(l.be, asked)), took+min(took, slowPause))
		l.rounded.Do(func() { close(l.firstRound) })
		if err != nil {
			if errors.Is(err, backends.ErrAuth) {
				l.distrust()
			}
			// The back-off counts from the failure, not from the query's
			// start: after a 30 s timeout the next query started at once,
			// so one was always under way against a dark cluster.
			wait = max(back.Next(), httpx.RetryAfterOf(err))
			l.m.log.Warn("the cluster's batched status query failed; the jobs poll for themselves until it works", "err", err, "retry_in", wait)
			start = l.m.clock.Now()
		} else {
			back.Reset()
		}
		l.m.clock.SleepCtx(ctx, wait-l.m.clock.Since(start))
	}
}

// keepLease renews the lease every leaseRenewEvery while rounds work, in
// a goroutine of its own: a round slowed by a loaded apiserver (a write
// per changed job) must not let the lease expire under a working watcher.
// The lease as taken is not renewed: the first round that works renews
// it. Losing the lease ends the watcher, which then hands nothing on.
func (l *watchLeader) keepLease(ctx context.Context) {
	t := l.m.clock.NewTicker(leaseRenewEvery / 4)
	defer t.Stop()
	var renewed time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		var v string
		var held bool
		var err error
		switch {
		case l.untrusted.Swap(false):
			v, held, err = l.m.lease.untrust(ctx, l.version, l.m.holder)
		case l.m.clock.Since(renewed) < leaseRenewEvery || !l.working(l.m.clock.Now()):
			continue
		default:
			// The renewal says how long ago the last query worked: a
			// member trusts it one TTL after that, by its own clock.
			v, held, err = l.m.lease.renew(ctx, l.version, l.m.holder, l.okAge(l.m.clock.Now()))
		}
		if !held {
			l.lost.Store(true)
			l.m.log.Info("another invoke took over the cluster's watcher")
			l.cancel()
			return
		}
		if err == nil {
			l.version, renewed = v, l.m.clock.Now()
		}
	}
}

// awaitListed waits, a few seconds at most, for the first list of the
// group's records: a first round before it has nothing to ask and would
// leave the cluster unasked for a whole interval (1 s at every handover).
func (l *watchLeader) awaitListed(ctx context.Context) {
	t := l.m.clock.NewTimer(listWait)
	defer t.Stop()
	select {
	case <-l.listed:
	case <-ctx.Done():
	case <-t.C():
	}
}

const listWait = 3 * time.Second

// round asks the cluster for every followed job's state in one query and
// writes what is new into the records. It returns how long the query took
// and how many jobs it asked for.
func (l *watchLeader) round(ctx context.Context) (time.Duration, int, error) {
	jobs := l.snapshot()
	if len(jobs) == 0 {
		// Nothing asked, nothing shown: the records are not listed yet
		// (the group has this invoke's job at least). Counting it as a
		// working round made a new watcher with a wrong token trusted at
		// once, and the others skip their polls for an interval per take.
		return 0, 0, nil
	}
	ids := make([]string, 0, len(jobs))
	for _, rec := range jobs {
		ids = append(ids, rec.Data[record.KeyID])
	}
	start := l.m.clock.Now()
	l.mu.Lock()
	l.lastAsk = start
	l.mu.Unlock()
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	sts, err := l.be.StatusMany(qctx, ids)
	cancel()
	took := l.m.clock.Since(start)
	if err != nil {
		return took, len(ids), err
	}
	l.markOK()
	l.countMisses(jobs, sts)
	l.enqueue(jobs, sts)
	return took, len(ids), nil
}

// observeWriters is how many records the watcher writes at once: a round
// that saw 100 jobs change (they start together) wrote for 1.7 s one by
// one, and the jobs written last were seen that late.
const observeWriters = 8

// enqueue queues what a round saw (sts) for the records of jobs: the
// writers write it while the next rounds go on. (A round that wrote its
// own observations held the next query back: 100 starting jobs' first
// observations, on an apiserver busy with their pods, left the cluster
// unasked for 7 s, and the first jobs to end were seen that late.) A
// record's newer observation replaces one not written yet.
func (l *watchLeader) enqueue(jobs map[string]*record.Record, sts map[string]backends.Status) {
	l.mu.Lock()
	for name, rec := range jobs {
		if st, ok := sts[rec.Data[record.KeyID]]; ok {
			l.queue[name] = st
		} else if l.misses[name] >= unwatchedAfter {
			l.queue[name] = backends.Status{State: unwatched}
		}
	}
	n := len(l.queue)
	l.mu.Unlock()
	if n > 0 {
		l.wake()
	}
}

func (l *watchLeader) wake() {
	select {
	case l.queued <- struct{}{}:
	default:
	}
}

// pop takes the most pressing queued observation: this invoke's own job
// first, then jobs that ended, then (unless endsOnly) any. It returns the record as the
// watcher knows it now; a job no longer followed (its record final or
// gone) is dropped.
func (l *watchLeader) pop(endsOnly bool) (string, *record.Record, backends.Status, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.queue) > 0 {
		best, rank := "", 3
		if endsOnly {
			rank = 2
		}
		for name, st := range l.queue {
			r := 2
			switch {
			case name == l.m.own:
				r = 0
			case st.State.Final():
				r = 1
			}
			if r < rank {
				best, rank = name, r
			}
		}
		if best == "" {
			return "", nil, backends.Status{}, false
		}
		st := l.queue[best]
		delete(l.queue, best)
		if len(l.queue) > 0 {
			l.wake() // another writer takes the next
		}
		if rec, ok := l.jobs[best]; ok {
			return best, rec, st, true
		}
	}
	return "", nil, backends.Status{}, false
}

// writeLoop writes queued observations until the watcher stops, and then
// the ends still queued, for up to 10 s: a leader stops when its own job
// ends, which it may learn from its last round, and the others' ends must
// not wait for its successor's first round. The rest is dropped (the
// successor's rounds see it again): writing 100 jobs' first observations
// held a stopping leader's exit back 7 s.
func (l *watchLeader) writeLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if name, rec, st, ok := l.pop(false); ok {
			// A write under way is finished even if the watcher stops.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			l.observe(wctx, name, rec, st)
			cancel()
			continue
		}
		select {
		case <-l.queued:
		case <-ctx.Done():
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for {
		name, rec, st, ok := l.pop(true)
		if !ok || dctx.Err() != nil {
			return
		}
		l.observe(dctx, name, rec, st)
	}
}

// unwatched is the observation that tells an invoke the watcher's query
// does not report its job (Slurm's jobs/state/ leaves out a pending job,
// IBM Quantum's list ends at its last page read): it polls for itself,
// until the watcher reports the job again. It is written once a job was
// missing from unwatchedAfter rounds in a row.
const (
	unwatched      backends.State = "UNWATCHED"
	unwatchedAfter                = 3
)

// countMisses counts, per job, the rounds in a row whose query left it out.
func (l *watchLeader) countMisses(jobs map[string]*record.Record, sts map[string]backends.Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, rec := range jobs {
		if _, ok := sts[rec.Data[record.KeyID]]; ok {
			delete(l.misses, name)
		} else {
			l.misses[name]++
		}
	}
}

// observe writes st into the record of job name, unless it was written
// before, or the record tells it already: its invoke recorded that state,
// and an observation of the job's id says the watcher covers it. The
// first observation of a job is written even when its invoke knows the
// state: it is what tells the invoke that the watcher covers its job
// (see Member.covered), so that it may skip its own polls.
//
// What the record holds counts only if its tag verifies: one a forger
// wrote (or an earlier observation of this watcher written back) is
// written over with what this watcher saw, at its next round. Not before
// the watch brings this watcher's own last write (rec not newer than
// that write): the record as the watch last showed it may lag it.
func (l *watchLeader) observe(ctx context.Context, name string, rec *record.Record, st backends.Status) {
	d, word := rec.Data, rawWord(st.Raw)
	if l.m.covers(name, d, d[record.KeyID]) && st.State != unwatched && d[record.KeyJobStatus] == string(st.State) && rawWord(d[record.KeyRawState]) == word {
		return
	}
	obs := d[record.KeyID] + " " + string(st.State) + " " + word
	if o, ok := l.m.observation(name, d[record.KeyWatchObserved]); ok && o.id+" "+string(o.state)+" "+o.raw == obs {
		return
	}
	l.mu.Lock()
	w := l.wrote[name]
	l.mu.Unlock()
	if w.obs == obs && (rec.Version == w.from || rec.Version == w.as) {
		return // written; the watch has not brought it yet
	}
	// One key patched at the version the watch brought: a whole-object
	// update from a store that had not read the record itself cost a GET
	// before each write (half of a leader's requests).
	store := &record.ConfigMapStore{Client: l.m.lease.c, Namespace: l.m.lease.ns, Name: name}
	out, err := l.write(ctx, store, rec, l.m.sealObservation(name, obs))
	if err != nil {
		// A conflict: the invoke wrote meanwhile; the watch brings the new
		// version and the next round looks again.
		l.m.log.Debug("writing an observation", "record", name, "err", err)
		return
	}
	l.mu.Lock()
	l.said[name] = obs
	l.wrote[name] = written{obs: obs, from: rec.Version, as: out.Version}
	l.mu.Unlock()
}

// written is an observation a watcher wrote into a record: over which
// version, and the version it made.
type written struct{ obs, from, as string }

// write sets the observation in the record rec of store: patched, or
// read and updated where the pods' Role grants no patch (a Role written
// for an older release), which costs a GET a write.
func (l *watchLeader) write(ctx context.Context, store *record.ConfigMapStore, rec *record.Record, obs string) (*record.Record, error) {
	if !l.noPatch.Load() {
		out, err := store.PatchData(ctx, rec, map[string]string{record.KeyWatchObserved: obs})
		if !apierrors.IsForbidden(err) {
			return out, err
		}
		if !l.noPatch.Swap(true) {
			l.m.log.Info("the pod's ServiceAccount may not patch ConfigMaps; the watcher reads and updates the records instead (the Role of workflows/rbac grants patch)")
		}
	}
	next := rec.Clone()
	next.Data[record.KeyWatchObserved] = obs
	return store.Update(ctx, next)
}

// distrust makes the group stop trusting this watcher at once when the
// cluster refused its credentials: a wrong token does not mend within the
// lease's TTL, and the invokes, which skipped their polls until the lease
// ran out, were 20 s later than polling alone to ride the failure out and
// exit 75 (50 s against 30 s on the real Slurm). A transient failure keeps
// the lease for its TTL: a blip must not send every invoke to a struggling
// cluster at once. The lease stays held, as just taken, and is trusted
// again once a query works.
func (l *watchLeader) distrust() {
	l.mu.Lock()
	was := !l.okAt.IsZero()
	l.okAt = time.Time{}
	l.mu.Unlock()
	if was {
		l.untrusted.Store(true)
	}
}

func (l *watchLeader) markOK() {
	l.mu.Lock()
	l.okAt = l.m.clock.Now()
	l.mu.Unlock()
}

func (l *watchLeader) snapshot() map[string]*record.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]*record.Record, len(l.jobs))
	for k, v := range l.jobs {
		out[k] = v
	}
	return out
}

// follow keeps jobs current: one list of the namespace's records, then a
// watch from its version (the lister rides over expiry and faults).
func (l *watchLeader) follow(ctx context.Context) {
	// Every ConfigMap of the namespace, whatever its labels: records that
	// IBM's operator or kubectl created carry no managed-by label, and the
	// watcher did nothing for them (their invokes took the lease every
	// ~10 s but it never asked about their jobs).
	lister := record.NewSelectedLister(l.m.lease.c, l.m.lease.ns, "")
	back := record.Backoff{Initial: time.Second, Max: 30 * time.Second, Factor: 2}
	for ctx.Err() == nil {
		items, version, err := lister.List(ctx)
		if err != nil {
			l.m.log.Debug("listing the group's records", "err", err)
			l.m.clock.SleepCtx(ctx, back.Next())
			continue
		}
		for _, it := range items {
			l.put(it.Name, it.Record, false)
		}
		l.listedOnce.Do(func() { close(l.listed) })
		for ev := range lister.Watch(ctx, version) {
			l.put(ev.Listed.Name, ev.Listed.Record, ev.Deleted)
		}
	}
}

// put keeps or drops the record of job name: the group follows a job from
// its id on until its record holds a final state.
func (l *watchLeader) put(name string, rec *record.Record, deleted bool) {
	mine := !deleted && l.m.follows(rec.Data)
	l.mu.Lock()
	defer l.mu.Unlock()
	if mine {
		l.jobs[name] = rec
		return
	}
	delete(l.jobs, name)
	delete(l.said, name)
	delete(l.wrote, name)
	delete(l.misses, name)
}

// stop ends the watcher and gives the lease up: to the invoke of a job
// that goes on (told through its record, it takes the lease at once), or
// deleted when the group has no job left.
//
// A leader that took the lease and at once saw its own job end has not
// told the others anything yet, and they may trust its lease for a while:
// it does one round before it stops (its query bounded by a few seconds).
//
// It reports whether it gave the lease up: false when the lease was
// another's by then.
func (l *watchLeader) stop(ctx context.Context) bool {
	t := l.m.clock.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-l.firstRound:
	case <-l.done:
	case <-t.C():
	}
	l.cancel()
	<-l.done
	if l.lost.Load() {
		return false // the lease is another's: nothing to hand on
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	l.mu.Lock()
	l.m.asked = l.lastAsk
	l.mu.Unlock()
	return l.m.handOn(ctx, l.successors(), l.m.holder, l.okAge(l.m.clock.Now()))
}

// successors are the group's jobs that go on, as far as this watcher
// knows: not its own, and not one seen to end (its invoke may be ending
// too, or frozen, and would not take the lease). The newest submitted come first:
// likely the last to end, their invoke leads longest, and the lease
// changes hands less often (4-5 leaders for 100 jobs in name order).
func (l *watchLeader) successors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	ended := func(o observation, ok bool, id string) bool { return ok && o.id == id && o.state.Final() }
	for name, rec := range l.jobs {
		// An end this watcher or an earlier one saw: its invoke, ending
		// or frozen, would not take the lease.
		id := rec.Data[record.KeyID]
		said, ok := parseObservation(l.said[name])
		inRecord, inOK := l.m.observation(name, rec.Data[record.KeyWatchObserved])
		if name != l.m.own && !ended(said, ok, id) && !ended(inRecord, inOK, id) {
			names = append(names, name)
		}
	}
	submitted := func(name string) time.Time { // the submit intent's time, to the nanosecond
		return l.m.submitted(l.jobs[name].Data)
	}
	sort.Slice(names, func(i, j int) bool {
		ti, tj := submitted(names[i]), submitted(names[j])
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return names[i] < names[j] // the same successor for the same group
	})
	return names
}
