package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// The invokes of a namespace share what they probed of a cluster, so that
// a fan-out of N steps costs a cluster about one probe per LoadShareTTL
// for each kind of job (its jobproperties and array), not N, and so that
// they do not all pick the same target at once: every placement counts
// its job into the figures it chose on, only if nobody counted since
// (else it chooses again on the new figures), so a burst decides in turn
// and the next invoke sees the target that many CPUs fuller. The figures live in one ConfigMap per cluster (named
// like the watcher's lease, by a slow digest of backend, URL and
// credentials), written with optimistic concurrency. Records that are
// files (a laptop) have no neighbours and probe for themselves.
//
// Anyone who may write the namespace's ConfigMaps may write this one: each
// entry is tagged with the group's key (see cluster.Cluster.Key), and one that does
// not verify is ignored (said once, without its text). Even a verified
// entry decides no refusal: a shared "does not fit" or "refused" only
// makes this invoke probe for itself (an exit 2 comes from its own probe
// alone), and a shared "did not answer" is said in our own words, as a
// transient skip. A target without credentials shares nothing.
const (
	// LoadShareTTL is how long a shared probe stands in for a new one.
	LoadShareTTL = 5 * time.Second
	// LabelLoadGroup marks a cluster's shared-load ConfigMap.
	LabelLoadGroup = "bridge-runner.io/load-group"
	// maxShareEntries bounds one cluster's ConfigMap: the oldest kinds of
	// job are dropped first.
	maxShareEntries = 32
)

// shareEntry is one kind of job's probe of one cluster, and what was
// placed there since. Probing is set while an invoke probes (until then):
// the others wait for its answer instead of probing too.
type shareEntry struct {
	At         time.Time     `json:"at"`
	Load       backends.Load `json:"load"`
	Skip       string        `json:"skip,omitempty"`
	Down       bool          `json:"down,omitempty"`
	PlacedJobs int           `json:"placedJobs,omitempty"`
	PlacedCPUs int           `json:"placedCPUs,omitempty"`
	// PlacedCPUSeconds is the placed jobs' work where each told it;
	// PlacedUntimed counts those that did not (their work is unknown).
	PlacedCPUSeconds int64     `json:"placedCPUSeconds,omitempty"`
	PlacedUntimed    int       `json:"placedUntimed,omitempty"`
	Probing          time.Time `json:"probing,omitempty"`
}

// loadShare is one cluster's shared-load ConfigMap and one kind of job's
// entry in it.
type loadShare struct {
	c        *kube.Client
	ns, name string
	key      string
	mac      []byte // the group's key (see cluster.Cluster.Key)
	log      *slog.Logger
	said     bool // an entry that did not verify was said
	// seen is the entry as this invoke last read or wrote it: what its
	// choice was made on (see reserve).
	seen shareEntry
	// counted: reserve counted a job into seen (release takes it back).
	counted bool
}

// newLoadShare returns the share for the target of desc, or nil when
// records are not ConfigMaps or the target has no credentials to key it.
func (r *run) newLoadShare(desc *record.Description, array *backends.Array) *loadShare {
	cs := record.ConfigMapOf(r.Store)
	if cs == nil {
		return nil
	}
	c, err := r.clusterOf(desc)
	if err != nil || c.Key() == nil {
		return nil
	}
	group, mac := c.Group(), c.Key()
	kind := sha256.New()
	kind.Write(desc.Properties)
	if array != nil {
		kind.Write([]byte("\x00" + array.String()))
	}
	return &loadShare{c: cs.Client, ns: cs.Namespace, name: "bridge-load-" + group,
		key: "k-" + hex.EncodeToString(kind.Sum(nil))[:16], mac: mac, log: r.Log}
}

