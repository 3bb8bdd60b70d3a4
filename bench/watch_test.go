package bench

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
)

// BenchmarkWatcher: issue 27's one watcher per cluster, on and off in turn
// in the same run (the same services, minutes apart). N invoke processes of
// the release binary at once, each with its own ConfigMap record in one
// namespace and its own Slurm job that sleeps and then, as its very last
// command, writes `date +%s.%N` into a file of its own: the job's end to the
// nanosecond as the job itself saw it, on the same clock as this process
// (the cluster runs on this machine). A counting proxy in front of the real
// slurmrestd sorts the requests by what they ask. Sizes: BRIDGE_BENCH_WATCH
// (default 1,100); job lengths in seconds: BRIDGE_BENCH_WATCH_SECONDS
// (default 5). Figures, each with the prefix on- or off-:
//
//	detect-p50-s, detect-p95-s  the job's last command to its invoke's exit
//	                            (the final state is recorded just before)
//	poll-req/s                  the cluster's requests a second other than
//	                            submits and discovery, over the run
//	batch-req/s                 of them, the watcher's batched queries
//	backend-req/job             every request the cluster got, per job
//	kube-req/job                invoke's own count ("requests sent")
//	sum-rss-MiB                 Σ peak RSS of the N invokes
func BenchmarkWatcher(b *testing.B) {
	kubeconfig := needEnv(b, "BRIDGE_TEST_KUBECONFIG")[0]
	sizes := envInts("BRIDGE_BENCH_WATCH", []int{1, 100})
	lengths := envInts("BRIDGE_BENCH_WATCH_SECONDS", []int{5})
	for _, c := range []struct{ release, env string }{{"22.05", "BRIDGE_TEST_SLURM"}, {"24.11", "BRIDGE_TEST_SLURM2411"}} {
		b.Run("slurm="+c.release, func(b *testing.B) {
			env := needEnv(b, c.env+"_URL", c.env+"_CREDS")
			// The 24.11 cluster runs its jobs in a root of its own: the
			// job's /tmp is that root's.
			cl := watchCluster{url: env[0], creds: env[1], kubeconfig: kubeconfig, root: os.Getenv(c.env + "_ROOT")}
			for _, secs := range lengths {
				for _, n := range sizes {
					b.Run(fmt.Sprintf("job=%ds/jobs=%d", secs, n), func(b *testing.B) {
						for i := 0; i < b.N; i++ {
							on := watchOnce(b, cl, n, secs, true)
							off := watchOnce(b, cl, n, secs, false)
							on.report(b, "on-")
							off.report(b, "off-")
							if off.p95 > 0 {
								b.ReportMetric(on.p95/off.p95, "detect-p95-on/off")
							}
						}
						b.ReportMetric(0, "ns/op")
					})
				}
			}
		})
	}
}

type watchCluster struct{ url, creds, kubeconfig, root string }

// watchFigures is one configuration's run.
type watchFigures struct {
	n                       int
	p50, p95, max           float64 // seconds
	pollPerS, batchPerS     float64
	backendPerJob, kubePerJ float64
	sumRSS                  int64
	leaders                 int // "watching the cluster's jobs" lines
	batchMs                 float64
	unreached               int // invokes that exited 75
}

func (f watchFigures) report(b *testing.B, p string) {
	b.ReportMetric(f.p50, p+"detect-p50-s")
	b.ReportMetric(f.p95, p+"detect-p95-s")
	b.ReportMetric(f.max, p+"detect-max-s")
	b.ReportMetric(f.pollPerS, p+"poll-req/s")
	// Guarded with the watcher on (ceilings in guard_test.go): its batched
	// queries a second, whatever N, and from 100 jobs on the requests per
	// job (with few jobs the watcher's queries are shared by few).
	if p == "on-" {
		metric(b, f.batchPerS, "on-batch-req/s")
	} else {
		b.ReportMetric(f.batchPerS, p+"batch-req/s")
	}
	if f.batchMs > 0 {
		b.ReportMetric(f.batchMs, p+"batch-ms")
	}
	if p == "on-" && f.n >= 100 {
		metric(b, f.backendPerJob, "on-backend-req/job")
	} else {
		b.ReportMetric(f.backendPerJob, p+"backend-req/job")
	}
	b.ReportMetric(f.kubePerJ, p+"kube-req/job")
	b.ReportMetric(float64(f.sumRSS)/(1<<20), p+"sum-rss-MiB")
	b.ReportMetric(float64(f.leaders), p+"leaders")
	b.ReportMetric(float64(f.unreached), p+"exit75")
}

