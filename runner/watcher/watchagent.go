package watcher

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// A cluster's agent (package agent) is the watch group's leader made
// permanent: one long-lived process per cluster runs the batched status
// query for every record that names the cluster (record.KeyCluster) and
// writes sealed observations into them, in the format members verify.
// It proves it works by a sealed heartbeat in each namespace it serves.
// A step whose record names the cluster follows the agent while that
// heartbeat advances (agentTrust) and neither elects nor leases; when it
// stops advancing, or is missing or does not verify, the step falls back
// to the in-step watcher at once.

// HeartbeatFloor is the shortest heartbeat period: an agent writes its
// heartbeat at most once per max(query interval, HeartbeatFloor).
const HeartbeatFloor = 2 * time.Second

// Heartbeat is what an agent says of itself: who it is, how many of its
// queries answered (Seq only grows while they do), and its query interval.
type Heartbeat struct {
	Agent    string
	Seq      uint64
	Interval time.Duration
	// Memo is what the agent learnt of the cluster once for every step
	// (backends.Discoverer: Slurm's REST API version), "" when nothing.
	Memo string
	// What the agent measured of the cluster for every step, as of At (the
	// agent's clock): the cluster's limit on one array
	// (backends.ArrayLimiter; 0 unknown) and its load
	// (backends.LoadPublisher's measure; "" unknown). A step uses them
	// instead of asking only while Current.
	At         time.Time
	ArrayLimit int
	Load       string
	// The cadence the agent keeps now, as it announces it: Every is the
	// time between the starts of its rounds (its query interval times the
	// requests one round of its jobs sends: 6 s for 500 Slurm jobs at 2 s),
	// Round how long its last round took (its query: the observations are
	// written apart, see agent's outbox; an agent of an earlier release
	// counted their writes too). Zero for an agent of an earlier release
	// (see Due).
	Every, Round time.Duration
}

// Due is how long after one heartbeat the agent announces the next at the
// latest: its period (or its rounds' period, when longer) plus the time
// its last round took. A step trusts an advance for three of these (see
// agentTrust): a heartbeat late by a busy apiserver or a starved process
// is no reason to fall back; none for three is.
func (hb Heartbeat) Due() time.Duration { return max(hb.Period(), hb.Every) + hb.Round }

// Current reports whether hb's figures (ArrayLimit, Load) may stand in
// for a step's own requests at now, by the step's clock: written less
// than 3 announced cadences ago (Due), and not more than one period ahead
// (the clocks' skew). A heartbeat left by an agent that stopped, or
// replayed, is not current however well it verifies.
func (hb Heartbeat) Current(now time.Time) bool {
	age := now.Sub(hb.At)
	return !hb.At.IsZero() && age < 3*hb.Due() && age > -hb.Period()
}

// The figures ride in the heartbeat's sealed memo, after the backend's
// memo on its first line, one "name=value" a line: a heartbeat stays
// sealed over the same parts, so that a step of an earlier release still
// verifies it (and, unable to read the memo as a whole, finds the API
// version for itself), and a step of this release reads an earlier
// agent's memo as the backend's alone.
const (
	figureAt         = "at"
	figureArrayLimit = "arrayLimit"
	figureLoad       = "load"
	figureEvery      = "everyMs"
	figureRound      = "roundMs"
)

// memoText is hb's memo with its figures.
func (hb Heartbeat) memoText() string {
	lines := []string{hb.Memo}
	if !hb.At.IsZero() && (hb.ArrayLimit > 0 || hb.Load != "") {
		lines = append(lines, figureAt+"="+hb.At.UTC().Format(time.RFC3339Nano))
		if hb.ArrayLimit > 0 {
			lines = append(lines, figureArrayLimit+"="+strconv.Itoa(hb.ArrayLimit))
		}
		if hb.Load != "" && !strings.Contains(hb.Load, "\n") {
			lines = append(lines, figureLoad+"="+hb.Load)
		}
	}
	if hb.Every > 0 {
		lines = append(lines, figureEvery+"="+strconv.FormatInt(hb.Every.Milliseconds(), 10))
	}
	if hb.Round > 0 {
		lines = append(lines, figureRound+"="+strconv.FormatInt(hb.Round.Milliseconds(), 10))
	}
	return strings.Join(lines, "\n")
}

