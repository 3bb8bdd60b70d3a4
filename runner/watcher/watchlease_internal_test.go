package watcher

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// A watcher that lost its lease must not free its successor's: release
// and renew by a former holder leave the new holder's lease as it is (the
// benchmark saw two watchers of one group run at once when a late renewal
// lost the lease and the loser's stop released it anyway).
func TestLeaseLoserCannotFreeTheWinner(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	l := lease{c: s.Client, ns: s.Namespace, name: "bridge-watch-test", key: testKey}
	v, ok := l.take(ctx, leaseState{}, "a")
	require.True(t, ok)
	_, ok = l.take(ctx, leaseState{}, "b")
	assert.False(t, ok, "a lease that exists is not created again")

	// b takes a's lease over (as when a's renewal came too late).
	st, err := l.read(ctx)
	require.NoError(t, err)
	_, ok = l.take(ctx, st, "b")
	require.True(t, ok)

	_, held, err := l.renew(ctx, v, "a", 0)
	require.NoError(t, err)
	assert.False(t, held, "a's renewal at its old version finds the lease lost")
	l.release(ctx, "a")
	l.remove(ctx, "a")
	st, err = l.read(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", st.holder, "the loser's release and remove left the winner's lease alone")

	l.release(ctx, "b")
	st, err = l.read(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.holder, "the holder's own release frees it")
	assert.True(t, st.free(time.Now()))
}

// testCluster is the tests' cluster, testKey its watch group's key.
var (
	testCluster = cluster.New(cluster.Spec{Backend: "fake", URL: "https://cluster.test", CredentialText: []byte("token")})
	testKey     = testCluster.Key()
)

// testMember is invoke own (holder) of group "g" in the namespace of c,
// whose watcher would ask be.
func testMember(c *kube.Client, ns, own, holder string, be backends.StatusBatcher) *Member {
	m := &Member{lease: lease{c: c, ns: ns, name: "bridge-watch-g", key: testKey}, group: "g", own: own,
		holder: holder, rps: 1, key: testKey, log: slog.New(slog.DiscardHandler),
		newBatcher: func() (backends.StatusBatcher, func(), error) { return be, func() {}, nil }}
	m.judge = &leaseJudge{now: m.clock.Now}
	return m
}

// A round with no job to ask about (the records not listed yet) shows
// nothing about the watcher's queries: it must not make the watcher
// working, whose lease the others would trust (on the real Slurm with a
// wrong token: 70 s to the last exit 75, against 31 s without a watcher).
func TestAnEmptyRoundIsNoWorkingWatcher(t *testing.T) {
	l := &watchLeader{jobs: map[string]*record.Record{}}
	_, _, err := l.round(context.Background())
	require.NoError(t, err)
	assert.False(t, l.working(time.Now()))
}

// A stopping watcher hands its lease on live: the group's other invokes
// go on trusting it (no poll of their own, no gap), the successor named in
// it makes it its own and leads as soon as its record tells it, and
// nobody else may take it meanwhile.
func TestHandoverKeepsTheWatcherTrusted(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	be := fake.New()
	member := func(own, holder string) *Member { return testMember(s.Client, s.Namespace, own, holder, be) }
	for i, name := range []string{"rec-b", "rec-c"} {
		st := &record.ConfigMapStore{Client: s.Client, Namespace: s.Namespace, Name: name}
		_, err := st.Create(ctx, map[string]string{record.KeyWatchGroup: "g", record.KeyID: fmt.Sprint(i + 1)})
		require.NoError(t, err)
	}
	a, b, c := member("rec-a", "a"), member("rec-b", "b"), member("rec-c", "c")
	_, ok := a.lease.take(ctx, leaseState{}, "a")
	require.True(t, ok)
	assert.False(t, c.live(ctx), "c sees the lease taken, not yet trusted")
	defer c.view.stop()
	a.asked = time.Now().Add(-300 * time.Millisecond).Round(time.Millisecond)
	a.handOn(ctx, []string{"rec-b", "rec-c"}, "a", time.Second)

	l, err := a.lease.read(ctx)
	require.NoError(t, err)
	assert.Equal(t, handedTo("rec-b"), l.holder, "handed to the first job that goes on")
	assert.True(t, l.renewal && l.signed, "handed on live")
	assert.True(t, l.asked.Equal(a.asked), "with the time of the group's last query")
	require.Eventually(t, func() bool { return c.live(ctx) }, 2*time.Second, 20*time.Millisecond,
		"another member, who saw the lease before, trusts it as handed on")
	assert.Nil(t, c.leader, "and does not take it")

	rec, err := (&record.ConfigMapStore{Client: s.Client, Namespace: s.Namespace, Name: "rec-b"}).Get(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, rec.Data[record.KeyWatchHandover], "the successor is told through its record")
	b.Changed(ctx, rec.Data, "1", backends.Status{State: backends.Running})
	require.NotNil(t, b.leader, "the successor leads at once")
	assert.True(t, b.notBefore.Equal(a.asked.Add(time.Second)), "its first query a budget's interval after the last one")
	defer b.leader.stop(ctx)
	l, err = a.lease.read(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", l.holder)
	assert.True(t, l.renewal, "still live: the group trusted its watcher throughout")
	assert.True(t, c.live(ctx), "c trusts b's renewal over the handover it saw")
}

// A watcher whose queries failed (a wrong token) hands its lease on as
// just taken: nobody trusts it until the successor's first query works,
// and nobody but the successor takes it meanwhile.
func TestHandoverOfAFailingWatcherIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	st := &record.ConfigMapStore{Client: s.Client, Namespace: s.Namespace, Name: "rec-b"}
	_, err := st.Create(ctx, map[string]string{record.KeyWatchGroup: "g", record.KeyID: "1"})
	require.NoError(t, err)
	a := testMember(s.Client, s.Namespace, "rec-a", "a", nil)
	c := testMember(s.Client, s.Namespace, "rec-c", "c", nil)
	v, ok := a.lease.take(ctx, leaseState{}, "a")
	require.True(t, ok)
	c.judge.judge(leaseState{version: v, signed: true, holder: "a"}) // c saw it taken
	a.handOn(ctx, []string{"rec-b"}, "a", leaseTTL)
	raw, err := a.lease.read(ctx)
	require.NoError(t, err)
	l := c.judged(raw)
	assert.Equal(t, handedTo("rec-b"), l.holder)
	assert.False(t, time.Now().Before(l.until), "not live: the invokes poll for themselves")
	assert.False(t, l.free(time.Now()), "nor free for another to take")
}

// An invoke whose follow ended before it saw a handover to its record (a
// frozen watcher waking to its job's end) still gives the lease on at its
// end, from the record as last written: none was left behind in CI.
func TestCloseGivesOnAHandoverItNeverSaw(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	a := testMember(s.Client, s.Namespace, "rec-a", "a", nil)
	_, ok := a.lease.take(ctx, leaseState{}, handedTo("rec-a"))
	require.True(t, ok)
	a.Close(ctx, map[string]string{record.KeyWatchHandover: "z 2026-11-27T06:00:00Z"})
	l, err := a.lease.read(ctx)
	require.NoError(t, err)
	assert.Empty(t, l.version, "the lease handed to this record is gone with the group's last job")
}

// A lease whose last watcher died (a successor SIGKILLed with the group's
// last job) is left behind with nobody to take it: cleanup's collection
// (CollectLease, deleting a record of that group) collects it once nobody
// wrote it for a TTL by the collector's clock, and leaves alone a live
// lease (renewed meanwhile) and a ConfigMap of a lease's name that is not
// a lease.
func TestCleanupCollectsALapsedLease(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	group := cluster.New(cluster.Spec{Backend: "slurm", URL: "https://cluster.example", CredentialText: []byte("token")}).Group()
	l := groupLease(s, group, testKey, clock{})
	reader := &passingClock{fakeClock: fakeClock{t: time.Now()}}
	cleanup := func(string) {
		_, err := groupLease(s, group, nil, clockOf(reader)).collectLapsed(ctx)
		require.NoError(t, err)
	}

	// Live: held and renewed while the collector waits (a watcher of
	// another job of the group).
	v, ok := l.take(ctx, leaseState{}, handedTo("rec-gone"))
	require.True(t, ok)
	reader.during = func() {
		_, held, err := l.renew(ctx, v, handedTo("rec-gone"), 0)
		assert.NoError(t, err)
		assert.True(t, held)
	}
	cleanup("rec-1")
	st, err := l.read(ctx)
	require.NoError(t, err)
	assert.Equal(t, handedTo("rec-gone"), st.holder, "a live lease stays")

	// Lapsed: written by nobody for a TTL by the collector's clock.
	reader.during = nil
	cleanup("rec-2")
	st, err = l.read(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.version, "the lapsed lease was collected")

	// Not a lease: the name without the group's label.
	other := &kube.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: s.Namespace}, Data: map[string]string{"holder": ""}}
	require.NoError(t, s.Client.Create(ctx, kube.ConfigMaps, s.Namespace, other, &kube.ConfigMap{}))
	cleanup("rec-3")
	st, err = l.read(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, st.version, "a ConfigMap that is not the group's lease stays")
}

