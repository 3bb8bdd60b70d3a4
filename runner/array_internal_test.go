package runner

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
)

// failingClose is a backend whose Close fails, as an SSH backend's may.
type failingClose struct{ *fake.Backend }

func (failingClose) Close() error { return errors.New("connection already closed") }

// An array's backend that fails to close is logged, not a panic (the
// wrapper used to close it with no logger).
func TestArrayBackendCloseErrorIsReturned(t *testing.T) {
	a := asArray(failingClose{fake.New()}, backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 1}}})
	assert.EqualError(t, a.Close(), "connection already closed")
	assert.NotPanics(t, func() { closeBackend(a, slog.New(slog.DiscardHandler)) })
}

// An array's tasks by state are said when the counts change and, while
// they stay, at most once every arrayHeartbeat; never as an empty line.
func TestArrayTasksSaidOnChangeThenAsAHeartbeat(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	arr := backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 9}}}
	fold := func(states map[int]backends.State) arraySummary {
		tasks := map[int]backends.Status{}
		for i, st := range states {
			tasks[i] = backends.Status{State: st}
		}
		return foldArray(arr, tasks)
	}
	var p taskProgress
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.observe(arraySummary{}, t0, log) // no poll answered yet
	assert.Empty(t, buf.String(), "nothing to say before the first fold")

	first := fold(map[int]backends.State{0: backends.Done, 1: backends.Done, 2: backends.Done, 3: backends.Running, 4: backends.Running})
	p.observe(first, t0, log)
	p.observe(first, t0.Add(30*time.Second), log)
	p.observe(first, t0.Add(59*time.Second), log)
	p.observe(first, t0.Add(61*time.Second), log) // the heartbeat
	p.observe(fold(map[int]backends.State{0: backends.Done, 1: backends.Done, 2: backends.Done, 3: backends.Done, 4: backends.Failed}), t0.Add(62*time.Second), log)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, buf.String())
	assert.Contains(t, lines[0], `msg="array tasks" tasks="3 done, 2 running, 5 pending" of=10`)
	assert.Contains(t, lines[1], `tasks="3 done, 2 running, 5 pending"`, "the heartbeat")
	assert.Contains(t, lines[2], `tasks="4 done, 1 failed, 5 pending"`, "a change is said at once")
}
