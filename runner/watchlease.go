package runner

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
}

// LabelWatchGroup marks a watch group's lease ConfigMap.
const LabelWatchGroup = "bridge-runner.io/watch-group"

// leasePrefix begins the name of every watch group's lease.
const leasePrefix = "bridge-watch-"

// groupLease is the lease of watch group group among the records of cs's
// namespace.
func groupLease(cs *record.ConfigMapStore, group string) lease {
	return lease{c: cs.Client, ns: cs.Namespace, name: leasePrefix + group}
}

// validGroup reports whether g is a watch group as WatchGroup makes them
// (a record's status.watchGroup is read back before a lease is touched).
func validGroup(g string) bool {
	if len(g) != 24 {
		return false
	}
	_, err := hex.DecodeString(g)
	return err == nil && strings.ToLower(g) == g
}

// leaseState is a lease as read: who holds it until when, and the
// ConfigMap's version for a conditional write ("" when there is none).
type leaseState struct {
	holder string
	until  time.Time
	// claimed: until when a holder whose watcher has not worked yet keeps
	// the lease (taken, plus the TTL; at least until).
	claimed time.Time
	// asked: when the group's cluster was last asked, as a handover says.
	asked   time.Time
	version string
	uid     string
	group   string // the ConfigMap's LabelWatchGroup
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
	return stateOf(cm), nil
}

// stateOf is the lease state of its ConfigMap cm.
func stateOf(cm *kube.ConfigMap) leaseState {
	s := leaseState{holder: cm.Data["holder"], version: cm.ResourceVersion, uid: string(cm.UID), group: cm.Labels[LabelWatchGroup]}
	ttl, _ := strconv.Atoi(cm.Data["ttlSeconds"])
	if renewed, _ := time.Parse(time.RFC3339Nano, cm.Data["renewed"]); !renewed.IsZero() {
		s.until = renewed.Add(time.Duration(ttl) * time.Second)
	}
	s.claimed = s.until
	s.asked, _ = time.Parse(time.RFC3339Nano, cm.Data["asked"])
	if taken, _ := time.Parse(time.RFC3339Nano, cm.Data["taken"]); taken.Add(time.Duration(ttl) * time.Second).After(s.claimed) {
		s.claimed = taken.Add(time.Duration(ttl) * time.Second)
	}
	return s
}

// free reports whether the lease may be taken: absent, released, or
// neither renewed nor taken within its TTL.
func (s leaseState) free(now time.Time) bool {
	return s.holder == "" || !now.Before(s.claimed)
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
	cm, out := l.object(holder, time.Time{}), &kube.ConfigMap{}
	cm.Data["taken"] = time.Now().UTC().Format(time.RFC3339Nano)
	var err error
	if s.version == "" {
		err = l.c.Create(ctx, kube.ConfigMaps, l.ns, cm, out)
	} else {
		cm.ResourceVersion = s.version
		err = l.c.Update(ctx, kube.ConfigMaps, l.ns, l.name, cm, out)
	}
	return out.ResourceVersion, err == nil
}

// renew renews holder's lease held at version; it returns the new version,
// or ok=false when the lease was lost (another holder took it).
func (l lease) renew(ctx context.Context, version, holder string) (string, bool, error) {
	return l.pass(ctx, version, holder, time.Time{})
}

// pass is renew that also says when the group's cluster was last asked
// (zero: not said): a watcher handing the lease on tells its successor,
// whose first query then keeps the group's requests a second within the
// budget across the handover.
func (l lease) pass(ctx context.Context, version, holder string, asked time.Time) (string, bool, error) {
	cm := l.object(holder, time.Now())
	if !asked.IsZero() {
		cm.Data["asked"] = asked.UTC().Format(time.RFC3339Nano)
	}
	return l.write(ctx, version, cm)
}

// untrust keeps holder's lease, held at version, as just taken (see take):
// nobody trusts it until holder's watcher works again and renews it.
func (l lease) untrust(ctx context.Context, version, holder string) (string, bool, error) {
	cm := l.object(holder, time.Time{})
	cm.Data["taken"] = time.Now().UTC().Format(time.RFC3339Nano)
	return l.write(ctx, version, cm)
}

// write writes cm over the lease held at version; it returns the new
// version, or ok=false when the lease was lost (changed or deleted).
func (l lease) write(ctx context.Context, version string, cm *kube.ConfigMap) (string, bool, error) {
	cm.ResourceVersion = version
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
func (l lease) handTo(ctx context.Context, version, name string, asked time.Time, live bool) (string, bool) {
	if live {
		v, held, err := l.pass(ctx, version, handedTo(name), asked)
		return v, held && err == nil
	}
	return l.take(ctx, leaseState{version: version}, handedTo(name))
}

// handedTo is the holder of a lease a stopping watcher handed to the
// invoke of record name: live as any (the others trust it), and taken
// over by that invoke alone (see watchMember.handOn).
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
	cm := l.object("", time.Time{})
	cm.ResourceVersion = s.version
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
// neither renewed nor taken within its TTL. A watcher, or the successor
// it handed the lease to, that dies with its group's last job leaves the
// ConfigMap behind, and no invoke of that group comes to take it; cleanup,
// deleting a record of the group, collects it. A member that finds the
// lease gone makes it again, so collecting one that a new job's invoke
// is about to take costs that invoke a second, not its watcher.
func (l lease) collectLapsed(ctx context.Context) (bool, error) {
	s, err := l.read(ctx)
	if err != nil || s.version == "" || !s.free(time.Now()) || s.group != l.name[len(leasePrefix):] {
		return false, err // a ConfigMap of that name but not a lease is not ours
	}
	err = l.c.DeleteUnchanged(ctx, kube.ConfigMaps, l.ns, l.name, s.version)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return false, nil // taken or collected meanwhile
	}
	return err == nil, err
}

func (l lease) object(holder string, renewed time.Time) *kube.ConfigMap {
	d := map[string]string{"holder": holder, "ttlSeconds": strconv.Itoa(int(leaseTTL / time.Second))}
	if !renewed.IsZero() {
		d["renewed"] = renewed.UTC().Format(time.RFC3339Nano)
	}
	return &kube.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.ns, Labels: map[string]string{LabelWatchGroup: l.name[len(leasePrefix):]}},
		Data:       d,
	}
}
