package htcondor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

var _ backends.LoadPublisher = (*htcondor.Backend)(nil)

// TestLoadFromAMeasureIsTheProbe: on each real pool, a step judging its
// job against the measure a cluster's agent published (ProbeCommands
// commands) gets the Load its own probe gets, for a small job, an array,
// one too big for any slot and one asking more memory than any has, and
// runs no command; a measure it cannot read is neither invalid nor
// transient (the step then probes).
func TestLoadFromAMeasureIsTheProbe(t *testing.T) {
	testssh.EachCondor(t, testLoadFromAMeasureIsTheProbe)
}

func testLoadFromAMeasureIsTheProbe(t *testing.T, srv testssh.Server) {
	b := newBackend(t, srv)
	ctx := testssh.Ctx(t, 3*time.Minute)
	id, err := b.Submit(ctx, job(t, "#!/bin/sh\nsleep 60\n", map[string]any{"request_cpus": 1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
	arr := &backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 9}}, MaxParallel: 3}
	for _, c := range []struct {
		props map[string]any
		array *backends.Array
	}{{map[string]any{"request_cpus": 1}, nil}, {map[string]any{"request_cpus": 1}, arr},
		{map[string]any{"request_cpus": 4096}, nil}, {map[string]any{"request_memory": "64T"}, nil}} {
		j := job(t, "#!/bin/sh\ntrue\n", c.props)
		m, want := stableProbe(t, ctx, b, j, c.array)
		if strings.Contains(m, "\n") || len(m) > backends.MaxLoadMeasure {
			t.Fatalf("measure is not one bounded line: %q", m)
		}
		before := b.Queries()
		got, err := b.LoadFrom(m, j, c.array)
		if err != nil || b.Queries() != before {
			t.Fatalf("%v: LoadFrom: %v, %d commands", c.props, err, b.Queries()-before)
		}
		if got != want {
			t.Fatalf("%v: LoadFrom gives %+v, the probe %+v", c.props, got, want)
		}
		if got.TotalCPUs < 1 || got.PendingJobs+got.RunningJobs < 1 {
			t.Fatalf("%v: the measure lacks the pool or its queue: %+v", c.props, got)
		}
	}
	for _, bad := range []string{"", "{}", `{"f":2}`, "api=v0.0.45"} {
		_, err := b.LoadFrom(bad, job(t, "true", nil), nil)
		if err == nil || errors.Is(err, backends.ErrInvalid) || errors.Is(err, backends.ErrTransient) {
			t.Fatalf("LoadFrom(%q): %v, want an error of neither kind", bad, err)
		}
	}
}

// stableProbe measures, probes and measures again until both measures
// agree (other tests share the pool and may change it in between).
func stableProbe(t *testing.T, ctx context.Context, b *htcondor.Backend, j backends.Job, a *backends.Array) (string, backends.Load) {
	t.Helper()
	for try := 0; try < 20; try++ {
		before := b.Queries()
		m1, err := b.MeasureLoad(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := b.Queries() - before; n != htcondor.ProbeCommands {
			t.Fatalf("MeasureLoad ran %d commands, want %d", n, htcondor.ProbeCommands)
		}
		want := probe(t, b, ctx, j, a)
		m2, err := b.MeasureLoad(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m1 == m2 {
			return m1, want
		}
		time.Sleep(time.Second)
	}
	t.Fatal("the pool never kept still between two measures")
	return "", backends.Load{}
}
