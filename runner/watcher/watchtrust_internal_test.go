package watcher

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/kube"
)

// fakeClock is a member's clock (a Clock) whose time the test moves by
// hand; its timers wait on the machine's clock, so that a member's
// goroutines still run while the test judges by the time it set.
type fakeClock struct {
	RealClock
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// written is lease l's ConfigMap as a writer with key makes it at version
// rv, over prev: renewed (at the writer's clock renewed, its last query
// okAge before) or, with a zero renewed, taken.
func writtenLease(l lease, holder, prev, rv string, renewed time.Time, okAge time.Duration) *kube.ConfigMap {
	cm := l.object(holder, prev, renewed, okAge)
	if renewed.IsZero() {
		cm.Data["taken"] = time.Now().UTC().Format(time.RFC3339Nano)
	}
	l.seal(cm)
	cm.ResourceVersion = rv
	return cm
}

// A lease is judged by the reader's clock, never by the writer's: a
// renewal written by a watcher whose clock runs 60 s ahead is trusted one
// TTL after the reader saw it, less the age of the watcher's last working
// query it says (before: until the writer's time plus the TTL, 70 s).
func TestLeaseIsJudgedByTheReadersClock(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)}
	l := lease{ns: "ns", name: "bridge-watch-g", key: testKey}
	j := &leaseJudge{now: clock.Now}
	ahead := clock.Now().Add(60 * time.Second)

	taken := j.judge(l.stateOf(writtenLease(l, "w", "", "5", time.Time{}, 0)))
	assert.True(t, taken.until.IsZero(), "taken, not renewed: not trusted")
	assert.False(t, taken.free(clock.Now()), "but not free for another")

	st := j.judge(l.stateOf(writtenLease(l, "w", "5", "6", ahead, 0)))
	assert.Equal(t, clock.Now().Add(leaseTTL), st.until, "trusted one TTL from when the reader saw it")
	clock.add(leaseTTL - time.Millisecond)
	assert.True(t, clock.Now().Before(st.until))
	clock.add(time.Millisecond)
	assert.False(t, clock.Now().Before(st.until), "and not a moment longer, whatever the writer's clock said")
	again := j.judge(l.stateOf(writtenLease(l, "w", "5", "6", ahead, 0)))
	assert.Equal(t, st.until, again.until, "the same version read again extends nothing")
	assert.True(t, again.free(clock.Now().Add(time.Millisecond)), "and a TTL after it was seen, it may be taken")

	st = j.judge(l.stateOf(writtenLease(l, "w", "6", "7", ahead, 8*time.Second)))
	assert.Equal(t, clock.Now().Add(2*time.Second), st.until, "a TTL after the last working query, as its age says")
	st = j.judge(l.stateOf(writtenLease(l, "w", "7", "8", ahead, leaseTTL)))
	assert.True(t, st.until.IsZero(), "a watcher whose last query worked a TTL ago is trusted no more")
}

// A renewal is trusted only when written over the version the reader saw
// before it: an old renewal written back (a replay, its tag intact) is
// not, nor is one the reader has no predecessor for; a lease that does
// not carry the group's tag is nobody's: free, and trusted by nobody.
func TestReplayedOrForgedLeaseIsNotTrusted(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)}
	l := lease{ns: "ns", name: "bridge-watch-g", key: testKey}
	j := &leaseJudge{now: clock.Now}
	first := j.judge(l.stateOf(writtenLease(l, "w", "3", "4", clock.Now(), 0)))
	assert.True(t, first.until.IsZero(), "the first version a reader sees has no predecessor it saw: not trusted")
	assert.False(t, first.free(clock.Now()))
	j.judge(l.stateOf(writtenLease(l, "w", "4", "5", clock.Now(), 0)))
	clock.add(leaseTTL)
	replay := j.judge(l.stateOf(writtenLease(l, "w", "4", "9", clock.Now(), 0)))
	assert.True(t, replay.until.IsZero(), "a renewal written over version 4, seen after 5: a replay")

	forger := lease{ns: "ns", name: "bridge-watch-g", key: cluster.New(cluster.Spec{Backend: "fake", URL: "https://cluster.test", CredentialText: []byte("a guess")}).Key()}
	forged := j.judge(l.stateOf(writtenLease(forger, "forger", "9", "10", clock.Now(), 0)))
	assert.True(t, forged.until.IsZero(), "a tag under another key: not trusted")
	assert.True(t, forged.free(clock.Now()), "and free to take")
	cm := writtenLease(l, "w", "10", "11", clock.Now(), 0)
	cm.Data["okAgeMs"] = "0" + cm.Data["okAgeMs"] // any change breaks the tag
	cm.Data["holder"] = "forger"
	assert.True(t, j.judge(l.stateOf(cm)).until.IsZero(), "an altered renewal: not trusted")
	unkeyed := lease{ns: "ns", name: "bridge-watch-g"}
	assert.False(t, unkeyed.stateOf(writtenLease(l, "w", "11", "12", clock.Now(), 0)).signed, "no key verifies nothing")
}

