package watcher

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/record"
)

// A cluster's watcher: instead of every invoke polling its own job, the
// invokes that follow jobs on one cluster with the same credentials (a
// watch group) elect one of themselves, by a lease in a ConfigMap of
// their namespace, to ask the cluster for all their jobs' states in one
// batched query (backends.StatusBatcher) at most MaxRequestsPerSecond
// times a second. The watcher writes what it sees into each job's record
// (status.watchObserved); every invoke already watches its own record (a
// Kubernetes watch, no polling), and on a change it asks the backend for
// its own job's details once and acts on that answer alone. So the
// watcher never decides a job's fate: it only says when to look. While
// the lease is live an invoke skips its own polls; when the watcher dies,
// freezes or fails its queries the lease goes stale within leaseTTL and
// every invoke polls for itself again until one of them takes the lease.
// Nothing runs besides the invokes themselves, and a run whose record is
// a file, or whose backend cannot batch, polls as before.
//
// Trust: anyone who may write the namespace's ConfigMaps can write the
// lease, the observations and the shared load entries. So each is
// authenticated with an HMAC under the group's key (cluster.Cluster.Key), derived
// from the very credentials that define the group: who cannot read the
// Secret cannot forge it, and a reader ignores what does not verify. A
// lease is trusted only for a renewal this member saw written over the
// version it saw before (a replayed one is not), for one TTL after the
// watcher's last working query, by the member's own clock; an observation
// only makes the invoke ask the backend itself, never decides a state.
// A group without credentials has nothing to key on: it shares nothing,
// and each of its invokes polls for itself.

// Config shapes the watcher of a run whose record is a ConfigMap.
type Config struct {
	// Off makes the invoke poll its own job only, as before the watcher.
	Off bool
	// MaxRequestsPerSecond bounds the watcher's batched queries to one
	// cluster from one namespace (default 1): the step's cluster's Budget
	// (runner puts it there; the watcher reads the cluster's).
	MaxRequestsPerSecond float64
}

const (
	// leaseTTL is how long a watcher's lease stays live without renewal:
	// the longest an invoke trusts a watcher that stopped answering.
	leaseTTL = 10 * time.Second
	// leaseRenewEvery is how often a working watcher renews its lease.
	leaseRenewEvery = 2 * time.Second
	// claimedReadEvery is how often an invoke reads a lease that another
	// took but whose watcher has not worked yet (otherwise once a second).
	claimedReadEvery = 200 * time.Millisecond
)

// Tag is the tag of parts (what, where and the content) under key.
func Tag(key []byte, parts ...string) string {
	mac := hmac.New(sha256.New, key)
	for _, p := range parts {
		mac.Write([]byte(p))
		mac.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:18])
}

// TagOK reports whether tag is parts' tag under key (never without a key).
func TagOK(key []byte, tag string, parts ...string) bool {
	return len(key) > 0 && hmac.Equal([]byte(tag), []byte(Tag(key, parts...)))
}

// MemberConfig is what a step tells the watcher of itself and its job.
type MemberConfig struct {
	// Store is the job's record (a ConfigMap: a file record has no watcher).
	Store *record.ConfigMapStore
	// Data is the record as the step read it; ID its job id ("" before
	// the submit).
	Data map[string]string
	ID   string
	// Holder names this invoke in the lease (runner's DefaultHolder).
	Holder string
	// Cluster is the job's cluster: its Group names the watch group and
	// its Key authenticates what the group shares; its Budget bounds the
	// watcher's queries (1 a second when 0). ClusterName
	// is the BridgeCluster the record names ("" none), whose agent serves.
	Cluster     cluster.Cluster
	ClusterName string
	Watch       Config
	// RetryBudget bounds how long a silent agent is trusted.
	RetryBudget time.Duration
	// NewBatcher makes a backend of the watcher's own, and how to close it.
	NewBatcher func() (backends.StatusBatcher, func(), error)
	// Submitted is when the submit intent in record data was written (the
	// successors' order); AgentView the heartbeat view the step started
	// before its submit (see StartHeartbeatView), nil when none.
	Submitted func(d map[string]string) time.Time
	AgentView *HeartbeatView
	Log       *slog.Logger
	// Clock is the member's time (nil: the machine's); see Clock.
	Clock Clock
}