// load returns a fresh shared probe (mine=false), or claims the probe for
// this invoke (mine=true): the caller probes and calls put. Waiting for
// another invoke's probe lasts at most ProbeTimeout and a little; any
// fault of the Kubernetes API makes the caller probe for itself.
func (s *loadShare) load(ctx context.Context, now func() time.Time) (e shareEntry, mine bool) {
	deadline := now().Add(ProbeTimeout + 2*time.Second)
	for now().Before(deadline) {
		cm, entries, err := s.read(ctx)
		if err != nil {
			return shareEntry{}, true
		}
		e, ok := entries[s.key]
		switch {
		case ok && now().Sub(e.At) < LoadShareTTL && !e.At.IsZero() && e.Skip != "" && !e.Down:
			// Another's refusal (does not fit, refused): this invoke's own
			// probe decides whether it exits 2.
			return shareEntry{}, true
		case ok && now().Sub(e.At) < LoadShareTTL && !e.At.IsZero():
			s.seen = e
			if e.Skip != "" {
				e.Skip = "did not answer another step's probe moments ago"
			}
			return e, false
		case ok && now().Before(e.Probing):
			// another invoke is probing: wait for its answer
		default:
			e.Probing = now().Add(ProbeTimeout + time.Second)
			if s.write(ctx, cm, entries, e) {
				return shareEntry{}, true
			}
		}
		select {
		case <-ctx.Done():
			return shareEntry{}, true
		case <-time.After(time.Duration(150+rand.IntN(100)) * time.Millisecond):
		}
	}
	return shareEntry{}, true
}

// put shares this invoke's probe.
func (s *loadShare) put(ctx context.Context, e shareEntry) {
	s.seen = e
	s.change(ctx, func(shareEntry) shareEntry { return e })
}

// reserve counts a job of cpus CPUs into the shared figures the choice
// was made on. A burst's placements read the same figures at once, and
// each must see those counted before it, or they would all go to the
// target that looked emptiest. When another placement counted itself
// since this invoke read the figures, still (given the figures as they
// are now, withPlaced) says whether the choice stands: if so the job is
// counted into them, else reserve returns false and the caller chooses
// again. Asking still, rather than choosing again on every move, keeps
// a burst of N from taking N rounds in turn (the last of 20 ran out of
// rounds and placed uncounted, all on the same target: 4 and 16 in CI).
// Figures gone stale need no reservation.
func (s *loadShare) reserve(ctx context.Context, job backends.Load, still func(shareEntry) bool) bool {
	cpus := max(job.JobCPUs, 1)
	for attempt := range 30 {
		cm, entries, err := s.read(ctx)
		if err != nil {
			return true // the share is away: place as this invoke saw it
		}
		cur, ok := entries[s.key]
		switch {
		case !ok || cur.At.IsZero() || time.Since(cur.At) >= LoadShareTTL:
			return true
		case !cur.At.Equal(s.seen.At):
			return false // probed anew: choose on the new figures
		case (cur.PlacedJobs != s.seen.PlacedJobs || cur.PlacedCPUs != s.seen.PlacedCPUs) && !still(cur):
			return false
		}
		cur.PlacedJobs++
		cur.PlacedCPUs += cpus
		cur.PlacedCPUSeconds += job.JobCPUSeconds
		if job.JobCPUSeconds <= 0 {
			cur.PlacedUntimed++
		}
		if s.write(ctx, cm, entries, cur) {
			s.seen, s.counted = cur, true
			return true
		}
		if !pause(ctx, attempt) { // a conflict, maybe over another kind of job's entry
			return true
		}
	}
	return true
}