// kindProxy forwards to the cluster and keeps each request's kind and
// time.
type kindProxy struct {
	mu    sync.Mutex
	kinds map[string]int
	first time.Time // of the requests that poll (not submits, not discovery)
	last  time.Time
	batch time.Duration // the batched queries' time, all together
	log   *os.File      // each request's time and kind, with BRIDGE_BENCH_WATCH_LOGS
}

// requestKind sorts a slurmrestd request: discovery, a submit, the
// watcher's batched query (jobs/, jobs/state/), or one job's.
func requestKind(r *http.Request) string {
	switch {
	case strings.Contains(r.URL.Path, "/openapi"):
		return "discovery"
	case r.Method == http.MethodPost:
		return "submit"
	case strings.Contains(r.URL.Path, "/jobs"):
		return "batch"
	}
	return "job"
}

func (p *kindProxy) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := requestKind(r)
		p.mu.Lock()
		if p.log != nil {
			fmt.Fprintf(p.log, "%s %s %s %s\n", time.Now().UTC().Format("15:04:05.000"), k, r.Method, r.URL.Path)
		}
		p.kinds[k]++
		if k == "batch" || k == "job" {
			now := time.Now()
			if p.first.IsZero() {
				p.first = now
			}
			p.last = now
		}
		p.mu.Unlock()
		start := time.Now()
		h.ServeHTTP(w, r)
		if k == "batch" {
			p.mu.Lock()
			p.batch += time.Since(start)
			p.mu.Unlock()
		}
	})
}