// readMemo sets hb's memo and figures from text (memoText's); a figure it
// cannot read is left unknown.
func (hb *Heartbeat) readMemo(text string) {
	lines := strings.Split(text, "\n")
	hb.Memo = lines[0]
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case figureAt:
			hb.At, _ = time.Parse(time.RFC3339Nano, v)
		case figureArrayLimit:
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				hb.ArrayLimit = n
			}
		case figureLoad:
			hb.Load = v
		case figureEvery:
			hb.Every = positiveMs(v)
		case figureRound:
			hb.Round = positiveMs(v)
		}
	}
}

// positiveMs is v as milliseconds, 0 unless a positive number.
func positiveMs(v string) time.Duration {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// Period is how often the agent writes its heartbeat at the least.
func (h Heartbeat) Period() time.Duration { return max(h.Interval, HeartbeatFloor) }

func heartbeatParts(ns, cluster string, d map[string]string) []string {
	p := []string{"agent heartbeat", ns, record.AgentConfigMap(cluster), d["agent"], d["seq"], d["intervalMs"]}
	// The memo is sealed with the rest; a heartbeat of an agent that
	// publishes none (an older release's) is sealed as it always was, and
	// one whose memo is taken out no longer verifies.
	if m, ok := d["memo"]; ok {
		p = append(p, "memo", m)
	}
	return p
}

// SealHeartbeat is hb as the data of the heartbeat ConfigMap of cluster in
// namespace ns, tagged under key (so that it cannot be moved elsewhere).
func SealHeartbeat(key []byte, ns, cluster string, hb Heartbeat) map[string]string {
	d := map[string]string{"agent": hb.Agent, "seq": strconv.FormatUint(hb.Seq, 10), "intervalMs": strconv.FormatInt(hb.Interval.Milliseconds(), 10)}
	if m := hb.memoText(); m != "" {
		d["memo"] = m
	}
	d["tag"] = Tag(key, heartbeatParts(ns, cluster, d)...)
	return d
}

// ReadHeartbeat reads heartbeat data d: false unless its tag verifies
// under key.
func ReadHeartbeat(key []byte, ns, cluster string, d map[string]string) (Heartbeat, bool) {
	if !TagOK(key, d["tag"], heartbeatParts(ns, cluster, d)...) {
		return Heartbeat{}, false
	}
	seq, err1 := strconv.ParseUint(d["seq"], 10, 64)
	ms, err2 := strconv.ParseInt(d["intervalMs"], 10, 64)
	if err1 != nil || err2 != nil || ms <= 0 || d["agent"] == "" {
		return Heartbeat{}, false
	}
	hb := Heartbeat{Agent: d["agent"], Seq: seq, Interval: time.Duration(ms) * time.Millisecond}
	hb.readMemo(d["memo"])
	return hb, true
}

// Observation is a watcher's or agent's word on the job id of one record:
// its state and the backend's state as one word. It never decides a state:
// it makes the record's step ask the backend.
type Observation struct {
	ID    string
	State backends.State
	Raw   string
}

// Unwatched is the observation state that tells a step the batched query
// does not report its job: it polls for itself.
const Unwatched = unwatched

// ObservationOf is what a batched query said of job id (st), as an
// observation.
func ObservationOf(id string, st backends.Status) Observation {
	return Observation{ID: id, State: st.State, Raw: rawWord(st.Raw)}
}

func (o Observation) String() string { return o.ID + " " + string(o.State) + " " + o.Raw }

// SealObservation is o as written into record rec at time at, tagged
// under key (the value of record.KeyWatchObserved).
func SealObservation(key []byte, rec string, o Observation, at time.Time) string {
	f := append(strings.Fields(o.String()), at.UTC().Format(time.RFC3339Nano))
	return strings.Join(f, " ") + " " + Tag(key, append([]string{"observation", rec}, f...)...)
}

// ReadObservation reads the observation s of record rec: false unless its
// tag verifies under key.
func ReadObservation(key []byte, rec, s string) (Observation, bool) {
	f := strings.Fields(s)
	if len(f) != 5 || !TagOK(key, f[4], "observation", rec, f[0], f[1], f[2], f[3]) {
		return Observation{}, false
	}
	return Observation{ID: f[0], State: backends.State(f[1]), Raw: f[2]}, true
}

// agentState is how a step judges its cluster's agent.
type agentState int

const (
	// agentStale: no agent to follow (missing, unverifiable, or its
	// sequence did not advance in time): the step does as without one.
	agentStale agentState = iota
	// agentPending: no advance seen yet since the step joined, and its
	// heartbeat not found missing or unverifiable: for up to one window the
	// step trusts it as a lease just read (it serves only once the agent's
	// observation covers its job, or within coverGrace), and elects nobody.
	agentPending
	// agentFresh: its sequence advanced within the window: the step
	// neither elects, leases nor polls, except to confirm an observation.
	agentFresh
)

// agentTrust is a step's rule for trusting its cluster's agent, by the
// step's own clock alone: the agent is fresh while its heartbeat's
// sequence advanced (a verified heartbeat of the same agent with a higher
// sequence than any seen) within min(3 announced cadences (Heartbeat.Due),
// the step's budget). A heartbeat that is replayed (no higher sequence) changes
// nothing; one that is missing or does not verify ends trust at once.
type agentTrust struct {
	now    func() time.Time
	budget time.Duration // never trusted longer than this after an advance

	mu         sync.Mutex
	joined     time.Time
	maxSeq     map[string]uint64 // the highest sequence seen, by agent
	period     time.Duration     // the cadence (Due) of the heartbeat last verified
	advancedAt time.Time         // zero: no advance since the last loss
	lost       bool              // missing or unverifiable since joining
}

func newAgentTrust(now func() time.Time, budget time.Duration) *agentTrust {
	return &agentTrust{now: now, budget: budget, joined: now(), maxSeq: map[string]uint64{}}
}

// saw judges heartbeat data d as read (nil: the ConfigMap is missing).
func (t *agentTrust) saw(hb Heartbeat, verified bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !verified {
		t.advancedAt, t.lost = time.Time{}, true
		return
	}
	prev, known := t.maxSeq[hb.Agent]
	if known && hb.Seq <= prev {
		return // replayed: its period must not stretch the window either
	}
	if known {
		t.advancedAt = t.now()
	}
	t.maxSeq[hb.Agent], t.period = hb.Seq, hb.Due()
}

// window is how long an advance is trusted: three of the cadences the
// agent announced (Due), never longer than the step's budget.
func (t *agentTrust) window() time.Duration { return min(3*t.period, t.budget) }

// state is the agent's state now, and until when it holds at the latest
// (zero for stale).
func (t *agentTrust) state() (agentState, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if until := t.advancedAt.Add(t.window()); !t.advancedAt.IsZero() && now.Before(until) {
		return agentFresh, until
	}
	// Not seen to advance yet (or the view has not read it yet): no
	// longer than a window of its period (three of the floor's while it
	// is unknown), within the budget.
	period := cmp.Or(t.period, HeartbeatFloor)
	if until := t.joined.Add(min(3*period, t.budget)); t.advancedAt.IsZero() && !t.lost && now.Before(until) {
		return agentPending, until
	}
	return agentStale, time.Time{}
}

// join has the pending window count from now, as if the step joined now.
func (t *agentTrust) join() {
	t.mu.Lock()
	t.joined = t.now()
	t.mu.Unlock()
}

// serves reports whether the agent is trusted now (not stale): false
// without a trust.
func (t *agentTrust) serves() bool {
	if t == nil {
		return false
	}
	st, _ := t.state()
	return st != agentStale
}

// heardAt is when the agent last advanced, by the step's clock.
func (t *agentTrust) heardAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.advancedAt
}

