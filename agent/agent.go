// Package agent is a cluster's long-lived agent: the watch group's leader
// (runner's in-step watcher) made permanent and per cluster. It follows
// every record that names the cluster (label record.LabelCluster) in the
// namespaces it serves, through one watch per namespace; asks the cluster
// for all their jobs in one batched query per interval, whatever their
// number; writes a sealed observation into a record only when its job's
// state differs from what it last told it; and proves it works by a sealed
// heartbeat per namespace whose sequence advances only with answered
// queries. It never submits, cancels or writes a state: an observation only
// makes the record's step ask the backend for its own job.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// The bounds of the query interval (the site's budget: the least time
// between two batched queries to the cluster).
const (
	MinInterval     = 100 * time.Millisecond
	MaxInterval     = 30 * time.Minute
	DefaultInterval = 2 * time.Second
)

// Config is an agent's cluster and what it needs to serve it.
type Config struct {
	Cluster     string
	Backend     string
	ResourceURL string
	// Key authenticates what the agent writes (runner.ClusterKey of the
	// cluster's credentials): steps of the same credentials verify it.
	Key        []byte
	Namespaces []string
	Interval   time.Duration
	Kube       *kube.Client
	Batcher    backends.StatusBatcher
	// Discoverer, when the backend has one (the same backend as Batcher),
	// learns once what every step would ask the cluster before its first
	// request (Slurm's REST API version); the agent publishes its memo in
	// the heartbeat, and the steps recall it instead of asking.
	Discoverer backends.Discoverer
	// Limiter and Loader, when the backend has them (the same backend as
	// Batcher), read the cluster's array limit (every LimitEvery) and its
	// load (every LoadEvery, or the interval if longer): the agent
	// publishes both in the heartbeat, and the steps use them instead of
	// asking (an array's chunks, placement's probe). While no record of
	// the cluster is open (idle), the load is read every IdleLoadEvery.
	Limiter backends.ArrayLimiter
	Loader  backends.LoadPublisher
	// ID names this agent in its heartbeat (host/pid/random).
	ID  string
	Log *slog.Logger
	// Now is the agent's clock (time.Now when nil).
	Now func() time.Time
}

// How often the agent reads the figures it publishes: the array limit is
// a setting of the cluster (read again in case it changed), the load
// changes with every job (as often as steps shared their probes, see
// runner.LoadShareTTL). A figure not read again in twice its period (the
// cluster did not answer) is no longer published.
const (
	LimitEvery = 10 * time.Minute
	LoadEvery  = 5 * time.Second
	// IdleLoadEvery is how often the load is read while no record in the
	// namespaces served names the cluster without a final state: nobody
	// places a job then, and a BridgeCluster's status stays as fresh as
	// this. A record that opens wakes it: the load is read again at the
	// next round, and a measure older than twice LoadEvery is not
	// published meanwhile (a step then probes for itself).
	IdleLoadEvery = time.Minute
)

// unwatchedAfter: a job missing from this many answers in a row is told
// Unwatched, so that its step polls for itself.
const unwatchedAfter = 3

// queryTimeout bounds one batched query.
const queryTimeout = 30 * time.Second

// writers is how many records are written at once (from the outbox).
const writers = 8

// Agent serves one cluster. Make it with New and start it with Run.
type Agent struct {
	cfg Config
	m   *Metrics
	out *outbox // the observations to write (its own lock)

	mu   sync.Mutex
	jobs map[string]*job // by namespace/name
	// open are the records that name the cluster (its label) and hold no
	// final state (with an id or not yet: a placement reads the load
	// before its submit), by namespace/name; none is the agent idle.
	open map[string]bool
	// listed counts the namespaces listed at least once.
	listed int
	seq    uint64
	beats  map[string]*kube.ConfigMap // each namespace's heartbeat as last written
	beatAt time.Time
	okAt   atomic.Int64 // unix nanoseconds of the last answered query (0: none)
	// discovered: the Discoverer has learnt its memo since the agent
	// started or since the cluster last refused a query outright.
	discovered bool
	// The figures it publishes, as last read (at their times).
	limit figure[int]
	load  figure[string]
}

// figure is a value the agent read of the cluster, when, and when it is
// to be read next.
type figure[T any] struct {
	v       T
	at, due time.Time
}

// fresh is f's value while it was read within twice every, else zero.
func (f figure[T]) fresh(now time.Time, every time.Duration) T {
	var zero T
	if f.at.IsZero() || now.Sub(f.at) >= 2*every {
		return zero
	}
	return f.v
}