// pause waits before a retry after a conflict on the shared ConfigMap:
// jittered, and longer as the conflicts go on (10-50 ms, up to 40-200
// ms), so that 20 writers at once spread out rather than collide again.
// false: ctx ended.
func pause(ctx context.Context, attempt int) bool {
	d := time.Duration((10+rand.IntN(40))*min(attempt+1, 4)) * time.Millisecond
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// release takes back the job reserve counted, from the figures it was
// counted into (figures probed anew since hold no count to take back): a
// spread counted on one cluster whose figures moved on another chooses
// again, and must not stay counted twice.
func (s *loadShare) release(ctx context.Context, job backends.Load) {
	if !s.counted {
		return
	}
	s.counted = false
	at := s.seen.At
	s.change(ctx, func(e shareEntry) shareEntry {
		if !e.At.Equal(at) {
			return e
		}
		e.PlacedJobs = max(e.PlacedJobs-1, 0)
		e.PlacedCPUs = max(e.PlacedCPUs-max(job.JobCPUs, 1), 0)
		e.PlacedCPUSeconds = max(e.PlacedCPUSeconds-job.JobCPUSeconds, 0)
		if job.JobCPUSeconds <= 0 {
			e.PlacedUntimed = max(e.PlacedUntimed-1, 0)
		}
		return e
	})
}

// change applies f to the entry, retrying on a conflict: a fan-out's
// placements all count themselves into one ConfigMap at once, and an
// increment lost to a conflict makes the next steps see the target
// emptier than it is (five quick retries lost most of them among 20
// writers on a loaded machine). The retries are spread by pause and
// bounded (30 tries, under six seconds of pauses).
func (s *loadShare) change(ctx context.Context, f func(shareEntry) shareEntry) {
	for attempt := range 30 {
		cm, entries, err := s.read(ctx)
		if err != nil {
			return
		}
		if s.write(ctx, cm, entries, f(entries[s.key])) {
			return
		}
		if !pause(ctx, attempt) {
			return
		}
	}
}

func (s *loadShare) read(ctx context.Context) (*kube.ConfigMap, map[string]shareEntry, error) {
	cm := &kube.ConfigMap{}
	err := s.c.Get(ctx, kube.ConfigMaps, s.ns, s.name, cm)
	if apierrors.IsNotFound(err) {
		return nil, map[string]shareEntry{}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	entries := map[string]shareEntry{}
	for k, v := range cm.Data {
		var sl sealed
		var e shareEntry
		if json.Unmarshal([]byte(v), &sl) != nil || !watcher.TagOK(s.mac, sl.Tag, "load", s.ns, s.name, k, string(sl.Entry)) ||
			json.Unmarshal(sl.Entry, &e) != nil {
			if !s.said {
				s.said = true
				s.log.Warn("a shared load entry does not carry the cluster's tag (it was written by someone without the cluster's credentials); ignored", "configmap", s.name)
			}
			continue // dropped at the next write
		}
		entries[k] = e
	}
	return cm, entries, nil
}

// sealed is an entry as stored: its JSON and its tag, over the entry, its
// key and the ConfigMap's name (no entry can be copied to another).
type sealed struct {
	Entry json.RawMessage `json:"entry"`
	Tag   string          `json:"tag"`
}

// write stores entries with e as this share's entry, conditional on the
// ConfigMap being as read (cm; nil: absent). It reports success.
func (s *loadShare) write(ctx context.Context, cm *kube.ConfigMap, entries map[string]shareEntry, e shareEntry) bool {
	entries[s.key] = e
	trim(entries)
	out := &kube.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.ns,
		Labels: map[string]string{LabelLoadGroup: s.name[len("bridge-load-"):]}}, Data: map[string]string{}}
	for k, v := range entries {
		b, _ := json.Marshal(v)
		sb, _ := json.Marshal(sealed{Entry: b, Tag: watcher.Tag(s.mac, "load", s.ns, s.name, k, string(b))})
		out.Data[k] = string(sb)
	}
	if cm == nil {
		return s.c.Create(ctx, kube.ConfigMaps, s.ns, out, &kube.ConfigMap{}) == nil
	}
	out.ResourceVersion = cm.ResourceVersion
	return s.c.Update(ctx, kube.ConfigMaps, s.ns, s.name, out, &kube.ConfigMap{}) == nil
}

// trim drops the oldest entries past maxShareEntries.
func trim(entries map[string]shareEntry) {
	if len(entries) <= maxShareEntries {
		return
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return entries[keys[i]].At.Before(entries[keys[j]].At) })
	for _, k := range keys[:len(keys)-maxShareEntries] {
		delete(entries, k)
	}
}

// withPlaced is the shared load with the jobs placed since it was probed:
// they take free CPUs first, then wait.
func (e shareEntry) withPlaced() backends.Load {
	l := e.Load
	// The placed jobs' work is ahead of the next one, running or not;
	// one whose work is unknown makes the sum unknown.
	l.PendingCPUSeconds += e.PlacedCPUSeconds
	l.CPUSecondsKnown = l.CPUSecondsKnown && e.PlacedUntimed == 0
	if e.PlacedCPUs == 0 || l.FreeCPUs < 0 {
		return l
	}
	over := max(e.PlacedCPUs-l.FreeCPUs, 0)
	l.FreeCPUs = max(l.FreeCPUs-e.PlacedCPUs, 0)
	if over > 0 {
		if l.PendingCPUs >= 0 {
			l.PendingCPUs += over
		}
		if l.PendingJobs >= 0 {
			l.PendingJobs += (over + max(l.JobCPUs, 1) - 1) / max(l.JobCPUs, 1)
		}
	}
	return l
}