// A member follows the lease through one watch instead of reading it each
// time the renewal it trusted runs out (a GET every 8-10 s per step for as
// long as its job runs): past a whole TTL of another's renewals it sends
// no request, and it sees a lease handed to it at once, before its
// record's watch brings the handover.
func TestMembersFollowTheLeaseByWatch(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	other := lease{c: testkube.KubeClient(t, testkube.Config(t)), ns: s.Namespace, name: "bridge-watch-g", key: testKey}
	v, ok := other.take(ctx, leaseState{}, "x")
	require.True(t, ok)
	renew := func() {
		var held bool
		var err error
		v, held, err = other.renew(ctx, v, "x", 0)
		require.NoError(t, err)
		require.True(t, held)
	}
	renew()
	m := testMember(s.Client, s.Namespace, "rec-b", "b", fake.New())
	defer m.Close(ctx, nil)
	require.Eventually(t, func() bool { renew(); _, current := m.view.get(); return m.live(ctx) && current },
		5*time.Second, 50*time.Millisecond, "the view comes up and shows the live lease")

	before := s.Client.Requests()
	for end := time.Now().Add(leaseTTL + time.Second); time.Now().Before(end); {
		renew()
		for range 10 {
			require.True(t, m.live(ctx), "the watcher renewing the lease is trusted throughout")
			time.Sleep(50 * time.Millisecond)
		}
	}
	assert.Zero(t, s.Client.Requests()-before, "no read of the lease past a whole TTL")

	_, ok = other.handTo(ctx, v, "rec-b", time.Now(), 0, true)
	require.True(t, ok)
	require.Eventually(t, func() bool { m.live(ctx); return m.leader != nil }, 2*time.Second, 20*time.Millisecond,
		"the lease handed to this member is taken over at once, from the view")
	l, err := m.lease.read(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", l.holder)
}

// costlyBatcher is a batcher whose every call costs three requests (a
// list the backend splits, as Slurm's jobs/state/ does past 200 ids).
type costlyBatcher struct{ calls atomic.Int32 }

func (c *costlyBatcher) StatusMany(_ context.Context, ids []string) (map[string]backends.Status, error) {
	c.calls.Add(1)
	out := map[string]backends.Status{}
	for _, id := range ids {
		out[id] = backends.Status{State: backends.Running, Raw: "RUNNING"}
	}
	return out, nil
}

func (c *costlyBatcher) StatusManyRequests(int) int { return 3 }

// leadingOneJob makes invoke "a" lead group "g" with batcher be and
// budget rps, the group following one job (7, record rec-b).
func leadingOneJob(t *testing.T, be backends.StatusBatcher, rps float64) *Member {
	return leadingOneJobAt(t, be, rps, nil)
}

// leadingOneJobAt is leadingOneJob with the member's clock clk.
func leadingOneJobAt(t *testing.T, be backends.StatusBatcher, rps float64, clk Clock) *Member {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	st := &record.ConfigMapStore{Client: s.Client, Namespace: s.Namespace, Name: "rec-b"}
	_, err := st.Create(ctx, map[string]string{record.KeyWatchGroup: "g", record.KeyID: "7"})
	require.NoError(t, err)
	m := testMember(s.Client, s.Namespace, "rec-a", "a", be)
	m.rps, m.clock, m.lease.clock = rps, clockOf(clk), clockOf(clk)
	v, ok := m.lease.take(ctx, leaseState{}, "a")
	require.True(t, ok)
	m.startLeading(ctx, v)
	return m
}

// The watcher's budget is of requests, not of rounds: a round whose query
// the backend splits into three requests is followed by three intervals
// (500 jobs on Slurm 24.11 made 1.5 requests a second against 1).
func TestWatcherBudgetCountsRequests(t *testing.T) {
	ctx := context.Background()
	be := &costlyBatcher{}
	m := leadingOneJob(t, be, 2)
	require.Eventually(t, func() bool { return be.calls.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(3200 * time.Millisecond)
	m.leader.stop(ctx)
	// 2 requests a second, 3 a round: a round every 1.5 s, so the first and
	// at most two more in 3.2 s (six more, one every 0.5 s, if rounds were
	// counted); a slow machine may make it one more.
	assert.LessOrEqual(t, be.calls.Load(), int32(3))
	assert.GreaterOrEqual(t, be.calls.Load(), int32(2))
}

// A watcher whose pods' Role grants update but not patch (a Role written
// for an older release) writes its observations all the same, read and
// updated, and says so once.
func TestObservationWithoutPatchIsAnUpdate(t *testing.T) {
	ctx := context.Background()
	base := testkube.RecordStore(t)
	admin := testkube.Client(t)
	c := testkube.KubeClient(t, testkube.ServiceAccountWithRules(t, admin, base.Namespace, "no-patch", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}}))
	rec, err := (&record.ConfigMapStore{Client: base.Client, Namespace: base.Namespace, Name: "rec-b"}).Create(ctx, map[string]string{record.KeyID: "1"})
	require.NoError(t, err)

	var logs bytes.Buffer
	l := &watchLeader{m: &Member{log: slog.New(slog.NewTextHandler(&logs, nil))}}
	writer := &record.ConfigMapStore{Client: c, Namespace: base.Namespace, Name: "rec-b"}
	for _, obs := range []string{"1 RUNNING RUNNING t1", "1 DONE COMPLETED t2"} {
		_, err := l.write(ctx, writer, rec, obs)
		require.NoError(t, err)
		rec, err = writer.Get(ctx)
		require.NoError(t, err)
		assert.Equal(t, obs, rec.Data[record.KeyWatchObserved])
	}
	assert.True(t, l.noPatch.Load())
	assert.Equal(t, 1, strings.Count(logs.String(), "may not patch ConfigMaps"), logs.String())
}

// refusingBatcher answers until refuse is set, then refuses the
// credentials of every query (the Secret rotated to a wrong token).
type refusingBatcher struct {
	refuse atomic.Bool
	calls  atomic.Int32
}

func (r *refusingBatcher) StatusMany(_ context.Context, ids []string) (map[string]backends.Status, error) {
	r.calls.Add(1)
	if r.refuse.Load() {
		return nil, fmt.Errorf("GET jobs/state/: 401: %w", backends.ErrAuth)
	}
	out := map[string]backends.Status{}
	for _, id := range ids {
		out[id] = backends.Status{State: backends.Running, Raw: "RUNNING"}
	}
	return out, nil
}

// A watcher whose credentials the cluster refuses is distrusted at once,
// not a TTL later: its lease is held as just taken (live for nobody, free
// for nobody), so the invokes poll and ride the failure out for
// themselves, as without a watcher.
func TestRefusedCredentialsDistrustTheWatcherAtOnce(t *testing.T) {
	ctx := context.Background()
	be := &refusingBatcher{}
	m := leadingOneJob(t, be, 4)
	defer m.leader.stop(ctx)
	o := testMember(m.lease.c, m.lease.ns, "rec-o", "o", nil) // another member, reading the lease
	read := func() leaseState {
		l, err := m.lease.read(ctx)
		require.NoError(t, err)
		return o.judged(l)
	}
	require.Eventually(t, func() bool { return time.Now().Before(read().until) },
		5*time.Second, 20*time.Millisecond, "the queries work: the lease is renewed, trusted")
	be.refuse.Store(true)
	refused := be.calls.Load()
	require.Eventually(t, func() bool { return be.calls.Load() > refused }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return !time.Now().Before(read().until) },
		2*time.Second, 20*time.Millisecond, "refused: trusted no longer, well within the TTL")
	l := read()
	assert.Equal(t, "a", l.holder, "still held")
	assert.False(t, l.free(time.Now()), "and not free for another to take at once")
	assert.False(t, m.leader.working(time.Now()), "its own invoke polls too")
}

