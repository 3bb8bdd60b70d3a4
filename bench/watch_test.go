package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
)

// BenchmarkWatcher: issue 27's one watcher per cluster, on and off in turn
// in the same run (the same services, minutes apart). N invoke processes of
// the release binary at once, each with its own ConfigMap record in one
// namespace and its own job that sleeps and then, as its very last
// command, writes `date +%s.%N` into a file of its own: the job's end to the
// nanosecond as the job itself saw it, on the same clock as this process
// (the clusters run on this machine). Sizes: BRIDGE_BENCH_WATCH (default
// 1,100); job lengths in seconds: BRIDGE_BENCH_WATCH_SECONDS (default 5);
// clusters: BRIDGE_BENCH_WATCH_BACKENDS, a comma list of the names of
// watchTargets (default slurm=22.05,slurm=24.11: slurmrestd only, so that
// `make bench` keeps its length; slurm=24.11-wide needs root). BRIDGE_BENCH_WATCH_RPS sets the watcher's
// --max-requests-per-second (default: the flag's own, 1);
// BRIDGE_BENCH_WATCH_OFF_FIRST=1 runs the watcher-off half first (to tell
// the order's part from the watcher's). Figures, each with the prefix on-
// or off-:
//
//	detect-p50-s, detect-p95-s  the job's last command to its invoke's exit
//	                            (the final state is recorded just before)
//	kube-req/job                invoke's own count ("requests sent")
//	sum-rss-MiB                 Σ peak RSS of the N invokes
//
// Over HTTP (slurmrestd, Ray's dashboard), a counting proxy in front of the
// cluster sorts its requests by what they ask:
//
//	poll-req/s                  the cluster's requests a second other than
//	                            submits and discovery, over the run
//	batch-req/s                 of them, the watcher's batched queries
//	backend-req/job             every request the cluster got, per job
//
// Over SSH (Slurm's login node, HTCondor's submit host) the commands are
// counted in the login node's sshd log (see sshCounter), which cannot tell
// a batched query from one job's:
//
//	ssh-cmd/job                 remote commands per job, all kinds
//	ssh-cmd/s                   of them, a second over the run's wall time
//	watcher-cmd/s               of them, those on the watchers' own
//	                            connections (the batched queries)
//	sftp/job                    SFTP sessions per job (their reads are not
//	                            counted one by one)
func BenchmarkWatcher(b *testing.B) {
	kubeconfig := needEnv(b, "BRIDGE_TEST_KUBECONFIG")[0]
	sizes := envInts("BRIDGE_BENCH_WATCH", []int{1, 100})
	lengths := envInts("BRIDGE_BENCH_WATCH_SECONDS", []int{5})
	for _, t := range selectedTargets(b) {
		b.Run(t.name, func(b *testing.B) {
			cl := t.cluster(b, kubeconfig, slices.Max(sizes))
			for _, secs := range lengths {
				for _, n := range sizes {
					b.Run(fmt.Sprintf("job=%ds/jobs=%d", secs, n), func(b *testing.B) {
						for i := 0; i < b.N; i++ {
							var on, off watchFigures
							if os.Getenv("BRIDGE_BENCH_WATCH_OFF_FIRST") != "" {
								off = watchOnce(b, cl, n, secs, false)
								on = watchOnce(b, cl, n, secs, true)
							} else {
								on = watchOnce(b, cl, n, secs, true)
								off = watchOnce(b, cl, n, secs, false)
							}
							on.report(b, "on-")
							off.report(b, "off-")
							if off.p95 > 0 && n >= 100 {
								// Guarded from 100 jobs on (a p95 of one job is one sample).
								metric(b, on.p95/off.p95, "detect-p95-on/off")
							} else if off.p95 > 0 {
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

// watchTarget is a cluster of the services (hack/services.sh) the
// benchmark can run on, by the names of its env variables.
type watchTarget struct {
	name, backend    string
	urlVar, credsVar string
	rootVar          string                     // the root the cluster's jobs run in, if not /
	kind             func(*http.Request) string // sorts its HTTP requests; nil: commands over SSH
	python           bool                       // the job script is Python (Ray's entrypoint)
	// wide: a Slurm 24.11 of the benchmark's own, started beside the shared
	// one with a CPU for each job of the largest N, so that the N jobs run
	// at once, as on a large cluster (the shared one has 8 job slots, and
	// 100 jobs of 60 s queue for 13 minutes).
	wide bool
}

// watchTargets: the three slurmrestd, Slurm 22.05 over SSH (jobs on this
// machine's /), HTCondor over SSH (jobs in its Debian 13 chroot, sharing
// that root's /tmp), Ray's dashboard (drivers on this machine's /) and a
// wide Slurm 24.11 of the benchmark's own (jobs in its chroot).
var watchTargets = []watchTarget{
	{name: "slurm=22.05", backend: "slurm", urlVar: "BRIDGE_TEST_SLURM_URL", credsVar: "BRIDGE_TEST_SLURM_CREDS", kind: slurmKind},
	{name: "slurm=24.11", backend: "slurm", urlVar: "BRIDGE_TEST_SLURM2411_URL", credsVar: "BRIDGE_TEST_SLURM2411_CREDS",
		rootVar: "BRIDGE_TEST_SLURM2411_ROOT", kind: slurmKind},
	{name: "slurm=26.05", backend: "slurm", urlVar: "BRIDGE_TEST_SLURM2605_URL", credsVar: "BRIDGE_TEST_SLURM2605_CREDS",
		rootVar: "BRIDGE_TEST_SLURM2605_ROOT", kind: slurmKind},
	{name: "slurm=ssh", backend: "slurm", urlVar: "BRIDGE_TEST_SSH_URL", credsVar: "BRIDGE_TEST_SSH_CREDS"},
	{name: "htcondor", backend: "htcondor", urlVar: "BRIDGE_TEST_CONDOR_SSH_URL", credsVar: "BRIDGE_TEST_CONDOR_SSH_CREDS",
		rootVar: "BRIDGE_TEST_CONDOR_ROOT"},
	{name: "ray", backend: "ray", urlVar: "BRIDGE_TEST_RAY_URL", credsVar: "BRIDGE_TEST_RAY_CREDS_DIR", kind: rayKind, python: true},
	{name: "slurm=24.11-wide", backend: "slurm", kind: slurmKind, wide: true},
}

// selectedTargets are the targets BRIDGE_BENCH_WATCH_BACKENDS names.
func selectedTargets(b *testing.B) []watchTarget {
	names := strings.Split(os.Getenv("BRIDGE_BENCH_WATCH_BACKENDS"), ",")
	if os.Getenv("BRIDGE_BENCH_WATCH_BACKENDS") == "" {
		names = []string{"slurm=22.05", "slurm=24.11"}
	}
	var out []watchTarget
	for _, n := range names {
		i := slices.IndexFunc(watchTargets, func(t watchTarget) bool { return t.name == strings.TrimSpace(n) })
		if i < 0 {
			b.Fatalf("BRIDGE_BENCH_WATCH_BACKENDS: %q is not one of slurm=22.05, slurm=24.11, slurm=26.05, slurm=ssh, htcondor, ray, slurm=24.11-wide", n)
		}
		out = append(out, watchTargets[i])
	}
	return out
}

// cluster reads the target's env (skipping the benchmark without it), or
// starts the wide Slurm with a CPU for each of jobs jobs.
func (t watchTarget) cluster(b *testing.B, kubeconfig string, jobs int) watchCluster {
	if t.wide {
		in := startSlurm2411(b, "/tmp/bridge-runner-slurm2411-wide", "the wide Slurm", "BRIDGE_SLURM2411_CPUS="+strconv.Itoa(max(jobs, 8)))
		return watchCluster{backend: t.backend, url: in.url, creds: in.creds, root: in.root, kubeconfig: kubeconfig, kind: t.kind}
	}
	env := needEnv(b, t.urlVar, t.credsVar)
	cl := watchCluster{backend: t.backend, url: env[0], creds: env[1], kubeconfig: kubeconfig, kind: t.kind, python: t.python}
	if t.rootVar != "" {
		cl.root = needEnv(b, t.rootVar)[0]
	}
	return cl
}

type watchCluster struct {
	backend, url, creds, kubeconfig string
	root                            string // the root the jobs' /tmp is in ("" for /)
	kind                            func(*http.Request) string
	python                          bool
}

// watchFigures is one configuration's run.
type watchFigures struct {
	n                       int
	p50, p95, max           float64 // seconds
	pollPerS, batchPerS     float64
	backendPerJob, kubePerJ float64
	sumRSS                  int64
	leaders                 int // "watching the cluster's jobs" lines
	batchMs                 float64
	unreached               int  // invokes that exited 75
	ssh                     bool // commands over SSH, counted by sshCounter
	sshCmds, sftp           int
	sshWatcherCmds          int            // of sshCmds, those on the watchers' own connections
	wall                    float64        // seconds, the first invoke's start to the last one's exit
	ctldRPCs                int            // RPCs slurmctld served over the run (sdiag's), all users; -1 unknown
	kinds                   map[string]int // the cluster's requests by kind (kindProxy), all senders
}

func (f watchFigures) report(b *testing.B, p string) {
	b.ReportMetric(f.p50, p+"detect-p50-s")
	b.ReportMetric(f.p95, p+"detect-p95-s")
	b.ReportMetric(f.max, p+"detect-max-s")
	if f.ssh {
		b.ReportMetric(float64(f.sshCmds)/float64(f.n), p+"ssh-cmd/job")
		b.ReportMetric(float64(f.sshCmds)/f.wall, p+"ssh-cmd/s")
		b.ReportMetric(float64(f.sshWatcherCmds)/f.wall, p+"watcher-cmd/s")
		b.ReportMetric(float64(f.sftp)/float64(f.n), p+"sftp/job")
	} else {
		f.reportHTTP(b, p)
	}
	if p == "on-" && f.n >= 100 {
		metric(b, f.kubePerJ, "on-kube-req/job") // guarded (guard_test.go)
	} else {
		b.ReportMetric(f.kubePerJ, p+"kube-req/job")
	}
	b.ReportMetric(float64(f.sumRSS)/(1<<20), p+"sum-rss-MiB")
	b.ReportMetric(float64(f.leaders), p+"leaders")
	b.ReportMetric(float64(f.unreached), p+"exit75")
	if f.ctldRPCs > 0 {
		b.ReportMetric(float64(f.ctldRPCs)/float64(f.n), p+"ctld-rpc/job")
		b.ReportMetric(float64(f.ctldRPCs)/f.wall, p+"ctld-rpc/s")
	}
}

// reportHTTP reports what the counting proxy saw.
func (f watchFigures) reportHTTP(b *testing.B, p string) {
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
	// By kind, per job (the agent's and watchers' requests shared out):
	// discovery (pings, the OpenAPI document), submits, one job's state,
	// lists (batched queries and look-ups by key).
	for kind, name := range map[string]string{"discovery": "disc", "submit": "submit", "job": "status", "batch": "list"} {
		b.ReportMetric(float64(f.kinds[kind])/float64(f.n), p+name+"-req/job")
	}
}

// kindProxy forwards to the cluster and keeps each request's kind and
// time.
type kindProxy struct {
	kind  func(*http.Request) string
	mu    sync.Mutex
	kinds map[string]int
	first time.Time // of the requests that poll (not submits, not discovery)
	last  time.Time
	batch time.Duration // the batched queries' time, all together
	log   *os.File      // each request's time and kind, with BRIDGE_BENCH_WATCH_LOGS
}

// slurmKind sorts a slurmrestd request: discovery (its pings, or the
// OpenAPI document it falls back to), a submit, the watcher's batched
// query (jobs/, jobs/state/), or one job's.
func slurmKind(r *http.Request) string {
	switch {
	case strings.Contains(r.URL.Path, "/openapi") || strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/ping"):
		return "discovery"
	case r.Method == http.MethodPost:
		return "submit"
	case strings.Contains(r.URL.Path, "/jobs"):
		return "batch"
	}
	return "job"
}

// rayKind sorts a Ray dashboard request: the watcher's batched query is
// the job list (GET /api/jobs/), one job's is GET /api/jobs/{id} (also
// the submit's look-up by key); anything outside /api/jobs/ (the version)
// is discovery.
func rayKind(r *http.Request) string {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case !strings.HasPrefix(path, "/api/jobs"):
		return "discovery"
	case r.Method == http.MethodPost && path == "/api/jobs":
		return "submit"
	case r.Method == http.MethodPost:
		return "stop"
	case path == "/api/jobs":
		return "batch"
	case strings.Contains(path, "/logs"):
		return "logs"
	}
	return "job"
}

func (p *kindProxy) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := p.kind(r)
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

// figures fills f's request figures from what the proxy counted.
func (p *kindProxy) figures(f *watchFigures) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	span := max(p.last.Sub(p.first).Seconds(), 1)
	f.pollPerS = float64(p.kinds["batch"]+p.kinds["job"]) / span
	f.batchPerS = float64(p.kinds["batch"]) / span
	total := 0
	for _, c := range p.kinds {
		total += c
	}
	f.backendPerJob = float64(total) / float64(f.n)
	f.kinds = maps.Clone(p.kinds)
	if c := p.kinds["batch"]; c > 0 {
		f.batchMs = float64(p.batch.Milliseconds()) / float64(c)
	}
	return fmt.Sprintf("requests %v over %.1fs (batched query %.0f ms on average)", p.kinds, span, f.batchMs)
}

// watchRun is one configuration's invokes while they run.
type watchRun struct {
	cmds      []*exec.Cmd
	stderr    []bytes.Buffer
	exited    []time.Time
	rss       []int64
	stopRSS   []func() int64 // each invoke's peakRSS
	unreached []bool
}

func watchOnce(b *testing.B, cl watchCluster, n, secs int, watcher bool) watchFigures {
	return watchMode(b, cl, n, secs, watcher, nil)
}

// watchMode is watchOnce, with the invokes' extra arguments and what runs
// beside them (the cluster's agent: see BenchmarkAgent) given by side,
// which is called with the namespace and the cluster's URL as the invokes
// reach it, and returns the invokes' extra arguments and a stop that
// returns the Kubernetes requests it sent.
func watchMode(b *testing.B, cl watchCluster, n, secs int, watcher bool, side func(ns, url string) ([]string, func() int)) watchFigures {
	logs := os.Getenv("BRIDGE_BENCH_WATCH_LOGS") // a directory for the timelines
	tag := fmt.Sprintf("%s-n%d-%ds-watcher=%v-side=%v", strings.ReplaceAll(b.Name(), "/", "_"), n, secs, watcher, side != nil)
	resourceURL, cp, ssh := cl.url, (*kindProxy)(nil), (*sshCounter)(nil)
	if cl.kind != nil {
		cp = &kindProxy{kind: cl.kind, kinds: map[string]int{}}
		resourceURL = startProxy(b, cp, cl.url, logs, tag)
	} else {
		ssh = newSSHCounter(b, cl.url, cl.creds)
	}
	ns := testkube.Namespace(b, testkube.Client(b))
	dir, stampDir := stampDirs(b, cl.root)
	extra, stopSide := []string(nil), func() int { return 0 }
	if side != nil {
		extra, stopSide = side(ns, resourceURL)
	}
	rpcs0 := cl.slurmctldRPCs(b)
	start := time.Now()
	wr := startInvokes(b, n, func(name string) []string {
		args := []string{"invoke", "--kubeconfig", cl.kubeconfig, "--namespace", ns,
			"--job-name", name, "--backend", cl.backend, "--resource-url", resourceURL, "--credentials-dir", cl.creds,
			"--script", cl.script(secs, filepath.Join(dir, name)), "--update-interval", "5", "--follow-logs=false",
			"--watcher=" + strconv.FormatBool(watcher)}
		args = append(args, extra...)
		if rps := os.Getenv("BRIDGE_BENCH_WATCH_RPS"); rps != "" && watcher {
			args = append(args, "--max-requests-per-second", rps)
		}
		return args
	}, ssh)
	wr.wait(b, watcher)
	f := watchFigures{n: n, wall: time.Since(start).Seconds(), ctldRPCs: -1}
	sideKube := stopSide()
	if rpcs := cl.slurmctldRPCs(b); rpcs0 >= 0 && rpcs >= rpcs0 {
		f.ctldRPCs = rpcs - rpcs0
	}
	delays := wr.figures(b, &f, stampDir)
	f.kubePerJ += float64(sideKube) / float64(n)
	if logs != "" { // the invokes' own logs, and each job's delay
		wr.writeLogs(b, filepath.Join(logs, tag+"-invokes.log"), delays)
	}
	delays = slices.DeleteFunc(delays, func(d float64) bool { return math.IsNaN(d) }) // the jobs never submitted
	sort.Float64s(delays)
	if len(delays) == 0 {
		b.Fatalf("no job of %d was submitted", n)
	}
	f.p50, f.p95, f.max = delays[len(delays)/2], delays[(len(delays)*95+99)/100-1], delays[len(delays)-1]
	var what string
	if cp != nil {
		what = cp.figures(&f)
	} else {
		what = ssh.figures(b, &f)
	}
	b.Logf("watcher=%v n=%d wall %.1fs, %s, leaders %d", watcher, n, f.wall, what, f.leaders)
	return f
}

// script is the job: it sleeps secs and, as its last command, writes the
// time it ends into stamp. Ray's entrypoint is Python, which runs the
// same shell command.
//
// The job sleeps secs and a fraction of a second of its own, the same in
// both halves (from its stamp's name): with a whole number of seconds, on
// a cluster of few slots where a job starts as another ends, the jobs'
// ends fell in step with the watcher's queries, a fixed time before or
// after them, and the same build's p50 was 0.40 s in one run and 1.03 s
// in the next as that phase fell.
func (cl watchCluster) script(secs int, stamp string) string {
	h := fnv.New32a()
	h.Write([]byte(filepath.Base(stamp)))
	sh := fmt.Sprintf("sleep %d.%03d\ndate +%%s.%%N > %s\n", secs, h.Sum32()%1000, stamp)
	if cl.python {
		return fmt.Sprintf("import subprocess\nsubprocess.run(%q, shell=True, check=True)\n", sh)
	}
	return "#!/bin/sh\n" + sh
}

// startProxy starts a counting proxy in front of target and returns its
// URL; it stops with the benchmark.
func startProxy(b *testing.B, cp *kindProxy, target, logs, tag string) string {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	if logs != "" {
		if err := os.MkdirAll(logs, 0o755); err != nil {
			b.Fatal(err)
		}
		if cp.log, err = os.Create(filepath.Join(logs, tag+"-proxy.log")); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cp.log.Close() })
	}
	srv := httptest.NewServer(cp.wrap(httputil.NewSingleHostReverseProxy(u)))
	b.Cleanup(srv.Close)
	return srv.URL
}

// stampDirs makes the directory the jobs write their end stamps into:
// dir as the jobs see it, stampDir as this process does (under the root
// the jobs run in). Both are removed with the benchmark.
func stampDirs(b *testing.B, root string) (dir, stampDir string) {
	dir, err := os.MkdirTemp("/tmp", "bridge-bench-watch-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	stampDir = filepath.Join(root, dir)
	if root != "" {
		if err := os.MkdirAll(stampDir, 0o1777); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(stampDir) })
	}
	if err := os.Chmod(stampDir, 0o1777); err != nil { // the job runs as the cluster's user
		b.Fatal(err)
	}
	return dir, stampDir
}

// startInvokes starts n invokes of the release binary at once, with the
// arguments args gives for each job name.
func startInvokes(b *testing.B, n int, args func(name string) []string, ssh *sshCounter) *watchRun {
	wr := &watchRun{cmds: make([]*exec.Cmd, n), stderr: make([]bytes.Buffer, n), exited: make([]time.Time, n),
		rss: make([]int64, n), unreached: make([]bool, n)}
	stops := make([]func() int64, n)
	for i := range wr.cmds {
		wr.cmds[i] = exec.Command(binary, args(fmt.Sprintf("watch-%d", i))...)
		wr.cmds[i].Stderr = &wr.stderr[i]
		if err := wr.cmds[i].Start(); err != nil {
			b.Fatal(err)
		}
		stops[i] = peakRSS(wr.cmds[i].Process.Pid, 100*time.Millisecond)
	}
	if ssh != nil {
		ssh.follow(wr.cmds)
	}
	wr.stopRSS = stops
	return wr
}

// wait waits for every invoke. Exit 75 (the cluster out of reach past the
// retry budget, a step Argo would retry) is counted; any other failure
// fails the benchmark.
func (wr *watchRun) wait(b *testing.B, watcher bool) {
	var wg sync.WaitGroup
	for i := range wr.cmds {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			err := wr.cmds[i].Wait()
			wr.exited[i] = time.Now()
			wr.rss[i] = wr.stopRSS[i]()
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 75 {
				wr.unreached[i] = true
			} else if err != nil {
				b.Errorf("invoke %d (watcher %v): %v\n%s", i, watcher, err, wr.stderr[i].String())
			}
		}(i)
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// figures fills f from the invokes' exits, stamps and logs, and returns
// each job's detection delay (NaN for a job never submitted).
func (wr *watchRun) figures(b *testing.B, f *watchFigures, stampDir string) []float64 {
	delays := make([]float64, len(wr.cmds))
	var kubeSum int
	for i := range wr.cmds {
		if wr.unreached[i] {
			f.unreached++
			delays[i] = math.NaN()
			continue
		}
		delays[i] = float64(wr.exited[i].UnixNano())/1e9 - readStamp(b, filepath.Join(stampDir, fmt.Sprintf("watch-%d", i)))
		f.sumRSS += wr.rss[i]
		if m := requestsRE.FindStringSubmatch(wr.stderr[i].String()); m != nil {
			ku, _ := strconv.Atoi(m[2])
			kubeSum += ku
		}
		f.leaders += strings.Count(wr.stderr[i].String(), "watching the cluster's jobs of this group")
	}
	f.kubePerJ = float64(kubeSum) / float64(f.n)
	return delays
}

// readStamp reads a job's end stamp (seconds since the epoch).
func readStamp(b *testing.B, path string) float64 {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("a job left no end stamp: %v", err)
	}
	end, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil {
		b.Fatalf("end stamp %s: %q: %v", path, data, err)
	}
	return end
}

func (wr *watchRun) writeLogs(b *testing.B, path string, delays []float64) {
	var all bytes.Buffer
	for i := range wr.cmds {
		// The exit's time too, so that a timeline can put the job's end
		// (the exit less the delay) beside the cluster's requests.
		fmt.Fprintf(&all, "== watch-%d delay %.3fs exit %s\n%s", i, delays[i], wr.exited[i].UTC().Format("15:04:05.000"), wr.stderr[i].String())
	}
	if err := os.WriteFile(path, all.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
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

// slurmctldRPCs is the number of RPCs slurmctld has served since its
// start (sdiag's "Remote Procedure Call statistics by message type", read
// from slurmrestd's diag/ at v0.0.42, which 24.11 and 26.05 serve); -1
// where it cannot be read (22.05, SSH, other backends). The benchmark has
// the cluster to itself, so a difference is the run's.
func (cl watchCluster) slurmctldRPCs(b *testing.B) int {
	if cl.backend != "slurm" || cl.kind == nil {
		return -1
	}
	read := func(name string) string {
		v, err := os.ReadFile(filepath.Join(cl.creds, name))
		require.NoError(b, err)
		return strings.TrimSpace(string(v))
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(cl.url, "/")+"/slurm/v0.0.42/diag/", nil)
	require.NoError(b, err)
	req.Header.Set("X-SLURM-USER-NAME", read("username"))
	req.Header.Set("X-SLURM-USER-TOKEN", read("token"))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var diag struct {
		Statistics struct {
			RPCs []struct {
				Count int `json:"count"`
			} `json:"rpcs_by_message_type"`
		} `json:"statistics"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&diag) != nil || len(diag.Statistics.RPCs) == 0 {
		return -1
	}
	total := 0
	for _, r := range diag.Statistics.RPCs {
		total += r.Count
	}
	return total
}