// job is one followed record and what the agent last told it.
type job struct {
	ns, name string
	rec      *record.Record
	told     string // the observation last written or found (Observation.String)
	misses   int
}

// Check checks cfg's settings (not its clients): an error names the flag.
func Check(cfg Config) error { return cfg.check(false) }

// New checks cfg and makes its agent.
func New(cfg Config) (*Agent, error) {
	if err := cfg.check(true); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	a := &Agent{cfg: cfg, m: newMetrics(), jobs: map[string]*job{}, open: map[string]bool{}, beats: map[string]*kube.ConfigMap{}, out: newOutbox()}
	a.m.lastAnswer(func() float64 {
		if at := a.okAt.Load(); at != 0 {
			return a.cfg.Now().Sub(time.Unix(0, at)).Seconds()
		}
		return -1
	})
	return a, nil
}

func (c Config) check(clients bool) error {
	switch {
	case c.Cluster == "":
		return backends.Invalid("cluster", "is empty; give the name of the cluster this agent serves (the value of the label %s on its records)", record.LabelCluster)
	case record.CheckCluster(c.Cluster) != nil:
		return record.CheckCluster(c.Cluster)
	case c.Interval < MinInterval || c.Interval > MaxInterval:
		return backends.Invalid("query-interval", "is %s; give a duration from %s to %s (the least time between two batched queries to the cluster)", c.Interval, MinInterval, MaxInterval)
	case len(c.Key) == 0:
		return backends.Invalid("credentials-dir", "holds no credentials; mount the cluster's Secret there (what the agent writes is authenticated with a key derived from it)")
	case len(c.Namespaces) == 0:
		return backends.Invalid("namespaces", "is empty; give the namespaces whose records the agent serves (ns1,ns2), or set POD_NAMESPACE")
	case clients && (c.Kube == nil || c.Batcher == nil):
		return errors.New("agent: no Kubernetes client or backend")
	}
	for _, ns := range c.Namespaces {
		if err := record.ValidateNamespace(ns); err != nil {
			return backends.Invalid("namespaces", "%q is not a namespace name: %v", ns, err)
		}
	}
	return nil
}

// Metrics is the agent's metrics registry.
func (a *Agent) Metrics() *Metrics { return a.m }

// Ready reports whether a query has answered.
func (a *Agent) Ready() bool { return a.okAt.Load() != 0 }

// Run serves the cluster until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, ns := range a.cfg.Namespaces {
		wg.Add(1)
		go func() { defer wg.Done(); a.follow(ctx, ns) }()
	}
	for range writers {
		wg.Add(1)
		go func() { defer wg.Done(); a.out.drain(ctx, a.observe) }()
	}
	a.awaitListed(ctx)
	a.loop(ctx)
	// The Kubernetes requests it sent, for the benchmarks (bench/).
	a.cfg.Log.Info("agent stopped", "kubernetes_requests", a.cfg.Kube.Requests())
	return nil
}

// awaitListed waits a few seconds at most for every namespace's first list.
func (a *Agent) awaitListed(ctx context.Context) {
	back := record.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: 0.2}
	end := time.Now().Add(3 * time.Second)
	for ctx.Err() == nil && time.Now().Before(end) {
		a.mu.Lock()
		n := a.listed
		a.mu.Unlock()
		if n >= len(a.cfg.Namespaces) {
			return
		}
		record.SleepCtx(ctx, back.Next())
	}
}

// loop runs one round per interval (a round whose query the backend split
// into several requests spends as many intervals), and backs off, jittered,
// after a failed query (at least as long as a Retry-After says).
func (a *Agent) loop(ctx context.Context) {
	every := a.cfg.Interval
	back := record.Backoff{Initial: every, Max: max(every, 5*time.Minute), Factor: 2, Jitter: 0.2}
	for ctx.Err() == nil {
		start := time.Now()
		asked, err := a.discover(ctx)
		if err == nil {
			a.measure(ctx)
			asked, err = a.round(ctx)
		}
		wait := every * time.Duration(backends.BatchRequests(a.cfg.Batcher, asked))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = max(back.Next(), httpx.RetryAfterOf(err))
			if !errors.Is(err, backends.ErrTransient) && !record.Unreachable(err) {
				// Refused outright (slurmrestd upgraded and no longer
				// serving the version found, say): the next round finds
				// it again first, at most once per back-off.
				a.discovered = false
			}
			a.cfg.Log.Warn("the cluster's batched status query failed; the heartbeat stands still, so steps poll for themselves until it works", "err", err, "retry_in", wait)
		} else {
			back.Reset()
			a.answered(ctx, wait, time.Since(start))
		}
		record.SleepCtx(ctx, wait-time.Since(start))
	}
}