// A lease view started from a lease just read absent watches from the
// apiserver's newest version with no list first: one request, and a
// lease created after the read, before or after the watch opens, comes
// to it (as a synthetic ADDED, or as the event) on the real
// kube-apiserver. The old view listed first (list=1 watch=1).
func TestLeaseViewOfAnAbsentLeaseWatchesAlone(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	for _, createFirst := range []bool{true, false} {
		name := fmt.Sprintf("bridge-watch-absent-%t", createFirst)
		kc := testkube.KubeClient(t, testkube.Config(t))
		mine := lease{c: kc, ns: s.Namespace, name: name, key: testKey}
		other := lease{c: s.Client, ns: s.Namespace, name: name, key: testKey}
		from, err := mine.read(ctx)
		require.NoError(t, err)
		require.Empty(t, from.version, "the lease is absent")
		if createFirst { // created between the read and the watch
			_, ok := other.take(ctx, leaseState{}, "b")
			require.True(t, ok)
		}
		v := startLeaseView(ctx, mine, from, func(st leaseState) leaseState { return st })
		st, current := v.get()
		assert.True(t, current, "the absent lease, as read, is the view's state")
		assert.Empty(t, st.holder)
		if !createFirst {
			time.Sleep(200 * time.Millisecond) // the watch opens
			_, ok := other.take(ctx, leaseState{}, "b")
			require.True(t, ok)
		}
		deadline := time.Now().Add(30 * time.Second)
		for st.holder == "" && time.Now().Before(deadline) {
			select {
			case <-v.changes():
			case <-time.After(time.Second):
			}
			st, _ = v.get()
		}
		v.stop()
		by := kc.RequestsByVerb()
		assert.Equal(t, "b", st.holder, "created first=%t: the view saw the lease created: %s", createFirst, by)
		assert.Equal(t, "get=1 watch=1", by, "created first=%t: the read, then one watch", createFirst)
	}
}