// NewMember makes this step a member of its cluster's watch group. The
// caller has decided that the watcher applies: a ConfigMap record, a
// backend with batched status, credentials to key the group on, and the
// watcher on (or a cluster named, whose agent it still follows).
func NewMember(cfg MemberConfig) *Member {
	clk := clockOf(cfg.Clock)
	m := &Member{
		own:        cfg.Store.Name,
		holder:     cfg.Holder,
		rps:        positiveOrF(cfg.Cluster.Budget, 1),
		key:        cfg.Cluster.Key(),
		clock:      clk,
		newBatcher: cfg.NewBatcher,
		submitted:  cfg.Submitted,
	}
	m.group = cfg.Cluster.Group()
	// --watcher=false with a cluster (the operator's pods, whose Role names
	// their record and the agent's heartbeat only): the agent is followed,
	// but no in-step watcher is elected, leased or handed on.
	m.agentOnly = cfg.Watch.Off
	m.log = cfg.Log.With("watch_group", m.group)
	m.lease = groupLease(cfg.Store, m.group, m.key, clk)
	m.judge = &leaseJudge{now: clk.Now}
	m.covered, m.joined = m.covers(m.own, cfg.Data, cfg.ID), m.clock.Now()
	if cfg.ClusterName != "" {
		m.joinAgent(cfg)
	}
	// A handover already in the record (to an earlier invoke of this job)
	// is not acted on as new: the lease tells whether it still stands (see
	// live), and close gives it on if it is still this record's.
	m.handover = cfg.Data[record.KeyWatchHandover]
	return m
}

// joinAgent follows the agent of the cluster the record names: its agent
// serves it while its heartbeat advances, and the lease is left alone
// meanwhile. A record made without the cluster's label (IBM's operator,
// kubectl) gets it, for the agent to list it.
func (m *Member) joinAgent(cfg MemberConfig) {
	cs, c := cfg.Store, cfg.ClusterName
	lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := cs.EnsureLabel(lctx, record.LabelCluster, c); err != nil {
		cfg.Log.Warn("could not label the record with its cluster; the cluster's agent does not see it, and this job is watched as without an agent", "label", record.LabelCluster, "err", err)
	}
	cancel()
	if m.agentView = cfg.AgentView; m.agentView != nil {
		m.agent = m.agentView.trust // followed since before the submit
	} else {
		m.agent = newAgentTrust(m.clock.Now, cfg.RetryBudget)
		m.agentView = startHeartbeatView(context.Background(), cs.Client, cs.Namespace, c, "", m.key, m.agent, m.clock)
	}
	m.log = m.log.With("cluster", c)
}

func positiveOrF(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}

// Group is the watch group m is a member of (see cluster.Cluster.Group).
func (m *Member) Group() string { return m.group }

// Member is one invoke's part in its watch group.
type Member struct {
	lease      lease
	group      string
	own        string // this invoke's record
	holder     string
	rps        float64
	newBatcher func() (backends.StatusBatcher, func(), error)
	submitted  func(d map[string]string) time.Time // see MemberConfig
	log        *slog.Logger
	// key authenticates the group's shared state (see cluster.Cluster.Key).
	key []byte
	// clock is this member's: leases are judged by it (see leaseJudge).
	clock clock
	judge *leaseJudge
	// saidForged: a lease or observation that did not verify was said
	// (once: a forger must not fill the log either).
	saidForged atomic.Bool

	liveUntil time.Time // another's lease was seen live until then
	readAt    time.Time // when the lease was last read
	leader    *watchLeader
	view      *leaseView // the lease as its watch shows it (see live)
	// takeAfter: no take before then (the last one failed); failedTakes
	// in a row, as the view showed the lease free.
	takeAfter   time.Time
	failedTakes int
	observed    string // the last observation acted on
	handover    string // the last handover acted on
	// covered is set once the watcher reported this invoke's job (an
	// observation of its id): only then may its own polls wait.
	covered bool
	joined  time.Time // when this invoke joined the group (see coverGrace)
	// forbidden: RBAC denies the lease, so this invoke polls alone.
	forbidden bool
	// asked is when this invoke's watcher last asked the cluster (told to
	// a successor); notBefore, when a watcher handed the lease may ask first.
	asked, notBefore time.Time
	// agent judges the cluster's agent, whose heartbeat agentView follows
	// (both nil when the record names no cluster).
	agent     *agentTrust
	agentView *HeartbeatView
	// agentOnly: the in-step watcher is off; while the agent is stale this
	// invoke polls alone and never touches the lease.
	agentOnly bool
}

