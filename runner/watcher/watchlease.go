package watcher

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// lease is a watch group's lease: a ConfigMap bridge-watch-<group> in the
// records' namespace (an invoke may already write ConfigMaps there; a
// coordination Lease would need a role that workflow steps rarely have).
// It carries no managed-by label: it is not a record.
type lease struct {
	c    *kube.Client
	ns   string
	name string
	key  []byte // the group's (see cluster.Cluster.Key): every write is tagged with it
	// clock stamps what this member writes (never what decides another's
	// trust: see leaseJudge).
	clock clock
}

// LabelWatchGroup marks a watch group's lease ConfigMap.
const LabelWatchGroup = "bridge-runner.io/watch-group"

// leasePrefix begins the name of every watch group's lease.
const leasePrefix = "bridge-watch-"

// groupLease is the lease of watch group group among the records of cs's
// namespace.
func groupLease(cs *record.ConfigMapStore, group string, key []byte, clk clock) lease {
	return lease{c: cs.Client, ns: cs.Namespace, name: leasePrefix + group, key: key, clock: clk}
}

// validGroup reports whether g is a watch group as cluster.Cluster.Group makes them
// (a record's status.watchGroup is read back before a lease is touched).
func validGroup(g string) bool {
	if len(g) != 24 {
		return false
	}
	_, err := hex.DecodeString(g)
	return err == nil && strings.ToLower(g) == g
}

// leaseState is a lease as read: who holds it, and the ConfigMap's
// version for a conditional write ("" when there is none); once judged by
// a member (leaseJudge), until when that member trusts and respects it,
// by its own clock. The writer's timestamps decide no trust.
type leaseState struct {
	holder string
	// until: trusted until then (zero: not trusted), as judged.
	until time.Time
	// claimed: nobody else takes it before then, as judged (at least until).
	claimed time.Time
	// asked: when the group's cluster was last asked, as a handover says.
	asked   time.Time
	version string
	uid     string
	group   string // the ConfigMap's LabelWatchGroup

	// As written: signed (the tag verifies under the group's key), by a
	// working watcher (renewal) whose last query worked okAge before, over
	// the version prev.
	signed  bool
	renewal bool
	okAge   time.Duration
	prev    string
	seen    time.Time // when the judging member first saw this version
}

func (l lease) read(ctx context.Context) (leaseState, error) {
	cm := &kube.ConfigMap{}
	err := l.c.Get(ctx, kube.ConfigMaps, l.ns, l.name, cm)
	if apierrors.IsNotFound(err) {
		return leaseState{}, nil
	}
	if err != nil {
		return leaseState{}, err
	}
	return l.stateOf(cm), nil
}

// leaseFields are the lease's data keys the tag covers, in its order.
var leaseFields = []string{"holder", "renewed", "taken", "asked", "okAgeMs", "prev"}

// tagged is what the tag of lease data d covers.
func (l lease) tagged(d map[string]string) []string {
	parts := []string{"lease", l.ns, l.name}
	for _, k := range leaseFields {
		parts = append(parts, d[k])
	}
	return parts
}

// stateOf is the lease state of its ConfigMap cm, as written (not judged).
func (l lease) stateOf(cm *kube.ConfigMap) leaseState {
	d := cm.Data
	s := leaseState{holder: d["holder"], version: cm.ResourceVersion, uid: string(cm.UID), group: cm.Labels[LabelWatchGroup], prev: d["prev"]}
	s.signed = TagOK(l.key, d["tag"], l.tagged(d)...)
	ms, err := strconv.ParseInt(d["okAgeMs"], 10, 64)
	s.renewal = d["renewed"] != "" && err == nil && ms >= 0
	s.okAge = time.Duration(ms) * time.Millisecond
	s.asked, _ = time.Parse(time.RFC3339Nano, d["asked"])
	return s
}

// free reports whether the lease, as judged, may be taken: absent,
// released, not verified, or not claimed any more.
func (s leaseState) free(now time.Time) bool {
	return s.holder == "" || !now.Before(s.claimed)
}

// leaseJudge judges a lease as one member sees it, by that member's own
// clock (client-go's leaderelection model): a renewal it saw written over
// the version it saw before is trusted until one TTL after the watcher's
// last working query (now, less the age the renewal says), and a holder
// keeps the lease from the others for one TTL after this member first saw
// its version. A version seen again extends nothing. So neither a
// writer's clock (a dead watcher's 60 s ahead kept its group waiting 70 s)
// nor a replayed renewal (not written over the version seen before) makes
// anyone trust a watcher, and a lease that does not verify is nobody's.
type leaseJudge struct {
	now  func() time.Time
	mu   sync.Mutex
	last leaseState
}

