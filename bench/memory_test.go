package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
)

// BenchmarkSlurmConfigMap: a Slurm job with the record in a real ConfigMap,
// as a workflow step runs it (the figure the memory goal is about).
func BenchmarkSlurmConfigMap(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS", "BRIDGE_TEST_KUBECONFIG")
	ns := testkube.Namespace(b, testkube.Client(b))
	for _, job := range jobs[:2] {
		b.Run("job="+job.name, func(b *testing.B) {
			var runs []run
			for i := 0; i < b.N; i++ {
				runs = append(runs, invoke(b, nil, "--kubeconfig", env[2], "--namespace", ns,
					"--job-name", fmt.Sprintf("bench-slurm-%d-%d", time.Now().UnixNano(), i), "--backend", "slurm",
					"--resource-url", env[0], "--credentials-dir", env[1], "--script", "#!/bin/sh\n"+job.sh+"\n", "--update-interval", "1"))
			}
			report(b, runs, job.length)
		})
	}
}

// BenchmarkFirstRequest: from starting the process to its first request to
// the backend (a proxy in front of the real slurmrestd notes it), with each
// kind of record. With the ConfigMap record this includes loading the
// kubeconfig, building the Kubernetes client and the record's round trips.
// The median of at least 5 runs is reported, beside the reference build's
// median from runs in turn with them, and the ratio is guarded (see
// sideBySide).
func BenchmarkFirstRequest(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS", "BRIDGE_TEST_KUBECONFIG")
	target, err := url.Parse(env[0])
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var first time.Time
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if first.IsZero() {
			first = time.Now()
		}
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ns := testkube.Namespace(b, testkube.Client(b))
	n := 0
	records := map[string]func() []string{
		"file": func() []string { return []string{"--state-dir", b.TempDir(), "--job-name", "bench"} },
		"configmap": func() []string {
			n++
			return []string{"--kubeconfig", env[2], "--namespace", ns, "--job-name", fmt.Sprintf("bench-first-%d-%d", time.Now().UnixNano(), n)}
		},
	}
	for _, rec := range []string{"file", "configmap"} {
		b.Run("record="+rec, func(b *testing.B) {
			this, ref, ratio, ok := sideBySide(b, max(b.N, 20), func(bin string) time.Duration {
				mu.Lock()
				first = time.Time{}
				mu.Unlock()
				start := time.Now()
				invokeBin(b, bin, nil, append(records[rec](), "--backend", "slurm", "--resource-url", srv.URL,
					"--credentials-dir", env[1], "--script", "#!/bin/sh\ntrue\n", "--update-interval", "1")...)
				mu.Lock()
				defer mu.Unlock()
				return first.Sub(start)
			})
			if ok {
				b.ReportMetric(float64(this.Microseconds())/1000, "first-req-ms")
				b.ReportMetric(float64(ref.Microseconds())/1000, "ref-first-req-ms")
				metric(b, ratio, "first-req-ratio")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkConcurrentInvokes: N invoke processes at once (default 100,
// BRIDGE_BENCH_PROCS), each following its own Slurm job with its own
// ConfigMap record, as N workflow steps on one node would; the sum of their
// peak RSS is what the node must hold. Every job must end DONE.
func BenchmarkConcurrentInvokes(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS", "BRIDGE_TEST_KUBECONFIG")
	n := 100
	if s := os.Getenv("BRIDGE_BENCH_PROCS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ns := testkube.Namespace(b, testkube.Client(b))
	b.Run(fmt.Sprintf("procs=%d", n), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			concurrentOnce(b, n, ns, env)
		}
	})
}

func concurrentOnce(b *testing.B, n int, ns string, env []string) {
	cmds := make([]*exec.Cmd, n)
	errs := make([]bytes.Buffer, n)
	stops := make([]func() int64, n)
	stamp := time.Now().UnixNano()
	start := time.Now()
	for i := range cmds {
		cmds[i] = exec.Command(binary, "invoke", "--kubeconfig", env[2], "--namespace", ns,
			"--job-name", fmt.Sprintf("bench-conc-%d-%d", stamp, i), "--backend", "slurm", "--resource-url", env[0],
			"--credentials-dir", env[1], "--script", "#!/bin/sh\ntrue\n", "--update-interval", "5", "--follow-logs=false")
		cmds[i].Stderr = &errs[i]
		if err := cmds[i].Start(); err != nil {
			b.Fatal(err)
		}
		stops[i] = peakRSS(cmds[i].Process.Pid, 20*time.Millisecond)
	}
	var sum, peak int64
	var cpu time.Duration
	failed := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			failed++
			b.Logf("invoke %d: %v\n%s", i, err, errs[i].String())
		}
		rss := stops[i]()
		sum += rss
		peak = max(peak, rss)
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if failed > 0 {
		b.Fatalf("%d of %d invokes did not end DONE", failed, n)
	}
	b.ReportMetric(time.Since(start).Seconds(), "wall-s")
	metric(b, float64(sum)/(1<<20), "sum-maxrss-MiB")
	b.ReportMetric(float64(peak)/(1<<20), "max-maxrss-MiB")
	b.ReportMetric(float64((cpu/time.Duration(n)).Microseconds())/1000, "cpu-ms/invoke")
	b.ReportMetric(0, "ns/op")
}