// agentState is the cluster's agent's state for this member (stale when
// the record names no cluster), and until when it holds at the latest.
func (m *Member) agentState() (agentState, time.Time) {
	if m.agent == nil {
		return agentStale, time.Time{}
	}
	return m.agent.state()
}

// dropLeader ends this member's own watcher, which it ran while the agent
// was stale, now that the agent serves again: the lease is removed, not
// handed on (the group's other members follow the agent too).
func (m *Member) dropLeader(ctx context.Context) {
	if m.leader == nil {
		return
	}
	m.leader.cancel()
	<-m.leader.done
	if !m.leader.lost.Load() {
		m.lease.remove(context.WithoutCancel(ctx), m.holder)
	}
	m.leader = nil
	m.log.Info("the cluster's agent serves again; this invoke's watcher stopped")
}

// Serving reports whether a live watcher follows this invoke's job, so
// that it may skip its own poll. The lease is read at most once a second
// and trusted until it would expire; a stale lease is taken over.
func (m *Member) Serving(ctx context.Context) bool {
	// A watcher that has not reported this job yet (it may not see it, or
	// its query may leave it out) does not serve it; the lease is looked
	// at all the same, for a group without a watcher to get one.
	return m.live(ctx) && (m.covered || m.clock.Since(m.joined) < coverGrace)
}

// coverGrace is how long a new member of a group with a live watcher waits
// for the watcher to report its job before it polls for itself: about
// two of the watcher's rounds (polling at once cost a 5 s job four
// requests before its first observation came).
const coverGrace = 3 * time.Second

// WorkedAt is when the watcher this member trusts last had a query work,
// by this member's clock: its own watcher's, or as another's lease says.
func (m *Member) WorkedAt() time.Time {
	switch st, _ := m.agentState(); st {
	case agentFresh:
		return m.agent.heardAt()
	case agentPending:
		return m.joined
	}
	if m.leader != nil {
		return m.clock.Now().Add(-m.leader.okAge(m.clock.Now()))
	}
	until := m.liveUntil
	if l, current := m.view.get(); current {
		until = l.until
	}
	return until.Add(-leaseTTL)
}

// NextLook is when an invoke whose own poll waits for the watcher looks
// again at the latest (longest, the update interval): at the end of the
// grace while the watcher has not reported its job yet, and when another's
// lease, as the view shows it, would run out. Looking costs no request
// (the view is the watch's), and a watcher that died is taken over a TTL
// after its last renewal, not up to an update interval later (19.5 s
// with the default 20 s, on the real Slurm).
func (m *Member) NextLook(longest time.Duration) time.Duration {
	next := longest
	if st, until := m.agentState(); st != agentStale {
		next = min(next, m.clock.Until(until)+10*time.Millisecond)
	}
	if !m.covered {
		next = min(next, m.clock.Until(m.joined.Add(coverGrace)))
	}
	if l, current := m.view.get(); current && m.leader == nil && l.holder != m.holder && !l.until.IsZero() {
		next = min(next, m.clock.Until(l.until)+10*time.Millisecond)
	}
	return max(next, 100*time.Millisecond)
}

// LeaseChanges is signalled when the lease, as this member's view shows
// it, changed: a member whose poll waits for the watcher looks again then,
// so that a watcher distrusted (refused credentials) sends it to poll at
// once, not at its next look up to an update interval later.
func (m *Member) LeaseChanges() <-chan struct{} {
	if m == nil {
		return nil
	}
	if st, _ := m.agentState(); st != agentStale {
		return m.agentView.changed // a heartbeat lost or unverifiable: poll at once
	}
	return m.view.changes()
}