func (j *leaseJudge) judge(s leaseState) leaseState {
	j.mu.Lock()
	defer j.mu.Unlock()
	if s.version != "" && s.version == j.last.version {
		return j.last
	}
	now := j.now()
	s.until, s.claimed, s.seen = time.Time{}, time.Time{}, now
	switch {
	case !s.signed:
		s.holder = ""
	case s.holder != "":
		s.claimed = now.Add(leaseTTL)
		if s.renewal && s.okAge < leaseTTL && j.last.version != "" && s.prev == j.last.version {
			s.until = now.Add(leaseTTL - s.okAge)
		}
	}
	j.last = s
	return s
}

// take makes holder the lease's holder, if the lease is still as was read
// (s): absent, stale or released. It returns the version now held;
// losing the race is not an error (ok is false).
//
// A taken lease is not renewed yet: the invokes keep polling for
// themselves until the new watcher's first round works (a taker whose
// queries fail, say with the group's wrong token, must not make them
// wait an interval), and nobody takes it from the new holder within the
// TTL.
func (l lease) take(ctx context.Context, s leaseState, holder string) (string, bool) {
	cm, out := l.object(holder, s.version, time.Time{}, 0), &kube.ConfigMap{}
	cm.Data["taken"] = l.clock.Now().UTC().Format(time.RFC3339Nano)
	l.seal(cm)
	var err error
	if s.version == "" {
		err = l.c.Create(ctx, kube.ConfigMaps, l.ns, cm, out)
	} else {
		err = l.c.Update(ctx, kube.ConfigMaps, l.ns, l.name, cm, out)
	}
	return out.ResourceVersion, err == nil
}

// renew renews holder's lease held at version, saying that its watcher's
// last query worked okAge ago; it returns the new version, or ok=false
// when the lease was lost (another holder took it).
func (l lease) renew(ctx context.Context, version, holder string, okAge time.Duration) (string, bool, error) {
	return l.pass(ctx, version, holder, time.Time{}, okAge)
}

// pass is renew that also says when the group's cluster was last asked
// (zero: not said): a watcher handing the lease on tells its successor,
// whose first query then keeps the group's requests a second within the
// budget across the handover.
func (l lease) pass(ctx context.Context, version, holder string, asked time.Time, okAge time.Duration) (string, bool, error) {
	cm := l.object(holder, version, l.clock.Now(), okAge)
	if !asked.IsZero() {
		cm.Data["asked"] = asked.UTC().Format(time.RFC3339Nano)
	}
	return l.write(ctx, cm)
}

// untrust keeps holder's lease, held at version, as just taken (see take):
// nobody trusts it until holder's watcher works again and renews it.
func (l lease) untrust(ctx context.Context, version, holder string) (string, bool, error) {
	cm := l.object(holder, version, time.Time{}, 0)
	cm.Data["taken"] = l.clock.Now().UTC().Format(time.RFC3339Nano)
	return l.write(ctx, cm)
}

// write writes cm over the lease held at its version; it returns the new
// version (the old one on an error), or ok=false when the lease was lost
// (changed or deleted).
func (l lease) write(ctx context.Context, cm *kube.ConfigMap) (string, bool, error) {
	version := cm.ResourceVersion
	l.seal(cm)
	out := &kube.ConfigMap{}
	err := l.c.Update(ctx, kube.ConfigMaps, l.ns, l.name, cm, out)
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return "", false, nil
	case err != nil:
		return version, true, err
	}
	return out.ResourceVersion, true, nil
}

// handTo hands the lease held at version to the invoke of record name,
// with the time the group's cluster was last asked: renewed now when live,
// else as just taken (see take). It returns the new version, or false
// when the lease changed meanwhile or could not be written.
func (l lease) handTo(ctx context.Context, version, name string, asked time.Time, okAge time.Duration, live bool) (string, bool) {
	if live {
		v, held, err := l.pass(ctx, version, handedTo(name), asked, okAge)
		return v, held && err == nil
	}
	return l.take(ctx, leaseState{version: version}, handedTo(name))
}

// handedTo is the holder of a lease a stopping watcher handed to the
// invoke of record name: live as any (the others trust it), and taken
// over by that invoke alone (see Member.handOn).
func handedTo(name string) string { return "handed-to " + name }