// HeartbeatView follows the agent's heartbeat ConfigMap through one watch
// (from the apiserver's newest version, renewed when it ends; a list only
// when it brings nothing at first) and feeds what it sees to trust.
type HeartbeatView struct {
	c           *kube.Client
	ns, cluster string
	key         []byte
	trust       *agentTrust
	clock       clock
	changed     chan struct{}
	cancel      context.CancelFunc
	done        chan struct{}

	read     chan struct{} // closed once the heartbeat was first read
	readOnce sync.Once
	mu       sync.Mutex
	hb       Heartbeat // the heartbeat last read, if it verified (else zero)

	// The step's record, when it rides in the view's watch (see Carry).
	ride riding
}

// StartHeartbeatView follows the heartbeat of the agent of cluster in
// namespace ns, verified under key; a silent agent is trusted no longer
// than budget (see agentTrust). rec, unless "", is the step's record, to
// be followed in the same watch (see Carry). Stop ends it.
func StartHeartbeatView(ctx context.Context, c *kube.Client, ns, cluster, rec string, key []byte, budget time.Duration) *HeartbeatView {
	clk := clockOf(nil)
	return startHeartbeatView(ctx, c, ns, cluster, rec, key, newAgentTrust(clk.Now, budget), clk)
}

func startHeartbeatView(ctx context.Context, c *kube.Client, ns, cluster, rec string, key []byte, trust *agentTrust, clk clock) *HeartbeatView {
	ctx, cancel := context.WithCancel(ctx)
	v := &HeartbeatView{c: c, ns: ns, cluster: cluster, key: key, trust: trust, clock: clk, changed: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
		read: make(chan struct{}), ride: newRiding(rec)}
	go v.run(ctx)
	return v
}

