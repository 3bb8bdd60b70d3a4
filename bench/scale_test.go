package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// BenchmarkScale runs N invokers at once in this process (as N pods would
// run one each) against the one real slurmrestd and the one real
// kube-apiserver: every job must end DONE with its own Slurm job. One
// process rather than N, because N processes of ~27 MiB would measure this
// machine's memory, not the servers; per-invoker memory is reported.
func BenchmarkScale(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS", "BRIDGE_TEST_KUBECONFIG")
	sizes := []int{100, 250, 500}
	if s := os.Getenv("BRIDGE_BENCH_SCALE"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("invokers=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				scaleOnce(b, n, env[0], env[1])
			}
		})
	}
}

func scaleOnce(b *testing.B, n int, slurmURL, creds string) {
	cfg := testkube.Config(b)
	cfg.QPS, cfg.Burst = 1000, 2000
	kc, err := kube.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ns := testkube.Namespace(b, testkube.Client(b))
	hc, err := runner.NewHTTPClient("", false)
	if err != nil {
		b.Fatal(err)
	}
	reg := builtin.Registry()
	spec := record.Spec{Backend: "slurm", ResourceURL: slurmURL, JobScript: "#!/bin/sh\ntrue\n", UpdateInterval: "5"}
	runtime.GC()
	heapBefore := heapInUse()
	results := make([]*runner.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := fmt.Sprintf("scale-%d", i)
			iv := &runner.Invoker{
				JobName: name, Spec: &spec, Registry: reg,
				Store:       &record.ConfigMapStore{Client: kc, Namespace: ns, Name: record.ConfigMapName(name)},
				Backend:     backends.Config{Credentials: runner.DirCredentials{Dir: creds, Secrets: &runner.Secrets{}}, HTTPClient: hc},
				Log:         slog.New(slog.DiscardHandler),
				RetryBudget: 5 * time.Minute,
			}
			errs[i] = iv.Run(context.Background())
			results[i] = iv.Result()
		}(i)
	}
	stop := make(chan struct{})
	peakc := make(chan uint64)
	go func() { // the heap's peak while the invokers run
		peak := heapInUse()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				peak = max(peak, heapInUse())
			case <-stop:
				peakc <- peak
				return
			}
		}
	}()
	wg.Wait()
	wall := time.Since(start)
	close(stop)
	peak := <-peakc
	ids := map[string]bool{}
	for i := range results {
		if errs[i] != nil || results[i].Status != "DONE" {
			b.Fatalf("invoker %d: %v (%s: %s)", i, errs[i], results[i].Status, results[i].Message)
		}
		ids[results[i].ID] = true
	}
	if len(ids) != n {
		b.Fatalf("%d invokers made %d distinct Slurm jobs", n, len(ids))
	}
	b.ReportMetric(wall.Seconds(), "wall-s")
	b.ReportMetric(float64(n)/wall.Seconds(), "jobs/s")
	b.ReportMetric(float64(runner.RequestCount(hc))/float64(n), "backend-req/job")
	b.ReportMetric(float64(kc.Requests())/float64(n), "kube-req/job")
	metric(b, float64(peak-heapBefore)/float64(n)/1024, "heap-KiB/invoker")
	b.ReportMetric(0, "ns/op")
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