// live reports whether the group has a working watcher: this invoke's
// own, or another's whose lease is live.
func (m *Member) live(ctx context.Context) bool {
	// A fresh agent serves the job: nothing to elect or lease. One whose
	// heartbeat verifies but was not seen to advance yet is trusted as a
	// lease just read is: serving needs its observation of this job within
	// coverGrace (see serving). A stale one leaves this invoke to do as
	// without an agent.
	if st, _ := m.agentState(); st != agentStale {
		m.dropLeader(ctx)
		return true
	}
	if m.agentOnly {
		return false
	}
	now := m.clock.Now()
	if m.leader != nil {
		if !m.leader.ended() {
			return m.leader.working(now)
		}
		// It lost the lease: to another invoke, which serves the group, or
		// to a writer without the group's key, whose lease is nobody's.
		// Not taken again for a TTL: a forger rewriting it must not make
		// this invoke start a watcher every second.
		m.leader, m.takeAfter = nil, now.Add(leaseTTL)
	}
	l, current := m.view.get()
	if !current {
		// The view is not up (yet, or its watch is down): the lease is
		// read, at most once a second, and a live one trusted until it
		// would run out. The first read starts the view from its version.
		if now.Before(m.liveUntil) {
			return true
		}
		if m.forbidden || now.Sub(m.readAt) < time.Second {
			return false
		}
		m.readAt = now
		var ok bool
		if l, ok = m.readLease(ctx); !ok {
			return false
		}
		if m.view == nil {
			m.view = startLeaseView(context.WithoutCancel(ctx), m.lease, l, m.judged)
		}
	}
	if l.holder == handedTo(m.own) {
		// Handed to this invoke, whose record's handover it has not acted
		// on (the watch may bring it later): the others trust this lease.
		m.takeHanded(ctx, l)
		return false
	}
	if l.holder != "" && l.holder != m.holder && now.Before(l.until) {
		m.liveUntil = l.until
		return true
	}
	if !l.free(now) && l.holder != m.holder {
		// Just taken by another: poll alone until its watcher works, which
		// its first round shows within a moment; look again soon.
		m.readAt = now.Add(claimedReadEvery - time.Second)
		return false
	}
	if now.Before(m.takeAfter) {
		return false
	}
	if v, ok := m.lease.take(ctx, l, m.holder); ok {
		m.startLeading(ctx, v)
		return false
	}
	// Taken by another first (a group's invokes start together), which the
	// view shows within a moment; a view still showing the lease free a
	// second later is behind, and lists it again.
	m.takeAfter, m.failedTakes = now.Add(time.Second), m.failedTakes+1
	if m.failedTakes >= 2 {
		m.failedTakes = 0
		m.view.stale()
	}
	return false
}

// judged is lease state l as read, judged by this member (see leaseJudge);
// one that does not verify is said once, without its text.
func (m *Member) judged(l leaseState) leaseState {
	if l.version != "" && !l.signed {
		m.sayForged("the watcher's lease")
	}
	return m.judge.judge(l)
}

// sayForged says, once, that shared state did not verify: written by
// someone without the group's credentials (or a release before tags).
func (m *Member) sayForged(what string) {
	if m.saidForged.Swap(true) {
		return
	}
	m.log.Warn(what + " does not carry the watch group's tag (it was written by someone without the group's credentials); ignored, this job is polled as without a watcher")
}

// readLease reads and judges the lease; a Role that denies it is said once.
func (m *Member) readLease(ctx context.Context) (leaseState, bool) {
	l, err := m.lease.read(ctx)
	if apierrors.IsForbidden(err) {
		// A Role that names only the record (resourceNames) denies the
		// lease for good: said once, and not asked again every second.
		m.forbidden = true
		m.log.Warn("the pod's ServiceAccount may not read the watcher's lease; polling this job alone (the Role of workflows/rbac grants it)", "configmap", m.lease.name)
		return l, false
	}
	if err != nil {
		m.log.Debug("reading the watcher's lease", "err", err)
		return l, false
	}
	return m.judged(l), true
}

// adopt makes the lease a stopping watcher handed to this invoke its own
// and starts its watcher, at once: the group's other invokes skip their
// polls meanwhile, trusting the lease as handed on. A lease no longer
// handed to it (it lapsed and another took it) is left alone.
func (m *Member) adopt(ctx context.Context) {
	if st, _ := m.agentState(); st != agentStale {
		return // the agent serves: no watcher of its own
	}
	if m.leader != nil && m.leader.ended() {
		m.leader = nil // it lost the lease it had
	}
	if m.leader != nil || m.forbidden || m.agentOnly {
		return
	}
	l, ok := m.readLease(ctx)
	if ok && l.holder == handedTo(m.own) {
		m.takeHanded(ctx, l)
	}
}