// hangingBatcher answers its first query, then hangs every one until its
// context ends.
type hangingBatcher struct {
	mu    sync.Mutex
	calls []time.Time
}

func (h *hangingBatcher) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	h.mu.Lock()
	h.calls = append(h.calls, time.Now())
	n := len(h.calls)
	h.mu.Unlock()
	if n == 1 {
		out := map[string]backends.Status{}
		for _, id := range ids {
			out[id] = backends.Status{State: backends.Running, Raw: "RUNNING"}
		}
		return out, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A query under way is no working watcher: one TTL (by the member's
// clock) after its last answer, a watcher whose next query hangs is not
// working, and its lease is not renewed for anyone to trust. Before, a
// query under way counted as working for its 30 s timeout, and the next
// one started at once, so a black-holed watcher was trusted for ever.
func TestAQueryUnderWayIsNoWorkingWatcher(t *testing.T) {
	ctx := context.Background()
	be := &hangingBatcher{}
	clock := &fakeClock{t: time.Now()}
	m := leadingOneJobAt(t, be, 4, clock)
	defer m.leader.stop(ctx)
	require.Eventually(t, func() bool { return m.leader.working(clock.Now()) }, 5*time.Second, 10*time.Millisecond, "the first query worked")
	require.Eventually(t, func() bool { be.mu.Lock(); defer be.mu.Unlock(); return len(be.calls) >= 2 }, 5*time.Second, 10*time.Millisecond,
		"the second query is under way")
	clock.add(leaseTTL)
	assert.False(t, m.leader.working(clock.Now()), "a TTL after its last answer, a watcher whose query hangs is not working")
	raw, err := m.lease.read(ctx)
	require.NoError(t, err)
	time.Sleep(leaseRenewEvery + time.Second)
	after, err := m.lease.read(ctx)
	require.NoError(t, err)
	assert.Equal(t, raw.version, after.version, "and its lease is not renewed meanwhile")
}

// failingBatcher fails every query after holding it (a query timeout).
type failingBatcher struct {
	hold  time.Duration
	mu    sync.Mutex
	spans [][2]time.Time
}

func (f *failingBatcher) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	start := time.Now()
	time.Sleep(f.hold)
	f.mu.Lock()
	f.spans = append(f.spans, [2]time.Time{start, time.Now()})
	f.mu.Unlock()
	return nil, backends.Transient(errors.New("GET jobs/state/: context deadline exceeded"))
}

// After a query that failed late (a timeout), the next one backs off from
// the failure: before, the back-off counted from the failed query's start,
// so after a timeout longer than it the next query was sent at once.
func TestFailedQueryBacksOffFromItsEnd(t *testing.T) {
	be := &failingBatcher{hold: 1500 * time.Millisecond}
	m := leadingOneJob(t, be, 1)
	time.Sleep(6 * time.Second)
	m.leader.stop(context.Background())
	be.mu.Lock()
	defer be.mu.Unlock()
	require.GreaterOrEqual(t, len(be.spans), 2)
	for i := 1; i < len(be.spans); i++ {
		gap := be.spans[i][0].Sub(be.spans[i-1][1])
		assert.GreaterOrEqual(t, gap, 800*time.Millisecond, "query %d started %s after the last failed", i+1, gap)
	}
}

// An observation counts only with the group's tag, for the record it was
// written into: one forged, or copied from another record, is ignored.
func TestObservationsAreTaggedPerRecord(t *testing.T) {
	m := &Member{key: testKey}
	s := m.sealObservation("rec-a", "7 DONE COMPLETED")
	o, ok := m.observation("rec-a", s)
	require.True(t, ok)
	assert.Equal(t, backends.Done, o.state)
	_, ok = m.observation("rec-b", s)
	assert.False(t, ok, "copied to another record")
	_, ok = m.observation("rec-a", "7 DONE COMPLETED 2026-11-29T04:00:00Z forged")
	assert.False(t, ok, "forged")
	_, ok = m.observation("rec-a", strings.Replace(s, "DONE COMPLETED", "FAILED FAILED", 1))
	assert.False(t, ok, "altered")
}
