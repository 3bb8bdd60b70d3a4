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

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// BenchmarkManyStepsInOneProcess: N steps of S seconds on the real Slurm
// 24.11 (BRIDGE_BENCH_KREQS_STEPS, default 20; BRIDGE_BENCH_KREQS_SECONDS,
// default 5), run as runner.Invoker values in goroutines of this one
// process (500 invoke processes need ~10 GiB here), each with its own
// ConfigMap record, its own backend client and its own Kubernetes client
// (stepKubes): with the cluster's agent,
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
//	cpu-wait-max-s              the longest a goroutine of this process
//	                            waited for a CPU (watchProcess): the
//	                            steps' figures include such waits
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
	kubes := stepKubes(b, n)
	fallbacks := &countingHandler{msg: inStepWatcher}
	l := e.timeLegs(b)
	process := watchProcess()
	ends := make([]stepEnd, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ends[i] = e.benchStep(b, mode, i, kubes[i], fallbacks, fmt.Sprintf("#!/bin/sh\nsleep %d.%03d\ndate +%%s.%%N > %s/%d\n", secs, i%1000, inJob, i))
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	peak, lag := process()
	var delays []float64
	for i := range n {
		raw, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)))
		stamp, perr := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
		if err != nil || perr != nil || ends[i].returned.IsZero() {
			b.Errorf("step %d: no stamp or no end (%v %v)", i, err, perr)
			continue
		}
		ends[i].stamp = stamp
		delays = append(delays, float64(ends[i].returned.UnixNano())/1e9-stamp)
	}
	b.Logf("%s: where the detections' delays go, from the jobs' ends:\n%s", mode, l.report(ends))
	slices.Sort(delays)
	if len(delays) > 0 {
		b.ReportMetric(delays[len(delays)/2], "detect-p50-s")
		b.ReportMetric(delays[(len(delays)*95+99)/100-1], "detect-p95-s")
	}
	c := e.counter
	sched := c.pathCount("step", "job") + c.pathCount("step", "list") + c.pathCount("agent", "job") + c.pathCount("agent", "list")
	b.ReportMetric(float64(sched)/wall.Seconds(), "sched-req/s")
	b.ReportMetric(float64(kubes.requests())/float64(n), "kube-req/job")
	if agentKube != nil {
		b.ReportMetric(float64(agentKube())/float64(n), "agent-kube-req/job")
	}
	b.ReportMetric(float64(peak)/(1<<20), "heap-MiB")
	b.ReportMetric(lag.Seconds(), "cpu-wait-max-s")
	b.ReportMetric(float64(fallbacks.n.Load()), "fallbacks")
	b.Logf("%s: %d steps of %d s in %s; slurmrestd by sender and kind %s; Kubernetes %s", mode, n, secs, wall.Round(time.Second), c.pathCounts(), kubes.byVerb())
}

// timeLegs starts timing the legs of the detections of this run's steps
// (in the namespace of its records) until b ends.
func (e *slurmEnv) timeLegs(b *testing.B) *legs {
	l := newLegs()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	l.watch(ctx, b, e.nss[0])
	e.counter.setOnRequest(l.request)
	if e.batches != nil { // the agent's
		e.batches.setOnQuery(l.query)
	}
	return l
}

// benchStep runs step i of mode with script, its record through kc,
// logging to log, and returns its job, record and when it ended (zero
// when it failed).
func (e *slurmEnv) benchStep(b *testing.B, mode string, i int, kc *kube.Client, log slog.Handler, script string) stepEnd {
	job := fmt.Sprintf("kreqs-%d", i)
	spec := &record.Spec{Backend: "slurm", ResourceURL: e.counter.URL, JobScript: script, UpdateInterval: "5"}
	if mode == "agent" {
		spec.Cluster = cluster
	}
	iv := &runner.Invoker{JobName: job, Registry: e.reg, Holder: e.nss[0] + "/" + job, Backend: e.backendConfig(), Spec: spec,
		Store: &record.ConfigMapStore{Client: kc, Namespace: e.nss[0], Name: record.ConfigMapName(job)},
		Log:   slog.New(log), MinPoll: runner.DefaultMinPoll, Watch: runner.WatchConfig{Off: mode == "polling"},
		SubmitLease: 30 * time.Second, RetryBudget: 60 * time.Second, CancelWait: 10 * time.Second, Grace: 10 * time.Second}
	// A ceiling, not a figure: the shared cluster queues the jobs (8 slots).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	end := stepEnd{name: record.ConfigMapName(job)}
	if err := iv.Run(ctx); err != nil || iv.Result().Status != "DONE" {
		b.Errorf("%s: %v (%s)", job, err, iv.Result().Status)
		return end
	}
	end.returned, end.id = time.Now(), iv.Result().ID
	return end
}

// stepKubes are n Kubernetes clients, one a step, each throttled as an
// invoke process's own is (record.StoreOptions: QPS 20, burst 40). In a
// cluster every step is a process of its own; one client shared by the N
// steps of this process queued each step's few requests behind the
// others' (client-go's client-side throttling, waits of seconds at
// N = 1,000), a wait no step in a cluster has, which delayed the steps'
// first read of the agent's heartbeat past the submit's wait for it.
func stepKubes(b *testing.B, n int) kubeTally {
	cfg := testkube.Config(b)
	cfg.QPS, cfg.Burst = 20, 40
	t := make(kubeTally, n)
	for i := range t {
		t[i] = testkube.KubeClient(b, cfg)
	}
	return t
}

// kubeTally are the steps' Kubernetes clients, whose requests it sums.
type kubeTally []*kube.Client

func (t kubeTally) requests() (n int64) {
	for _, c := range t {
		n += c.Requests()
	}
	return n
}

// byVerb is the sum of the clients' RequestsByVerb, in its form.
func (t kubeTally) byVerb() string {
	sums := map[string]int64{}
	var order []string
	for _, c := range t {
		for _, f := range strings.Fields(c.RequestsByVerb()) {
			verb, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			if _, seen := sums[verb]; !seen {
				order = append(order, verb)
			}
			sums[verb] += n
		}
	}
	out := make([]string, len(order))
	for i, verb := range order {
		out[i] = fmt.Sprintf("%s=%d", verb, sums[verb])
	}
	return strings.Join(out, " ")
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

// watchProcess samples the live heap, and how late a 200 ms ticker of
// this process fires (its goroutines waiting for a CPU: all N steps share
// this process's, where in a cluster each step has its own), until the
// returned func, which returns the largest heap and lateness seen.
func watchProcess() func() (uint64, time.Duration) {
	var peak atomic.Uint64
	var lag atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		const every = 200 * time.Millisecond
		t := time.NewTicker(every)
		defer t.Stop()
		last := time.Now()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case now := <-t.C:
				// The ticker drops ticks it could not deliver: the gap
				// since the last one received is its lateness.
				lag.Store(max(lag.Load(), int64(time.Since(last)-every)))
				last = now
			}
		}
	}()
	return func() (uint64, time.Duration) { close(done); <-stopped; return peak.Load(), time.Duration(lag.Load()) }
}