// takeHanded makes lease l, handed to this invoke, its own and starts its
// watcher. A lease handed on live (its watcher's queries worked within the
// TTL) stays trusted; one handed on by a watcher whose queries failed (a
// wrong token) is taken as any, trusted only once this watcher's first
// query works.
func (m *Member) takeHanded(ctx context.Context, l leaseState) {
	var v string
	var ok bool
	// The predecessor's last working query, by the age its handover (which
	// only the group's key can write) says and this member's clock since.
	if okAge := l.okAge + m.clock.Now().Sub(l.seen); l.renewal && okAge < leaseTTL {
		var err error
		// Renewed with that age: the handover extends nobody's trust.
		v, ok, err = m.lease.renew(ctx, l.version, m.holder, okAge)
		ok = ok && err == nil
	} else {
		v, ok = m.lease.take(ctx, l, m.holder)
	}
	if ok {
		m.notBefore = l.asked.Add(time.Duration(float64(time.Second) / m.rps))
		m.startLeading(ctx, v)
	} else {
		m.view.stale()
	}
}

// startLeading starts this invoke's watcher, with a backend of its own
// (a backend serves one goroutine at a time).
func (m *Member) startLeading(ctx context.Context, version string) {
	be, closeBe, err := m.newBatcher()
	if err != nil || be == nil {
		m.log.Warn("could not start the cluster's watcher; polling this job alone", "err", err)
		m.lease.release(context.WithoutCancel(ctx), m.holder)
		return
	}
	m.log.Info("watching the cluster's jobs of this group", "max_requests_per_second", m.rps)
	m.leader = startLeader(context.WithoutCancel(ctx), m, version, be, closeBe)
}

// Changed reports whether record data d says something this invoke must
// look at now: a new state of its job id seen by the watcher. A watcher's
// handover in d makes this invoke the group's watcher at once (adopt).
func (m *Member) Changed(ctx context.Context, d map[string]string, id string, last backends.Status) bool {
	if h := d[record.KeyWatchHandover]; h != "" && h != m.handover {
		m.handover, m.liveUntil, m.readAt = h, time.Time{}, time.Time{}
		m.adopt(ctx)
	}
	s := d[record.KeyWatchObserved]
	if s == m.observed {
		return false
	}
	m.observed = s
	o, ok := m.observation(m.own, s)
	if !ok && s != "" {
		m.sayForged("the observation in this job's record")
	}
	if !ok || o.id != id {
		return false
	}
	if o.state == unwatched {
		m.covered = false
		return true
	}
	m.covered = true
	return o.state != last.State || o.raw != rawWord(last.Raw)
}

// observation is the watcher's word on one job in its record
// (status.watchObserved): "<id> <state> <backend state as one word>
// <time> <tag>", the tag over all of it and the record's name (see
// sealObservation), so that nobody without the group's key can write one
// and none can be copied to another record.
type observation struct {
	id    string
	state backends.State
	raw   string
}

// parseObservation reads an observation as the watcher keeps it (without
// its time and tag): what it said, not what a record says.
func parseObservation(s string) (observation, bool) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return observation{}, false
	}
	return observation{id: f[0], state: backends.State(f[1]), raw: f[2]}, true
}

// observation reads the observation s in record rec: false unless its tag
// verifies under the group's key.
func (m *Member) observation(rec, s string) (observation, bool) {
	f := strings.Fields(s)
	if len(f) != 5 || !TagOK(m.key, f[4], "observation", rec, f[0], f[1], f[2], f[3]) {
		return observation{}, false
	}
	return observation{id: f[0], state: backends.State(f[1]), raw: f[2]}, true
}

// sealObservation is obs ("<id> <state> <raw>") for record rec as written:
// stamped with the time and tagged.
func (m *Member) sealObservation(rec, obs string) string {
	f := append(strings.Fields(obs), m.clock.Now().UTC().Format(time.RFC3339Nano))
	return strings.Join(f, " ") + " " + Tag(m.key, append([]string{"observation", rec}, f...)...)
}

// covers reports whether data d of record rec shows the watcher covering
// job id (a re-attaching invoke finds the observation of an earlier one).
func (m *Member) covers(rec string, d map[string]string, id string) bool {
	o, ok := m.observation(rec, d[record.KeyWatchObserved])
	return ok && o.id == id && o.state != unwatched
}

