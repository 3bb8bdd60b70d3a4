package watcher

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
)

// newFakeClock is a step's own clock, moved by hand (fakeClock).
func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func beat(agent string, seq uint64) Heartbeat {
	return Heartbeat{Agent: agent, Seq: seq, Interval: time.Second}
}

func stateOf(tr *agentTrust) agentState {
	st, _ := tr.state()
	return st
}

// The agent is trusted while its sequence advanced within three heartbeat
// periods by the step's own clock; before any advance it is pending for
// at most that window; after it, stale.
func TestAgentTrustFollowsTheAdvance(t *testing.T) {
	c := newFakeClock()
	tr := newAgentTrust(c.Now, time.Minute)
	assert.Equal(t, agentPending, stateOf(tr), "not read yet")
	tr.saw(beat("a", 7), true)
	assert.Equal(t, agentPending, stateOf(tr), "a first sight is no advance")
	c.add(time.Second)
	tr.saw(beat("a", 8), true)
	st, until := tr.state()
	assert.Equal(t, agentFresh, st)
	assert.Equal(t, c.Now().Add(3*HeartbeatFloor), until, "three periods (the period is at least the floor)")
	assert.Equal(t, c.Now(), tr.heardAt())
	c.add(3*HeartbeatFloor - time.Millisecond)
	assert.Equal(t, agentFresh, stateOf(tr))
	c.add(time.Millisecond)
	assert.Equal(t, agentStale, stateOf(tr), "no advance within three periods")
	tr.saw(beat("a", 9), true)
	assert.Equal(t, agentFresh, stateOf(tr), "it comes back")
}

// A pending agent that never advances is stale after the window.
func TestAgentTrustPendingEnds(t *testing.T) {
	c := newFakeClock()
	tr := newAgentTrust(c.Now, time.Minute)
	tr.saw(beat("a", 7), true)
	c.add(3 * HeartbeatFloor)
	assert.Equal(t, agentStale, stateOf(tr))
}

// A view started early (while the step creates its record) counts its
// pending window from when the step joins, not from its start.
func TestAgentTrustPendingCountsFromTheJoin(t *testing.T) {
	c := newFakeClock()
	tr := newAgentTrust(c.Now, time.Minute)
	tr.saw(beat("a", 7), true)
	c.add(3 * HeartbeatFloor)
	tr.join()
	assert.Equal(t, agentPending, stateOf(tr), "trusted for a window from the join")
	c.add(3 * HeartbeatFloor)
	assert.Equal(t, agentStale, stateOf(tr), "no advance within it")
}

// A replayed heartbeat (a sequence seen before, or lower) is no advance,
// also alternated with another agent's; a new agent must advance too.
func TestAgentTrustIgnoresReplays(t *testing.T) {
	c := newFakeClock()
	tr := newAgentTrust(c.Now, time.Minute)
	tr.saw(beat("a", 7), true)
	tr.saw(beat("b", 3), true)
	for range 10 {
		c.add(time.Second)
		tr.saw(beat("a", 7), true)
		tr.saw(beat("a", 5), true)
		tr.saw(beat("b", 3), true)
	}
	assert.Equal(t, agentStale, stateOf(tr), "replays never advanced")
	tr.saw(beat("c", 1), true)
	tr.saw(beat("c", 2), true)
	_, until := tr.state()
	long := beat("c", 2)
	long.Interval = time.Hour
	tr.saw(long, true)
	_, still := tr.state()
	assert.Equal(t, until, still, "a replay's period does not stretch the window")
	tr.saw(beat("d", 100), true)
	c.add(7 * time.Second)
	assert.Equal(t, agentStale, stateOf(tr), "a new agent's first heartbeat is no advance")
	tr.saw(beat("d", 101), true)
	assert.Equal(t, agentFresh, stateOf(tr))
}