// Published is the heartbeat the cluster's agent wrote, once it was read
// (waiting up to wait for its first read): false unless it verifies under
// the step's key and the agent is trusted (not stale, by the rule of
// agentTrust). Its memo is no more than a hint: a version the server
// refuses is found again (Rememberer.Recall); its figures are used only
// while Current.
func (v *HeartbeatView) Published(ctx context.Context, wait time.Duration) (Heartbeat, bool) {
	t := v.clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-v.read:
	case <-t.C():
		// A step starved of CPU (a pod at its CPU limit, a node
		// overcommitted) runs again only long after its timer fired, by
		// when the heartbeat may have been read: that read is used, not
		// the timer's word (which would cost the cluster the discovery).
		if !v.wasRead() {
			return Heartbeat{}, false
		}
	case <-ctx.Done():
		return Heartbeat{}, false
	}
	if st, _ := v.trust.state(); st == agentStale {
		return Heartbeat{}, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hb, v.hb.Agent != ""
}

// Serves reports whether the agent is trusted now (fresh, or verified and
// not seen to advance yet): false without a view.
func (v *HeartbeatView) Serves() bool { return v != nil && v.trust.serves() }

// Join has the step's trust in an agent not yet seen to advance count
// from now (agentTrust's pending window), as if the view started now: a
// view started early (runner starts one while the step creates its
// record, so that the first read is there when it submits) must not have
// the create's time, long at a burst, count against the agent.
func (v *HeartbeatView) Join() { v.trust.join() }

// wasRead reports whether the heartbeat was read at least once.
func (v *HeartbeatView) wasRead() bool {
	select {
	case <-v.read:
		return true
	default:
		return false
	}
}

// Stop ends the view (nil: nothing to end); its watch goes on while it
// carries the step's record (see Carry), until that ends too.
func (v *HeartbeatView) Stop() {
	if v != nil && v.ride.release(true) {
		v.cancel()
		<-v.done
	}
}