// Close stops this invoke's watcher, if it leads, handing over to a
// member whose job goes on. An invoke handed the lease that ends before
// it took it hands it on in turn (its predecessor may have known of no
// other job), so that no group is left with a lease nobody takes: also a
// watcher that lost its lease (frozen, say) and was handed it again. d is
// the record as last written: a handover this invoke's follow never saw
// (its job's end came first) is looked at too.
func (m *Member) Close(ctx context.Context, d map[string]string) {
	if m == nil {
		return
	}
	m.view.stop()
	m.agentView.Stop()
	if m.agentOnly {
		return // it never led, and leaves any handover to the lease's TTL
	}
	if h := d[record.KeyWatchHandover]; h != "" {
		m.handover = h
	}
	// A watcher of its own that still held the lease has just handed it
	// on (or removed it): then nobody can have handed it to this invoke
	// since, and the lease need not be read once more. One that had lost
	// it (frozen, say) may have been handed it again meanwhile.
	settled := false
	if m.leader != nil {
		settled = m.leader.stop(ctx)
	}
	if m.handover != "" && !settled {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		l, ok := m.readLease(ctx)
		if !ok || (l.holder != handedTo(m.own) && !l.free(m.clock.Now())) {
			return // someone took it
		}
		// Every ConfigMap: a record of any origin (IBM's operator's,
		// kubectl's: no managed-by label) may be of the group.
		items, _, err := record.NewSelectedLister(m.lease.c, m.lease.ns, "").List(ctx)
		if err != nil {
			return
		}
		var names []string
		for _, it := range items {
			if it.Name != m.own && m.follows(it.Record.Data) {
				names = append(names, it.Name)
			}
		}
		m.handOn(ctx, names, l.holder, leaseTTL)
	}
}

// follows reports whether record data d is of a job this group follows:
// its id is known and its state is not final.
func (m *Member) follows(d map[string]string) bool {
	return d[record.KeyWatchGroup] == m.group && d[record.KeyID] != "" && !backends.State(d[record.KeyJobStatus]).Final()
}

// handOn gives the lease, held as heldAs, to the invoke of the first of
// the records names whose job goes on (read afresh: the caller's view may
// lag), told through its record, or deletes it when there is none.
//
// The lease passes on held as handed to that record and, when live (this
// invoke's watcher's queries worked), renewed now: the group's other invokes go on trusting the watcher and
// skipping their polls, and the successor makes it its own and leads as
// soon as its record's watch brings the handover. (A released lease was
// taken only at the successor's next poll, up to updateInterval later,
// while the others slept on too: jobs ending then were seen that late.)
// A successor that died meanwhile leaves a lease that lapses within
// leaseTTL, as a dead watcher's does, and the invokes poll again. A
// watcher whose queries failed hands it on as just taken, trusted by
// nobody until the successor's first query works (handed on live, a
// wrong token's watcher made every invoke wait a lease out at each turn).
//
// okAge is how long ago this invoke's watcher's last query worked (live
// when under the TTL). It reports whether the lease was this invoke's to
// give (held as heldAs).
func (m *Member) handOn(ctx context.Context, names []string, heldAs string, okAge time.Duration) bool {
	l, err := m.lease.read(ctx)
	if err != nil || l.version == "" || l.holder != heldAs {
		return false // not this invoke's to give (any more)
	}
	for _, name := range names {
		store := &record.ConfigMapStore{Client: m.lease.c, Namespace: m.lease.ns, Name: name}
		rec, err := store.Get(ctx)
		if err != nil || !m.follows(rec.Data) {
			continue
		}
		v, held := m.lease.handTo(ctx, l.version, name, m.asked, okAge, okAge < leaseTTL)
		if !held {
			return true // taken meanwhile: not this invoke's any more
		}
		l.version, heldAs = v, handedTo(name)
		rec.Data[record.KeyWatchHandover] = m.holder + " " + m.clock.Now().UTC().Format(time.RFC3339Nano)
		if _, err := store.Update(ctx, rec); err == nil {
			return true
		}
	}
	m.lease.remove(ctx, heldAs)
	return true
}

// rawWord is a backend state as one word of an observation.
func rawWord(raw string) string {
	w := strings.Join(strings.Fields(raw), "_")
	if w == "" {
		return "-"
	}
	if len(w) > 64 { // as runner truncates a message
		w = w[:61] + "..."
	}
	return w
}
