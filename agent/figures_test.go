package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
)

// figures is a cluster whose array limit cannot be read (until told) and
// whose load measures "m<n>", counting the reads.
type figures struct {
	mu            sync.Mutex
	limits, loads int
	limitOK       bool
}

func (f *figures) ArrayLimit(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits++
	if !f.limitOK {
		return 0, backends.Transient(errors.New("no answer"))
	}
	return 1001, nil
}

func (f *figures) MeasureLoad(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	return `{"m":1}`, nil
}

func (f *figures) ProbeLoad(context.Context, backends.Job, *backends.Array) (backends.Load, error) {
	return backends.Load{}, errors.New("not here")
}

func (f *figures) LoadFrom(string, backends.Job, *backends.Array) (backends.Load, error) {
	return backends.Load{}, errors.New("not here")
}

func (f *figures) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.limits, f.loads
}

// The agent reads its figures at their own periods, not at every round of
// its query interval: a failed read of the array limit is not repeated at
// every round (it is left out of the heartbeat, so steps read it
// themselves), and the load, read at the agent's start, is published
// sealed with its time.
func TestAgentReadsItsFiguresAtTheirPeriods(t *testing.T) {
	e := newEnv(t, 1)
	f := &figures{}
	ag, err := agent.New(agent.Config{Cluster: cluster, Backend: "fake", ResourceURL: fakeURL, Key: e.key, Namespaces: e.nss,
		Interval: 100 * time.Millisecond, Kube: e.kube, Batcher: e.fake, Limiter: f, Loader: f, ID: "agent-test",
		Log: slog.New(slog.NewTextHandler(e.logs, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ag.Run(ctx) }()
	defer func() { cancel(); <-done }()
	first := e.awaitBeat(e.nss[0], 0)
	hb := e.awaitBeat(e.nss[0], first.Seq+10) // ten rounds later at least
	limits, loads := f.counts()
	assert.Equal(t, 1, limits, "a failed read of the limit is not repeated every round")
	assert.LessOrEqual(t, loads, 1+int(hb.At.Sub(first.At)/agent.LoadEvery)+1, "the load at most every LoadEvery")
	assert.Zero(t, hb.ArrayLimit, "no limit read: none published")
	assert.Equal(t, `{"m":1}`, hb.Load)
	assert.True(t, hb.Current(time.Now()))
}

// fakeClock is the agent's clock, moved by the test; reads counts its
// readings (a few every round), so that the test can wait for rounds.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	reads int
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// awaitRounds waits until the agent read the clock n more times (a few
// rounds), 30 s at most.
func (c *fakeClock) awaitRounds(t *testing.T, n int) {
	c.mu.Lock()
	want := c.reads + n
	c.mu.Unlock()
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.reads >= want }, 30*time.Second, 20*time.Millisecond)
}

// An idle agent (no record of the cluster open) reads the load once per
// IdleLoadEvery, not every LoadEvery; a record that opens has it read at
// the next round and every LoadEvery while it is open; once it is gone,
// the agent is idle again. Timed by the agent's clock, moved by the test.
func TestAnIdleAgentReadsTheLoadAtItsSlowestPeriod(t *testing.T) {
	e := newEnv(t, 1)
	f, clock := &figures{}, &fakeClock{t: time.Now()}
	ag, err := agent.New(agent.Config{Cluster: cluster, Backend: "fake", ResourceURL: fakeURL, Key: e.key, Namespaces: e.nss,
		Interval: 100 * time.Millisecond, Kube: e.kube, Batcher: e.fake, Loader: f, ID: "agent-test", Now: clock.now,
		Log: slog.New(slog.NewTextHandler(e.logs, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ag.Run(ctx) }()
	defer func() { cancel(); <-done }()
	loads := func() int { _, n := f.counts(); return n }
	require.Eventually(t, func() bool { return loads() == 1 }, 30*time.Second, 20*time.Millisecond, "the load is read at the start")
	idle := func(spell time.Duration) int {
		before := loads()
		for step := 10 * time.Second; spell > 0; spell -= step {
			clock.advance(step)
			clock.awaitRounds(t, 30)
		}
		return loads() - before
	}
	require.Less(t, 5*agent.LoadEvery, agent.IdleLoadEvery-5*time.Second)
	assert.Zero(t, idle(agent.IdleLoadEvery-10*time.Second), "idle: not read again before IdleLoadEvery")
	assert.Equal(t, 1, idle(10*time.Second), "idle: read again after IdleLoadEvery")

	ns := e.nss[0]
	iv := e.invoker(ns, "opening-job", "", cluster, 30*time.Second)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: record.ConfigMapName("opening-job"), Labels: map[string]string{record.LabelCluster: cluster}},
		Data: iv.Spec.WithDefaults().Data()}
	cms := testkube.Client(t).CoreV1().ConfigMaps(ns)
	// Counted before the create: the agent may see the record and read the
	// load before this goroutine runs again (a CI run, 2026-11-30, read it
	// after and waited for a second read that an idle clock never brings).
	before := loads()
	_, err = cms.Create(context.Background(), cm, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return loads() == before+1 }, 30*time.Second, 20*time.Millisecond, "a record that opens wakes the load")
	assert.Equal(t, 1.0, counterValue(t, ag, "bridge_runner_agent_records_open"))
	for range 3 {
		before = loads()
		clock.advance(agent.LoadEvery + time.Second)
		require.Eventually(t, func() bool { return loads() == before+1 }, 30*time.Second, 20*time.Millisecond, "open: read every LoadEvery")
	}

	require.NoError(t, cms.Delete(context.Background(), cm.Name, metav1.DeleteOptions{}))
	// The agent learns of the deletion from its watch, which a loaded
	// apiserver may deliver after the clock moved on: until then the record
	// is open and read every LoadEvery, rightly.
	require.Eventually(t, func() bool { return counterValue(t, ag, "bridge_runner_agent_records_open") == 0 }, 30*time.Second, 20*time.Millisecond, "the agent sees the record go")
	// At most the read already due when the record went.
	assert.LessOrEqual(t, idle(agent.IdleLoadEvery-10*time.Second), 1, "idle again: not read every LoadEvery")
}