func (v *HeartbeatView) see(cm *kube.ConfigMap) {
	var hb Heartbeat
	ok := false
	if cm != nil {
		hb, ok = ReadHeartbeat(v.key, v.ns, v.cluster, cm.Data)
	}
	v.trust.saw(hb, ok)
	v.mu.Lock()
	v.hb = hb // zero unless it verified
	v.mu.Unlock()
	v.readOnce.Do(func() { close(v.read) })
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

func (v *HeartbeatView) run(ctx context.Context) {
	defer close(v.done)
	name := record.AgentConfigMap(v.cluster)
	back := record.Backoff{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Factor: 2, Jitter: 0.2}
	for ctx.Err() == nil {
		// No version: the apiserver starts the watch at its newest and
		// sends the heartbeat, if there is one, as a synthetic ADDED: one
		// request where a list for its version and a watch from it were
		// two. (A watch's initial events could also say it is missing, but
		// they need the WatchList feature, off by default on Kubernetes
		// 1.33 and on any apiserver over etcd 3.4.)
		w, err := v.watch(ctx, name)
		if apierrors.IsForbidden(err) && v.ride.drop() {
			continue // a Role that names its ConfigMaps: each watched alone
		}
		if apierrors.IsForbidden(err) {
			// A Role that names only the record: no agent to follow, for
			// good (asking again every few seconds would cost the
			// apiserver a request per step for as long as its job runs).
			v.see(nil)
			return
		}
		if err != nil {
			v.clock.SleepCtx(ctx, back.Next())
			continue
		}
		if v.follow(ctx, w) {
			back.Reset()
		} else {
			v.clock.SleepCtx(ctx, back.Next())
		}
	}
}

// heartbeatQuiet is how long a new watch may bring nothing before the
// view lists the heartbeat to learn whether it is missing (a watch says
// nothing of what is not there): well within the 2 s a step's submit
// waits for the heartbeat.
const heartbeatQuiet = 700 * time.Millisecond

// follow applies the watch's events until it ends; false when it failed.
// A watch that brings nothing within heartbeatQuiet has the heartbeat
// listed: missing, or there and slow to come.
func (v *HeartbeatView) follow(ctx context.Context, w watch.Interface) bool {
	defer w.Stop()
	quiet := v.clock.NewTimer(heartbeatQuiet)
	defer func() { quiet.Stop() }()
	quietC := quiet.C()
	back := record.Backoff{Initial: heartbeatQuiet, Max: 10 * time.Second, Factor: 2, Jitter: 0.2}
	for {
		select {
		case <-ctx.Done():
			return true
		case <-quietC:
			quietC = nil
			cm, err := v.list(ctx)
			switch {
			case err == nil && cm != nil && !record.Followed(cm) && v.ride.drop():
				return true // a heartbeat the label does not bring: watched alone
			case apierrors.IsForbidden(err):
				v.see(nil)
			case err != nil && !v.wasRead():
				quiet = v.clock.NewTimer(back.Next()) // still nothing known: ask again
				quietC = quiet.C()
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				return true
			}
			cm, isCM := ev.Object.(*kube.ConfigMap)
			switch {
			case ev.Type == watch.Error || !isCM:
				return false
			case ev.Type == watch.Bookmark:
			case cm.Name != record.AgentConfigMap(v.cluster):
				if !v.ride.pass(ev.Type, cm) {
					return true // the record left the label's sight: watched alone
				}
			case ev.Type == watch.Deleted:
				quietC = nil
				v.see(nil)
			case ev.Type != watch.Bookmark:
				quietC = nil
				v.see(cm)
			}
		}
	}
}

// list reads the heartbeat once (seeing nil when it is missing), and
// returns it.
func (v *HeartbeatView) list(ctx context.Context) (*kube.ConfigMap, error) {
	list := &kube.ConfigMapList{}
	opts := &metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", record.AgentConfigMap(v.cluster)).String()}
	if err := v.c.List(ctx, kube.ConfigMaps, v.ns, opts, list); err != nil {
		return nil, err
	}
	var cm *kube.ConfigMap
	for i := range list.Items {
		cm = &list.Items[i]
	}
	v.see(cm)
	return cm, nil
}

// AgentServes reports whether the cluster's agent is trusted now (fresh,
// or verified and not seen to advance yet): false without one.
func (m *Member) AgentServes() bool { return m != nil && m.agent.serves() }
