package htcondor_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

// benchJobs is N, the jobs of one batched status.
const benchJobs = 100

// BenchmarkPools: on each real pool (23.9 and 25, one after the other),
// the time of one Submit (the median of benchJobs, each submitted on hold
// so that the pool's few CPUs do not matter), then one StatusMany of the
// benchJobs jobs while queued (one condor_q) and once removed (condor_q
// and condor_history). Run it alone:
//
//	go test -tags bridgetest -run '^$' -bench Pools -benchtime 5x ./backends/htcondor/
//
// ns/op is the queued StatusMany; the other figures are reported as
// submit-ms, queued-ms and history-ms.
func BenchmarkPools(b *testing.B) { testssh.EachCondorB(b, benchPool) }

func benchPool(b *testing.B, srv testssh.Server) {
	be, err := htcondor.New(backends.Config{URL: srv.URL, Credentials: testssh.Creds(b, srv.CredsDir)})
	if err != nil {
		b.Fatal(err)
	}
	h := be.(*htcondor.Backend)
	defer h.Close()
	ctx := testssh.Ctx(b, 10*time.Minute)
	ids, took := make([]string, 0, benchJobs), make([]time.Duration, 0, benchJobs)
	for i := range benchJobs {
		j := backends.Job{Name: "condor-bench", Key: fmt.Sprintf("k%d-bench-%d", time.Now().UnixNano(), i), Script: "#!/bin/sh\nexit 0\n",
			Properties: []byte(`{"hold": true}`)}
		t0 := time.Now()
		id, err := h.Submit(ctx, j)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		ids = append(ids, id)
	}
	b.Cleanup(func() {
		for _, id := range ids {
			_ = h.Cancel(context.Background(), id)
		}
	})
	slices.Sort(took)
	queued := statusManyTime(b, h, ctx, ids, 1)
	b.ResetTimer()
	for b.Loop() {
		statusMany(b, h, ctx, ids)
	}
	b.StopTimer()
	for _, id := range ids {
		if err := h.Cancel(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	history := statusManyTime(b, h, ctx, ids, 2)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "submit-ms")
	b.ReportMetric(float64(queued.Microseconds())/1000, "queued-ms")
	b.ReportMetric(float64(history.Microseconds())/1000, "history-ms")
}

// statusMany reads the jobs with one StatusMany and checks it found them all.
func statusMany(b *testing.B, h *htcondor.Backend, ctx context.Context, ids []string) {
	got, err := h.StatusMany(ctx, ids)
	if err != nil {
		b.Fatal(err)
	}
	if len(got) != len(ids) {
		b.Fatalf("StatusMany of %d jobs found %d", len(ids), len(got))
	}
}

// statusManyTime times one StatusMany of ids, once it takes the commands
// it should (1: every job queued; 2: every job gone, the history asked):
// a removed job leaves the queue a moment after condor_rm.
func statusManyTime(b *testing.B, h *htcondor.Backend, ctx context.Context, ids []string, commands int64) time.Duration {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		before, t0 := h.Queries(), time.Now()
		statusMany(b, h, ctx, ids)
		took, n := time.Since(t0), h.Queries()-before
		if n == commands {
			return took
		}
		if time.Now().After(deadline) {
			b.Fatalf("StatusMany of %d jobs still ran %d commands after a minute, want %d", len(ids), n, commands)
		}
	}
}