// A heartbeat missing or unverifiable ends the trust at once, and a
// pending one too.
func TestAgentTrustEndsAtOnceOnLoss(t *testing.T) {
	c := newFakeClock()
	tr := newAgentTrust(c.Now, time.Minute)
	tr.saw(beat("a", 1), true)
	tr.saw(beat("a", 2), true)
	require.Equal(t, agentFresh, stateOf(tr))
	tr.saw(Heartbeat{}, false)
	assert.Equal(t, agentStale, stateOf(tr))
	fresh := newAgentTrust(c.Now, time.Minute)
	fresh.saw(Heartbeat{}, false)
	assert.Equal(t, agentStale, stateOf(fresh), "missing at the first read: no pending")
}

// The window never exceeds the step's own budget, whatever period the
// agent declares (a site's 30 min interval).
func TestAgentTrustWithinTheBudget(t *testing.T) {
	c := newFakeClock()
	budget := 20 * time.Second
	tr := newAgentTrust(c.Now, budget)
	slow := Heartbeat{Agent: "a", Seq: 1, Interval: 30 * time.Minute}
	tr.saw(slow, true)
	slow.Seq = 2
	tr.saw(slow, true)
	_, until := tr.state()
	assert.Equal(t, c.Now().Add(budget), until)
	c.add(budget)
	assert.Equal(t, agentStale, stateOf(tr))
}

// A heartbeat verifies only under the cluster's key, in its own namespace
// and for its own cluster; nothing it carries can be changed.
func TestHeartbeatSeal(t *testing.T) {
	key := []byte("key")
	hb := Heartbeat{Agent: "agent-1", Seq: 42, Interval: 1500 * time.Millisecond}
	d := SealHeartbeat(key, "ns", "hpc-1", hb)
	got, ok := ReadHeartbeat(key, "ns", "hpc-1", d)
	require.True(t, ok)
	assert.Equal(t, hb, got)
	_, ok = ReadHeartbeat([]byte("other"), "ns", "hpc-1", d)
	assert.False(t, ok, "another key")
	_, ok = ReadHeartbeat(key, "ns2", "hpc-1", d)
	assert.False(t, ok, "moved to another namespace")
	_, ok = ReadHeartbeat(key, "ns", "hpc-2", d)
	assert.False(t, ok, "another cluster")
	for _, k := range []string{"agent", "seq", "intervalMs", "tag"} {
		m := map[string]string{}
		for kk, v := range d {
			m[kk] = v
		}
		m[k] += "1"
		_, ok = ReadHeartbeat(key, "ns", "hpc-1", m)
		assert.False(t, ok, "changed %s", k)
	}
	_, ok = ReadHeartbeat(nil, "ns", "hpc-1", d)
	assert.False(t, ok, "no key verifies nothing")
}

// The memo an agent publishes (Slurm's API version) is sealed with the
// rest of its heartbeat: it cannot be changed, added or taken out; a
// heartbeat of an agent that publishes none (an older release's, sealed
// before the memo existed) still verifies, with no memo.
func TestHeartbeatSealCoversTheMemo(t *testing.T) {
	key := []byte("key")
	hb := Heartbeat{Agent: "agent-1", Seq: 7, Interval: time.Second, Memo: "api=v0.0.42"}
	d := SealHeartbeat(key, "ns", "hpc-1", hb)
	got, ok := ReadHeartbeat(key, "ns", "hpc-1", d)
	require.True(t, ok)
	assert.Equal(t, hb, got)
	edit := func(f func(m map[string]string)) map[string]string {
		m := map[string]string{}
		for k, v := range d {
			m[k] = v
		}
		f(m)
		return m
	}
	_, ok = ReadHeartbeat(key, "ns", "hpc-1", edit(func(m map[string]string) { m["memo"] = "api=v0.0.44" }))
	assert.False(t, ok, "memo changed")
	_, ok = ReadHeartbeat(key, "ns", "hpc-1", edit(func(m map[string]string) { delete(m, "memo") }))
	assert.False(t, ok, "memo taken out")
	old := SealHeartbeat(key, "ns", "hpc-1", Heartbeat{Agent: "agent-1", Seq: 7, Interval: time.Second})
	assert.NotContains(t, old, "memo")
	// As an older release sealed it: the same parts, no memo.
	old2 := map[string]string{"agent": "agent-1", "seq": "7", "intervalMs": "1000"}
	old2["tag"] = Tag(key, "agent heartbeat", "ns", "bridge-runner-agent-hpc-1", "agent-1", "7", "1000")
	got, ok = ReadHeartbeat(key, "ns", "hpc-1", old2)
	require.True(t, ok, "an older agent's heartbeat still verifies")
	assert.Empty(t, got.Memo)
	_, ok = ReadHeartbeat(key, "ns", "hpc-1", edit(func(map[string]string) {}))
	assert.True(t, ok)
	withMemo := map[string]string{"memo": "api=v0.0.44"}
	for k, v := range old2 {
		withMemo[k] = v
	}
	_, ok = ReadHeartbeat(key, "ns", "hpc-1", withMemo)
	assert.False(t, ok, "memo added to an older heartbeat")
}