// discover asks the cluster once what the steps would each ask (see
// Config.Discoverer), at the agent's start and after a query was refused
// outright. It returns 0 (no job asked for) and the failure, if any.
func (a *Agent) discover(ctx context.Context) (int, error) {
	if a.cfg.Discoverer == nil || a.discovered {
		return 0, nil
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	memo, err := a.cfg.Discoverer.Discover(qctx)
	a.m.discoveries.Inc()
	if err != nil {
		return 0, err
	}
	a.discovered = true
	a.cfg.Log.Info("asked the cluster what its steps need to know", "memo", memo)
	return 0, nil
}

// measure reads the figures that are due (see LimitEvery, LoadEvery).
func (a *Agent) measure(ctx context.Context) {
	if a.cfg.Limiter != nil {
		refresh(ctx, a, &a.limit, LimitEvery, "could not read the cluster's array limit; steps read it for themselves until it is read", a.cfg.Limiter.ArrayLimit)
	}
	if a.cfg.Loader != nil {
		a.mu.Lock()
		every := a.loadEvery()
		a.mu.Unlock()
		refresh(ctx, a, &a.load, every, "could not measure the cluster's load; placements probe for themselves until it is measured", a.cfg.Loader.MeasureLoad)
	}
}

// figureRetry bounds the wait before a figure whose read failed is read
// again: a failure keeps what was read before, until it is no longer
// fresh.
const figureRetry = time.Minute

// refresh reads f with read if it is due: every after a read that
// answered, min(every, figureRetry) after one that failed (warn says so).
func refresh[T any](ctx context.Context, a *Agent, f *figure[T], every time.Duration, warn string, read func(context.Context) (T, error)) {
	now := a.cfg.Now()
	a.mu.Lock()
	due := f.due // put wakes the load (a.mu)
	a.mu.Unlock()
	if now.Before(due) {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	v, err := read(qctx)
	cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		f.due = now.Add(min(every, figureRetry))
		a.cfg.Log.Warn(warn, "err", err, "retry_in", min(every, figureRetry))
		return
	}
	f.v, f.at, f.due = v, now, now.Add(every)
}

// loadEvery is how often the load is measured: LoadEvery (IdleLoadEvery
// while idle), or the query interval (the site's budget) when longer.
// Called with a.mu held.
func (a *Agent) loadEvery() time.Duration {
	if len(a.open) == 0 {
		return max(IdleLoadEvery, a.cfg.Interval)
	}
	return max(LoadEvery, a.cfg.Interval)
}

// answered advances the sequence after an answered round (or one with
// nothing to ask) and writes the heartbeats when due. every is the time
// between the starts of its rounds now, round how long this one took: the
// heartbeat announces both, so that steps judge it by the cadence it
// keeps (three requests a round for 500 Slurm jobs beat every 6 s and
// more, not every 2 s; see watcher.Heartbeat.Due).
func (a *Agent) answered(ctx context.Context, every, round time.Duration) {
	a.okAt.Store(a.cfg.Now().UnixNano())
	a.mu.Lock()
	a.seq++
	due := time.Since(a.beatAt) >= max(a.cfg.Interval, watcher.HeartbeatFloor)
	if due {
		a.beatAt = time.Now()
	}
	hb := watcher.Heartbeat{Agent: a.cfg.ID, Seq: a.seq, Interval: a.cfg.Interval, Every: every, Round: round}
	if a.cfg.Discoverer != nil {
		hb.Memo = a.cfg.Discoverer.Remember()
	}
	now := a.cfg.Now()
	hb.At, hb.ArrayLimit, hb.Load = now, a.limit.fresh(now, LimitEvery), a.load.fresh(now, a.loadEvery())
	a.mu.Unlock()
	if !due {
		return
	}
	for _, ns := range a.cfg.Namespaces {
		a.beat(ctx, ns, hb)
	}
}

// beat writes heartbeat hb in namespace ns: an update over the version it
// last wrote (one request), else read and written again.
func (a *Agent) beat(ctx context.Context, ns string, hb watcher.Heartbeat) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name := record.AgentConfigMap(a.cfg.Cluster)
	data := watcher.SealHeartbeat(a.cfg.Key, ns, a.cfg.Cluster, hb)
	a.mu.Lock()
	cm := a.beats[ns]
	a.mu.Unlock()
	var err error
	out := &kube.ConfigMap{}
	if cm != nil {
		next := cm.DeepCopy()
		next.Data = data
		followed(next)
		if err = a.cfg.Kube.Update(wctx, kube.ConfigMaps, ns, name, next, out); err == nil {
			a.keepBeat(ns, out)
			return
		}
	}
	cur := &kube.ConfigMap{}
	switch gerr := a.cfg.Kube.Get(wctx, kube.ConfigMaps, ns, name, cur); {
	case apierrors.IsNotFound(gerr):
		cm := &kube.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{record.LabelCluster: a.cfg.Cluster, "app.kubernetes.io/component": "agent"}}, Data: data}
		followed(cm)
		err = a.cfg.Kube.Create(wctx, kube.ConfigMaps, ns, cm, out)
	case gerr != nil:
		err = gerr
	default:
		cur.Data = data
		followed(cur)
		err = a.cfg.Kube.Update(wctx, kube.ConfigMaps, ns, name, cur, out)
	}
	if err != nil {
		a.keepBeat(ns, nil)
		a.cfg.Log.Warn("could not write the agent's heartbeat; steps of this namespace poll for themselves until it is written", "namespace", ns, "err", record.KubeErr(err))
		return
	}
	a.keepBeat(ns, out)
}

