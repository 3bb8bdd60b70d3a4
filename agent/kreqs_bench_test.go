package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// BenchmarkManyStepsInOneProcess: N steps of S seconds on the real Slurm
// 24.11 (BRIDGE_BENCH_KREQS_STEPS, default 20; BRIDGE_BENCH_KREQS_SECONDS,
// default 5), run as runner.Invoker values in goroutines of this one
// process (500 invoke processes need ~10 GiB here), each with its own
// ConfigMap record and its own backend client: with the cluster's agent,
// with the in-step watcher, and polling alone, side by side in one run.
// Figures per mode:
//
//	detect-p50-s, detect-p95-s  the job's last command (a stamp it writes
//	                            with `date +%s.%N`) to its invoke's return
//	sched-req/s                 slurmrestd's status requests (batched and
//	                            one job's) a second, steps' and agent's
//	kube-req/job                the steps' Kubernetes requests a job
//	agent-kube-req/job          the agent's, a job
//	heap-MiB                    the largest live heap seen during the run
//	fallbacks                   in-step watchers the steps started (agent
//	                            mode: while they found the agent stale)
func BenchmarkManyStepsInOneProcess(b *testing.B) {
	u, creds := slurm2411(b)
	root := os.Getenv("BRIDGE_TEST_SLURM2411_ROOT") // the jobs' root, where their stamps land
	n, secs := envInt("BRIDGE_BENCH_KREQS_STEPS", 20), envInt("BRIDGE_BENCH_KREQS_SECONDS", 5)
	for _, mode := range []string{"agent", "step-watcher", "polling"} {
		b.Run(fmt.Sprintf("%s/steps=%d/job=%ds", mode, n, secs), func(b *testing.B) {
			for range b.N {
				e := newSlurmEnvOn(b, u, creds, 1, time.Second)
				var agentKube func() int64
				if mode == "agent" {
					stop, kc := e.startAgentWith(agentOpts{})
					defer stop()
					e.awaitMemo(e.nss[0])
					agentKube = kc.Requests
				}
				e.benchSteps(b, mode, n, secs, root, agentKube)
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchSteps runs n steps in mode and reports their figures.
func (e *slurmEnv) benchSteps(b *testing.B, mode string, n, secs int, root string, agentKube func() int64) {
	dir, err := os.MkdirTemp(filepath.Join(root, "/tmp"), "bridge-bench-kreqs-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o1777); err != nil { // the job runs as the cluster's user
		b.Fatal(err)
	}
	inJob := strings.TrimPrefix(dir, root)
	kubeBefore := e.kube.Requests()
	fallbacks := &countingHandler{msg: inStepWatcher}
	heap := watchHeap()
	exited := make([]time.Time, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exited[i] = e.benchStep(b, mode, i, fallbacks, fmt.Sprintf("#!/bin/sh\nsleep %d.%03d\ndate +%%s.%%N > %s/%d\n", secs, i%1000, inJob, i))
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	peak := heap()
	var delays []float64
	for i := range n {
		raw, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)))
		stamp, perr := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
		if err != nil || perr != nil || exited[i].IsZero() {
			b.Errorf("step %d: no stamp or no end (%v %v)", i, err, perr)
			continue
		}
		delays = append(delays, float64(exited[i].UnixNano())/1e9-stamp)
	}
	slices.Sort(delays)
	if len(delays) > 0 {
		b.ReportMetric(delays[len(delays)/2], "detect-p50-s")
		b.ReportMetric(delays[(len(delays)*95+99)/100-1], "detect-p95-s")
	}
	c := e.counter
	sched := c.pathCount("step", "job") + c.pathCount("step", "list") + c.pathCount("agent", "job") + c.pathCount("agent", "list")
	b.ReportMetric(float64(sched)/wall.Seconds(), "sched-req/s")
	b.ReportMetric(float64(e.kube.Requests()-kubeBefore)/float64(n), "kube-req/job")
	if agentKube != nil {
		b.ReportMetric(float64(agentKube())/float64(n), "agent-kube-req/job")
	}
	b.ReportMetric(float64(peak)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(fallbacks.n.Load()), "fallbacks")
	b.Logf("%s: %d steps of %d s in %s; slurmrestd by sender and kind %s; Kubernetes %s", mode, n, secs, wall.Round(time.Second), c.pathCounts(), e.kube.RequestsByVerb())
}

// benchStep runs step i of mode with script, logging to log, and returns
// when it ended (zero when it failed).
func (e *slurmEnv) benchStep(b *testing.B, mode string, i int, log slog.Handler, script string) time.Time {
	job := fmt.Sprintf("kreqs-%d", i)
	spec := &record.Spec{Backend: "slurm", ResourceURL: e.counter.URL, JobScript: script, UpdateInterval: "5"}
	if mode == "agent" {
		spec.Cluster = cluster
	}
	iv := &runner.Invoker{JobName: job, Registry: e.reg, Holder: e.nss[0] + "/" + job, Backend: e.backendConfig(), Spec: spec,
		Store: &record.ConfigMapStore{Client: e.kube, Namespace: e.nss[0], Name: record.ConfigMapName(job)},
		Log:   slog.New(log), MinPoll: runner.DefaultMinPoll, Watch: runner.WatchConfig{Off: mode == "polling"},
		SubmitLease: 30 * time.Second, RetryBudget: 60 * time.Second, CancelWait: 10 * time.Second, Grace: 10 * time.Second}
	// A ceiling, not a figure: the shared cluster queues the jobs (8 slots).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := iv.Run(ctx); err != nil || iv.Result().Status != "DONE" {
		b.Errorf("%s: %v (%s)", job, err, iv.Result().Status)
		return time.Time{}
	}
	return time.Now()
}

// countingHandler counts the records logged with message msg (at Info,
// as the in-step watcher's start is) and discards all.
type countingHandler struct {
	msg string
	n   atomic.Int64
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// watchHeap samples the live heap until the returned func, which returns
// the largest seen.
func watchHeap() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); <-stopped; return peak.Load() }
}