// The figures an agent publishes (array limit, load) ride sealed in the
// memo after the backend's: read back whole, changed they do not verify,
// and a memo of an earlier agent (the backend's alone) reads with none;
// they are current only within 3 periods of their time by the reader's
// clock (neither an agent that stopped nor one far ahead).
func TestHeartbeatFiguresAreSealedAndCurrent(t *testing.T) {
	key := []byte("key")
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	hb := Heartbeat{Agent: "agent-1", Seq: 7, Interval: time.Second, Memo: "api=v0.0.45", At: at, ArrayLimit: 1001, Load: `{"f":1}`}
	d := SealHeartbeat(key, "ns", "hpc-1", hb)
	got, ok := ReadHeartbeat(key, "ns", "hpc-1", d)
	require.True(t, ok)
	assert.Equal(t, hb, got)
	d["memo"] = strings.Replace(d["memo"], "arrayLimit=1001", "arrayLimit=2", 1)
	_, ok = ReadHeartbeat(key, "ns", "hpc-1", d)
	assert.False(t, ok, "a limit edited without the seal")
	hb.At, hb.ArrayLimit, hb.Load = time.Time{}, 0, ""
	got, ok = ReadHeartbeat(key, "ns", "hpc-1", SealHeartbeat(key, "ns", "hpc-1", hb))
	require.True(t, ok)
	assert.Equal(t, hb, got, "an earlier agent's memo: the backend's alone")
	assert.False(t, got.Current(at), "no time: not current")

	period := HeartbeatFloor // an interval of 1 s beats every 2 s
	cur := Heartbeat{Interval: time.Second, At: at}
	for _, c := range []struct {
		now  time.Time
		want bool
	}{{at, true}, {at.Add(3*period - time.Millisecond), true}, {at.Add(3 * period), false}, {at.Add(time.Hour), false},
		{at.Add(-period + time.Millisecond), true}, {at.Add(-period), false}} {
		assert.Equal(t, c.want, cur.Current(c.now), "at %s", c.now.Sub(at))
	}
}

// An observation the agent writes is what a member verifies.
func TestAgentObservationIsAMembersObservation(t *testing.T) {
	key := []byte("key")
	m := &Member{key: key}
	o := ObservationOf("42", backends.Status{State: backends.Running, Raw: "RUNNING"})
	sealed := SealObservation(key, "job-bridge-cm", o, time.Now())
	got, ok := m.observation("job-bridge-cm", sealed)
	require.True(t, ok)
	assert.Equal(t, observation{id: "42", state: "RUNNING", raw: "RUNNING"}, got)
	_, ok = m.observation("other-bridge-cm", sealed)
	assert.False(t, ok, "copied to another record")
}