// followed labels heartbeat cm for a step's one watch of its record and
// the heartbeat (record.LabelFollow); a heartbeat an older agent wrote
// gets it with its next beat.
func followed(cm *kube.ConfigMap) {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[record.LabelFollow] = record.FollowValue(cm.Name)
}

func (a *Agent) keepBeat(ns string, cm *kube.ConfigMap) {
	a.mu.Lock()
	a.beats[ns] = cm
	a.mu.Unlock()
}

// follow keeps namespace ns's records of the cluster current: a list,
// then a watch from its version (the lister rides over expiry and faults).
func (a *Agent) follow(ctx context.Context, ns string) {
	lister := record.NewSelectedLister(a.cfg.Kube, ns, record.LabelCluster+"="+a.cfg.Cluster)
	back := record.Backoff{Initial: time.Second, Max: 30 * time.Second, Factor: 2, Jitter: 0.2}
	first := true
	for ctx.Err() == nil {
		items, version, err := lister.List(ctx)
		if err != nil {
			a.cfg.Log.Warn("listing the cluster's records", "namespace", ns, "err", err)
			record.SleepCtx(ctx, back.Next())
			continue
		}
		a.replace(ns, items)
		if first {
			first = false
			a.mu.Lock()
			a.listed++
			a.mu.Unlock()
		}
		for ev := range lister.Watch(ctx, version) {
			a.put(ns, ev.Listed.Name, ev.Listed.Record, ev.Deleted)
		}
	}
}