// release gives holder's lease up, left without a holder for a member to
// take at once. A lease another invoke holds now is not touched: a
// watcher that lost its lease (its renewal came late under load) must not
// free its successor's, which made two watchers run at once.
func (l lease) release(ctx context.Context, holder string) {
	s, err := l.read(ctx)
	if err != nil || s.version == "" || s.holder != holder {
		return
	}
	cm := l.object("", s.version, time.Time{}, 0)
	l.seal(cm)
	_ = l.c.Update(ctx, kube.ConfigMaps, l.ns, l.name, cm, &kube.ConfigMap{})
}

// remove deletes the lease once its group has no job left, unless
// another invoke holds it now (a job that joined meanwhile, also between
// the read and the delete).
func (l lease) remove(ctx context.Context, holder string) {
	s, err := l.read(ctx)
	if err != nil || s.version == "" || (s.holder != "" && s.holder != holder) {
		return
	}
	_ = l.c.DeleteUnchanged(ctx, kube.ConfigMaps, l.ns, l.name, s.version)
}

// collectLapsed deletes the lease when nobody holds it: released, or
// written by nobody for one TTL by this reader's clock since it read it
// (as leaseJudge judges a lease: the holder's written times decide
// nothing, a holder an hour ahead kept a dead lease an hour and one an
// hour behind lost a live one). A watcher, or the successor it handed the
// lease to, that dies with its group's last job leaves the ConfigMap
// behind, and no invoke of that group comes to take it; cleanup, deleting
// a record of the group, collects it, waiting up to a TTL (a live
// watcher's renewal ends the wait within leaseRenewEvery). A member that
// finds the lease gone makes it again, so collecting one that a new job's
// invoke is about to take costs that invoke a second, not its watcher.
func (l lease) collectLapsed(ctx context.Context) (bool, error) {
	s, err := l.read(ctx)
	if err != nil || s.version == "" || s.group != l.name[len(leasePrefix):] {
		return false, err // a ConfigMap of that name but not a lease is not ours
	}
	if s.holder != "" && !l.unwrittenFor(ctx, s.version, leaseTTL) {
		return false, ctx.Err()
	}
	// Deleted only at the version read: a write meanwhile (a renewal the
	// watch did not bring) keeps it.
	err = l.c.DeleteUnchanged(ctx, kube.ConfigMaps, l.ns, l.name, s.version)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return false, nil // written or collected meanwhile
	}
	return err == nil, err
}

// unwrittenFor reports whether the lease, read at version, was not
// written for d by this reader's clock: false as soon as its watch brings
// a write, or when ctx ends first. A watch that cannot start or ends early
// leaves the judgement to the timer (and the delete's version).
func (l lease) unwrittenFor(ctx context.Context, version string, d time.Duration) bool {
	var events <-chan watch.Event
	if w, err := l.c.WatchOne(ctx, kube.ConfigMaps, l.ns, l.name, version); err == nil {
		defer w.Stop()
		events = w.ResultChan()
	}
	t := l.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			return true
		case <-ctx.Done():
			return false
		case ev, ok := <-events:
			switch {
			case !ok:
				events = nil // the timer decides
			case ev.Type != watch.Bookmark:
				return false
			}
		}
	}
}

// object is the lease held by holder written over version (renewed then,
// its watcher's last query okAge before; zero: not a renewal), to seal.
func (l lease) object(holder, version string, renewed time.Time, okAge time.Duration) *kube.ConfigMap {
	d := map[string]string{"holder": holder, "ttlSeconds": strconv.Itoa(int(leaseTTL / time.Second)), "prev": version}
	if !renewed.IsZero() {
		d["renewed"] = renewed.UTC().Format(time.RFC3339Nano)
		d["okAgeMs"] = strconv.FormatInt(max(okAge, 0).Milliseconds(), 10)
	}
	return &kube.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.ns, ResourceVersion: version,
			Labels: map[string]string{LabelWatchGroup: l.name[len(leasePrefix):]}},
		Data: d,
	}
}

// seal tags cm's data with the group's key (see leaseJudge): the prev
// version it names makes a copy of it written later worthless.
func (l lease) seal(cm *kube.ConfigMap) {
	cm.Data["tag"] = Tag(l.key, l.tagged(cm.Data)...)
}

// CollectLease deletes the lease of watch group group in cs's namespace if
// it has lapsed (see lease.collectLapsed), for the cleanup of a record of
// the group: it names the lease's ConfigMap ("" for no valid group).
func CollectLease(ctx context.Context, cs *record.ConfigMapStore, group string) (name string, collected bool, err error) {
	if !validGroup(group) {
		return "", false, nil
	}
	l := groupLease(cs, group, nil, clockOf(nil)) // collecting needs no key: it trusts nothing
	collected, err = l.collectLapsed(ctx)
	return l.name, collected, err
}