func watchOnce(b *testing.B, cl watchCluster, n, secs int, watcher bool) watchFigures {
	target, err := url.Parse(cl.url)
	if err != nil {
		b.Fatal(err)
	}
	cp := &kindProxy{kinds: map[string]int{}}
	logs := os.Getenv("BRIDGE_BENCH_WATCH_LOGS") // a directory for the timelines
	tag := fmt.Sprintf("%s-n%d-%ds-watcher=%v", strings.ReplaceAll(b.Name(), "/", "_"), n, secs, watcher)
	if logs != "" {
		if cp.log, err = os.Create(filepath.Join(logs, tag+"-proxy.log")); err != nil {
			b.Fatal(err)
		}
		defer cp.log.Close()
	}
	srv := httptest.NewServer(cp.wrap(httputil.NewSingleHostReverseProxy(target)))
	defer srv.Close()
	ns := testkube.Namespace(b, testkube.Client(b))
	dir, err := os.MkdirTemp("/tmp", "bridge-bench-watch-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	stampDir := filepath.Join(cl.root, dir)
	if cl.root != "" {
		if err := os.MkdirAll(stampDir, 0o1777); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(stampDir)
	}
	if err := os.Chmod(stampDir, 0o1777); err != nil { // the job runs as the cluster's user
		b.Fatal(err)
	}
	cmds := make([]*exec.Cmd, n)
	stderr := make([]bytes.Buffer, n)
	exited := make([]time.Time, n)
	rss := make([]int64, n)
	unreached := make([]bool, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cmds {
		name := fmt.Sprintf("watch-%d", i)
		script := fmt.Sprintf("#!/bin/sh\nsleep %d\ndate +%%s.%%N > %s/%s\n", secs, dir, name)
		cmds[i] = exec.Command(binary, "invoke", "--kubeconfig", cl.kubeconfig, "--namespace", ns,
			"--job-name", name, "--backend", "slurm", "--resource-url", srv.URL, "--credentials-dir", cl.creds,
			"--script", script, "--update-interval", "5", "--follow-logs=false", "--watcher="+strconv.FormatBool(watcher))
		cmds[i].Stderr = &stderr[i]
		if err := cmds[i].Start(); err != nil {
			b.Fatal(err)
		}
		stop := peakRSS(cmds[i].Process.Pid, 100*time.Millisecond)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			err := cmds[i].Wait()
			exited[i] = time.Now()
			rss[i] = stop()
			// Exit 75 (the cluster out of reach past the retry budget, a
			// step Argo would retry) is counted; any other failure fails.
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 75 {
				unreached[i] = true
			} else if err != nil {
				b.Errorf("invoke %d (watcher %v): %v\n%s", i, watcher, err, stderr[i].String())
			}
		}(i)
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	f := watchFigures{n: n}
	var delays []float64
	var backendSum, kubeSum int
	for i := range cmds {
		if unreached[i] {
			f.unreached++
			delays = append(delays, 0) // kept in step with cmds for the logs; dropped below
			continue
		}
		data, err := os.ReadFile(filepath.Join(stampDir, fmt.Sprintf("watch-%d", i)))
		if err != nil {
			b.Fatalf("job %d left no end stamp: %v", i, err)
		}
		end, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		if err != nil {
			b.Fatalf("job %d's end stamp %q: %v", i, data, err)
		}
		delays = append(delays, float64(exited[i].UnixNano())/1e9-end)
		f.sumRSS += rss[i]
		if m := requestsRE.FindStringSubmatch(stderr[i].String()); m != nil {
			be, _ := strconv.Atoi(m[1])
			ku, _ := strconv.Atoi(m[2])
			backendSum += be
			kubeSum += ku
		}
		f.leaders += strings.Count(stderr[i].String(), "watching the cluster's jobs of this group")
	}
	if logs != "" { // the invokes' own logs, and each job's delay
		var all bytes.Buffer
		for i := range cmds {
			fmt.Fprintf(&all, "== watch-%d delay %.3fs\n%s", i, delays[i], stderr[i].String())
		}
		if err := os.WriteFile(filepath.Join(logs, tag+"-invokes.log"), all.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	sort.Float64s(delays)
	delays = delays[f.unreached:] // the zeros of the jobs never submitted
	if len(delays) == 0 {
		b.Fatalf("no job of %d was submitted", n)
	}
	f.p50, f.p95, f.max = delays[len(delays)/2], delays[(len(delays)*95+99)/100-1], delays[len(delays)-1]
	cp.mu.Lock()
	defer cp.mu.Unlock()
	span := cp.last.Sub(cp.first).Seconds()
	if span < 1 {
		span = 1
	}
	f.pollPerS = float64(cp.kinds["batch"]+cp.kinds["job"]) / span
	f.batchPerS = float64(cp.kinds["batch"]) / span
	total := 0
	for _, c := range cp.kinds {
		total += c
	}
	f.backendPerJob = float64(total) / float64(n)
	f.kubePerJ = float64(kubeSum) / float64(n)
	if c := cp.kinds["batch"]; c > 0 {
		f.batchMs = float64(cp.batch.Milliseconds()) / float64(c)
	}
	b.Logf("watcher=%v n=%d wall %.1fs, requests %v over %.1fs (batched query %.0f ms on average), invoke-counted backend %d, leaders %d",
		watcher, n, time.Since(start).Seconds(), cp.kinds, span, f.batchMs, backendSum, f.leaders)
	return f
}

// envInts reads a comma list of numbers from an environment variable.
func envInts(name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			panic(fmt.Sprintf("%s: %q is not a number", name, f))
		}
		out = append(out, v)
	}
	return out
}
