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

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/backends"
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