// At N = 500 steps in one process on Slurm 24.11 the agent's rounds took
// three requests (200 ids each) at its 2 s interval: a heartbeat every
// 6 s plus the round's own time, read by steps in a starved process a
// moment later still. Judged by three periods of the announced 2 s
// interval (6 s), the agent looked stale between two of its heartbeats
// and about 140 of 500 steps fell back to the in-step watcher. The window
// follows the cadence the agent announces (its round period and its last
// round's time), by the step's clock: a heartbeat that arrives late by
// that much and a second more never makes it stale, and an agent truly
// gone is stale three of those cadences after its last advance, no later.
func TestAgentTrustFollowsTheAgentsAnnouncedCadence(t *testing.T) {
	key := []byte("key")
	c := newFakeClock()
	tr := newAgentTrust(c.Now, time.Minute)
	hb := Heartbeat{Agent: "a", Interval: 2 * time.Second, Every: 6 * time.Second, Round: 1500 * time.Millisecond}
	arrive := func(seq uint64) {
		hb.Seq = seq
		got, ok := ReadHeartbeat(key, "ns", "hpc-1", SealHeartbeat(key, "ns", "hpc-1", hb))
		require.True(t, ok)
		require.Equal(t, hb, got, "the cadence rides sealed in the heartbeat")
		tr.saw(got, true)
	}
	arrive(1)
	gap := hb.Every + hb.Round + time.Second // delivered a second late
	for seq := uint64(2); seq <= 20; seq++ {
		for waited := time.Duration(0); waited < gap; waited += 250 * time.Millisecond {
			c.add(250 * time.Millisecond)
			require.NotEqual(t, agentStale, stateOf(tr), "heartbeat %d, %s after the last", seq, waited)
		}
		arrive(seq)
		require.Equal(t, agentFresh, stateOf(tr))
	}
	window := 3 * (hb.Every + hb.Round)
	_, until := tr.state()
	assert.Equal(t, c.Now().Add(window), until, "three of the announced cadences after the last advance")
	c.add(window - time.Millisecond)
	assert.Equal(t, agentFresh, stateOf(tr))
	c.add(time.Millisecond)
	assert.Equal(t, agentStale, stateOf(tr), "an agent gone is stale then, by the step's clock")
}

// A step starved of CPU runs again only after its wait for the heartbeat's
// first read is over, and by then the heartbeat was read: it uses what it
// read. (Before, the step's select chose between the fired timer and the
// read at random, and half such steps asked the cluster for its API
// version themselves: ~500 of 1,000 steps in one process on 2 CPUs.)
func TestPublishedPrefersAReadThatCameWhileTheStepWasStarved(t *testing.T) {
	key := []byte("key")
	hb := Heartbeat{Agent: "agent-1", Seq: 7, Interval: time.Second, Memo: "v0.0.41"}
	cm := &kube.ConfigMap{Data: SealHeartbeat(key, "ns", "hpc-1", hb)}
	for i := range 100 { // a random choice would lose one of 100 with odds 1 - 2^-100
		clk := &passingClock{fakeClock: *newFakeClock()}
		v := &HeartbeatView{ns: "ns", cluster: "hpc-1", key: key, trust: newAgentTrust(clk.Now, time.Minute), clock: clockOf(clk),
			changed: make(chan struct{}, 1), read: make(chan struct{})}
		clk.during = func() { v.see(cm) } // read while the step waited, starved, past its timer
		got, ok := v.Published(context.Background(), 2*time.Second)
		require.True(t, ok, "try %d: the heartbeat was read before the step ran again", i)
		assert.Equal(t, "v0.0.41", got.Memo)
	}
}

// Without any read, the wait ends at its bound.
func TestPublishedEndsAtItsWaitWithoutARead(t *testing.T) {
	clk := &passingClock{fakeClock: *newFakeClock()}
	v := &HeartbeatView{trust: newAgentTrust(clk.Now, time.Minute), clock: clockOf(clk), read: make(chan struct{})}
	_, ok := v.Published(context.Background(), 2*time.Second)
	assert.False(t, ok)
}