// replace makes items namespace ns's records.
func (a *Agent) replace(ns string, items []record.Listed) {
	seen := map[string]bool{}
	for _, it := range items {
		seen[it.Name] = true
		a.put(ns, it.Name, it.Record, false)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, j := range a.jobs {
		if j.ns == ns && !seen[j.name] {
			delete(a.jobs, k)
		}
	}
	for k := range a.open {
		if n, name, _ := strings.Cut(k, "/"); n == ns && !seen[name] {
			delete(a.open, k)
		}
	}
	a.m.open.Set(float64(len(a.open)))
}

// put keeps or drops a record: the agent follows a job from its id on
// until its record holds a final state, if the record is of this cluster's
// backend and URL.
func (a *Agent) put(ns, name string, rec *record.Record, deleted bool) {
	k := ns + "/" + name
	a.mu.Lock()
	defer a.mu.Unlock()
	// Every record listed bears the cluster's label; so does the agent's
	// own heartbeat, which is no record.
	a.keepOpen(k, !deleted && name != record.AgentConfigMap(a.cfg.Cluster) && !backends.State(rec.Data[record.KeyJobStatus]).Final())
	if deleted || !a.serves(rec.Data) {
		delete(a.jobs, k)
		a.m.served.Set(float64(len(a.jobs)))
		return
	}
	j := a.jobs[k]
	if j == nil || j.rec.Data[record.KeyID] != rec.Data[record.KeyID] {
		j = &job{ns: ns, name: name}
		// What an earlier agent told the record counts as told.
		if o, ok := watcher.ReadObservation(a.cfg.Key, name, rec.Data[record.KeyWatchObserved]); ok && o.ID == rec.Data[record.KeyID] {
			j.told = o.String()
		}
		a.jobs[k] = j
	}
	j.rec = rec
	a.m.served.Set(float64(len(a.jobs)))
}

// keepOpen notes whether record k is open (see Agent.open); the first to
// open after an idle spell has the load read at the next round. Called
// with a.mu held.
func (a *Agent) keepOpen(k string, open bool) {
	switch {
	case !open:
		delete(a.open, k)
	case len(a.open) == 0:
		a.load.due = time.Time{}
		fallthrough
	default:
		a.open[k] = true
	}
	a.m.open.Set(float64(len(a.open)))
}

// serves reports whether record data d is a job this agent asks for: an
// id, no final state, and this cluster's backend and URL (a record that
// names the cluster but another place is not the agent's to ask about).
func (a *Agent) serves(d map[string]string) bool {
	if d[record.KeyID] == "" || backends.State(d[record.KeyJobStatus]).Final() {
		return false
	}
	if b := strings.TrimSpace(d[record.KeyBackend]); b != "" && b != a.cfg.Backend {
		return false
	}
	return strings.TrimSpace(d[record.KeyResourceURL]) == a.cfg.ResourceURL
}

// round asks for every followed job in one query and writes what changed.
// It returns how many jobs it asked for.
func (a *Agent) round(ctx context.Context) (int, error) {
	jobs := a.snapshot()
	if len(jobs) == 0 {
		return 0, nil
	}
	ids := make([]string, 0, len(jobs))
	seen := map[string]bool{}
	for _, j := range jobs {
		if id := j.rec.Data[record.KeyID]; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	start := time.Now()
	sts, err := a.cfg.Batcher.StatusMany(qctx, ids)
	cancel()
	a.m.queries.Inc()
	a.m.queryTime.Observe(time.Since(start).Seconds())
	if err != nil {
		a.m.failures.Inc()
		return len(ids), err
	}
	for _, c := range a.changes(jobs, sts) {
		a.out.put(c)
	}
	return len(ids), nil
}

// snapshot is a copy of the followed jobs.
func (a *Agent) snapshot() []job {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]job, 0, len(a.jobs))
	for _, j := range a.jobs {
		out = append(out, *j)
	}
	return out
}

// change is an observation to write into a record.
type change struct {
	j   job
	obs watcher.Observation
}

// changes are the observations that differ from what each job's record was
// last told: a state the answer gave, or Unwatched for a job it left out
// unwatchedAfter times in a row.
func (a *Agent) changes(jobs []job, sts map[string]backends.Status) []change {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []change
	for _, snap := range jobs {
		j := a.jobs[snap.ns+"/"+snap.name]
		if j == nil {
			continue
		}
		id := snap.rec.Data[record.KeyID]
		st, ok := sts[id]
		if ok {
			j.misses = 0
		} else if j.misses++; j.misses < unwatchedAfter {
			continue
		} else {
			st = backends.Status{State: watcher.Unwatched}
		}
		if o := watcher.ObservationOf(id, st); o.String() != j.told && !a.out.holds(recordKey(snap), o.String()) {
			out = append(out, change{j: snap, obs: o})
		}
	}
	return out
}

// observe writes change c into its record as the agent holds it now (a
// write that fails, a conflict with the step's own write, is queued again
// by the next round); a record no longer followed (final, deleted, of
// another attempt) is left alone.
func (a *Agent) observe(ctx context.Context, c change) {
	a.mu.Lock()
	var rec *record.Record
	if j := a.jobs[recordKey(c.j)]; j != nil && j.rec.Data[record.KeyID] == c.obs.ID {
		rec = j.rec
	}
	a.mu.Unlock()
	if rec == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store := &record.ConfigMapStore{Client: a.cfg.Kube, Namespace: c.j.ns, Name: c.j.name}
	sealed := watcher.SealObservation(a.cfg.Key, c.j.name, c.obs, a.cfg.Now())
	if _, err := store.PatchData(wctx, rec, map[string]string{record.KeyWatchObserved: sealed}); err != nil {
		a.cfg.Log.Debug("writing an observation", "record", c.j.ns+"/"+c.j.name, "err", err)
		return
	}
	a.m.observations.Inc()
	a.mu.Lock()
	if j := a.jobs[c.j.ns+"/"+c.j.name]; j != nil && j.rec.Data[record.KeyID] == c.obs.ID {
		j.told = c.obs.String()
	}
	a.mu.Unlock()
}
