package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// BenchmarkPlacement: issue 29's placement by load, on two real Slurm
// clusters in one run. "free" is the suite's Slurm 22.05 as it is; "filled"
// is a private Slurm 24.11 started here (beside the shared one, which is
// never filled nor stopped) whose CPUs are all taken, before each mode, by
// background jobs that sleep BRIDGE_BENCH_PLACE_FILL_SECONDS (default 40),
// with as many more pending behind them. Then N jobs of S seconds
// (BRIDGE_BENCH_PLACE_JOBS, default 40; BRIDGE_BENCH_PLACE_SECONDS,
// default 10) go through N in-process invokers at once (records in
// ConfigMaps of a namespace of the mode's own, as in pods: the invokes
// share each cluster's probes and the cluster's watcher), three ways in
// turn:
//
//	placement    targets [filled, free], earliest-start
//	fixed        the filled cluster's URL alone (a user with one resourceURL)
//	round-robin  job i to target i%2: filled, free, filled, ...
//
// Figures, each mode in a sub-benchmark of its own: makespan-s (the
// first job's submit to the last one's end, Slurm's own times in the
// records), wait-mean-s and wait-p95-s (start − submit of each record),
// jobs-filled and jobs-free (counted in each cluster's squeue by job
// name), probe-req/job (GET partitions/, nodes/, jobs/: the load probes,
// counted by a proxy in front of each cluster), discovery-req/job (GET
// /slurm/vX/ping: a probe builds a backend of its own, which asks the API
// version once), backend-req/job (all requests) and exit75-retried (an
// invoke that ends in a temporary failure is run again, at most twice,
// as a retryStrategy would). Every mode checks that each job ran exactly
// once, in Slurm.
//
// Then the fault: the filled cluster's slurmrestd is stopped (its
// slurmctld still runs) and N jobs with targets [filled, free] must each
// run exactly once, on the free cluster, each record's placement saying
// the filled one did not answer. All jobs this run submitted are
// cancelled at the end, on failure too.
func BenchmarkPlacement(b *testing.B) {
	env := needEnv(b, "BRIDGE_TEST_SLURM_URL", "BRIDGE_TEST_SLURM_CREDS", "SLURM_CONF")
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			b.Fatal("the filled Slurm instance needs root (it mounts and chroots)")
		}
		b.Skip("the filled Slurm instance needs root (it mounts and chroots)")
	}
	n := envInts("BRIDGE_BENCH_PLACE_JOBS", []int{40})[0]
	secs := envInts("BRIDGE_BENCH_PLACE_SECONDS", []int{10})[0]
	fill := envInts("BRIDGE_BENCH_PLACE_FILL_SECONDS", []int{40})[0]
	inst := startSlurm2411(b, "/tmp/bridge-runner-slurm2411-place", "the filled Slurm")
	stamp := time.Now().Unix() % 1000000
	free := &placeCluster{name: "free", url: env[0], creds: env[1], prefix: fmt.Sprintf("pb%d-", stamp),
		cmd: func(args ...string) *exec.Cmd {
			c := exec.Command(args[0], args[1:]...)
			c.Env = append(os.Environ(), "SLURM_CONF="+env[2])
			return c
		}}
	filled := &placeCluster{name: "filled", url: inst.url, creds: inst.creds, prefix: free.prefix,
		cmd: func(args ...string) *exec.Cmd {
			c := exec.Command("chroot", append([]string{inst.root}, args...)...)
			c.Env = withoutEnv(os.Environ(), "SLURM_CONF") // the host cluster's
			return c
		}}
	b.Cleanup(func() { free.cancelOurs(b) }) // the filled one's jobs go with its instance
	cfg := placeConfig{n: n, secs: secs, fill: fill, free: free, filled: filled}
	makespan := map[string]float64{}
	for _, mode := range []string{"placement", "fixed", "round-robin"} {
		b.Run(fmt.Sprintf("mode=%s/jobs=%d", mode, n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f := cfg.runMode(b, mode)
				f.report(b)
				makespan[mode] = f.makespan
			}
			b.ReportMetric(0, "ns/op")
		})
	}
	// The one guarded figure: placement's makespan over the fixed
	// target's, 0.40-0.42 when placement works; the fixed target starts
	// no job before its background's two rounds end, so near 1 placement
	// sent its jobs into the filled queue (see guard_test.go).
	if makespan["placement"] > 0 && makespan["fixed"] > 0 {
		b.Run("compare", func(b *testing.B) {
			ratio := makespan["placement"] / makespan["fixed"]
			if n == 40 && secs == 10 && fill == 40 {
				metric(b, ratio, "makespan-placement/fixed")
			} else { // the ceiling is for the default sizes only
				b.ReportMetric(ratio, "makespan-placement/fixed")
			}
			b.ReportMetric(makespan["round-robin"]/makespan["fixed"], "makespan-round-robin/fixed")
			b.ReportMetric(0, "ns/op")
		})
	}
	b.Run(fmt.Sprintf("fault=rest-down/jobs=%d", n), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cfg.fault(b, inst)
		}
		b.ReportMetric(0, "ns/op")
	})
}

// withoutEnv is env without the variable name.
func withoutEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// placeCluster is one of the two Slurm clusters: its REST URL and
// credentials, and how to run its commands (squeue, sbatch, scancel) as
// root.
type placeCluster struct {
	name, url, creds string
	prefix           string // of the job names this run gives
	cmd              func(args ...string) *exec.Cmd
	proxy            *placeProxy
}

type placeConfig struct {
	n, secs, fill int
	free, filled  *placeCluster
}

// jobs lists the cluster's jobs (all states: MinJobAge keeps ended ones
// for 10 min) whose name starts with prefix, as name → job ids.
func (c *placeCluster) jobs(b *testing.B, prefix string) map[string][]string {
	out, err := c.cmd("squeue", "-h", "-t", "all", "-o", "%i %j").Output()
	if err != nil {
		b.Fatalf("squeue on %s: %v%s", c.name, err, stderrOf(err))
	}
	m := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		id, name, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && strings.HasPrefix(name, prefix) {
			m[name] = append(m[name], id)
		}
	}
	return m
}

// cancelOurs cancels every job of this run still queued or running.
func (c *placeCluster) cancelOurs(b *testing.B) {
	out, err := c.cmd("squeue", "-h", "-o", "%i %j").Output()
	if err != nil {
		b.Logf("squeue on %s: %v", c.name, err)
		return
	}
	var ids []string
	for _, line := range strings.Split(string(out), "\n") {
		if id, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && strings.HasPrefix(name, c.prefix) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	if out, err := c.cmd(append([]string{"scancel"}, ids...)...).CombinedOutput(); err != nil {
		b.Logf("scancel on %s: %v: %s", c.name, err, out)
	}
}

// stderrOf is a failed command's error output, for the message.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// cpus is the cluster's CPU count (sinfo's A/I/O/T).
func (c *placeCluster) cpus(b *testing.B) int {
	out, err := c.cmd("sinfo", "-h", "-o", "%C").Output()
	if err != nil {
		b.Fatalf("sinfo on %s: %v", c.name, err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "/")
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil || n <= 0 {
		b.Fatalf("sinfo on %s: no CPU count in %q", c.name, out)
	}
	return n
}

// fillUp cancels the last mode's background jobs and takes every CPU with
// new ones that sleep secs, with as many pending behind them; it returns
// once they all run.
func (c *placeCluster) fillUp(b *testing.B, secs int) {
	name := c.prefix + "fill"
	c.cancelOurs(b)
	for deadline := time.Now().Add(time.Minute); len(c.live(b, name)) > 0; {
		if time.Now().After(deadline) {
			b.Fatalf("%s: the last background jobs were not gone after a minute", c.name)
		}
		time.Sleep(time.Second)
	}
	cpus := c.cpus(b)
	for i := 0; i < 2*cpus; i++ {
		out, err := c.cmd("sbatch", "-J", name, "-o", "/dev/null", "-n", "1", "--wrap", fmt.Sprintf("sleep %d", secs)).CombinedOutput()
		if err != nil {
			b.Fatalf("sbatch on %s: %v: %s", c.name, err, out)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if running := c.live(b, name)["R"]; running >= cpus {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: the background jobs did not take its %d CPUs within a minute", c.name, cpus)
		}
	}
}

// others counts the queued and running jobs that are not this run's
// (another user of a shared cluster), which would skew its figures, and
// all the jobs slurmctld knows (ended ones too, for MinJobAge), which
// GET jobs/ carries whole to every probe.
func (c *placeCluster) others(b *testing.B) (live, known int) {
	out, err := c.cmd("squeue", "-h", "-t", "all", "-o", "%t %j").Output()
	if err != nil {
		b.Fatalf("squeue on %s: %v%s", c.name, err, stderrOf(err))
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		state, name, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		known++
		if !strings.HasPrefix(name, c.prefix) && (state == "R" || state == "PD" || state == "CF") {
			live++
		}
	}
	return live, known
}

// live counts the queued and running jobs named name by squeue's state.
func (c *placeCluster) live(b *testing.B, name string) map[string]int {
	out, err := c.cmd("squeue", "-h", "-n", name, "-o", "%t").Output()
	if err != nil {
		b.Fatalf("squeue on %s: %v%s", c.name, err, stderrOf(err))
	}
	m := map[string]int{}
	for _, s := range strings.Fields(string(out)) {
		m[s]++
	}
	return m
}

// placeProxy forwards to a cluster's slurmrestd and counts its requests
// by kind: the load probes' GET partitions/, nodes/ and jobs/, the API
// version's discovery (once per backend: each probe builds its own), and
// all.
type placeProxy struct {
	mu                       sync.Mutex
	probes, discovery, total int
}

// benchName is the job's name in the records runMode returns.
const benchName = "bench.jobName"

var probePathRE = regexp.MustCompile(`/(partitions|nodes|jobs)/?$`)

func startPlaceProxy(b *testing.B, target string) (*placeProxy, string) {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	p := &placeProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.total++
		switch {
		case r.Method == http.MethodGet && probePathRE.MatchString(r.URL.Path):
			p.probes++
		case strings.HasPrefix(r.URL.Path, "/openapi") || strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/ping"):
			p.discovery++ // discovery's pings, or the document it falls back to
		}
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return p, srv.URL
}

// placeFigures is one mode's run.
type placeFigures struct {
	mode                 string
	makespan, wall       float64
	waitMean, waitP95    float64
	onFilled, onFree     int
	probePerJob, reqsJob float64
	discoveryPerJob      float64
	others               int // jobs not this run's on the free cluster at the start
	known                int // jobs the free cluster knew at the start (GET jobs/ lists them)
	retried              int // invokes run again after a temporary failure (exit 75)
}

func (f placeFigures) report(b *testing.B) {
	fmt.Printf("PLACEMENT mode=%s: makespan %.0f s (wall %.0f s), queue wait mean %.1f s p95 %.0f s, jobs filled=%d free=%d, probe requests %.2f a job, discovery %.2f, backend requests %.1f a job; %d invokes retried after exit 75; %d other jobs on free at the start, %d jobs known to it\n",
		f.mode, f.makespan, f.wall, f.waitMean, f.waitP95, f.onFilled, f.onFree, f.probePerJob, f.discoveryPerJob, f.reqsJob, f.retried, f.others, f.known)
	b.ReportMetric(f.makespan, "makespan-s")
	b.ReportMetric(f.wall, "wall-s")
	b.ReportMetric(f.waitMean, "wait-mean-s")
	b.ReportMetric(f.waitP95, "wait-p95-s")
	b.ReportMetric(float64(f.onFilled), "jobs-filled")
	b.ReportMetric(float64(f.onFree), "jobs-free")
	b.ReportMetric(f.probePerJob, "probe-req/job")
	b.ReportMetric(f.discoveryPerJob, "discovery-req/job")
	b.ReportMetric(f.reqsJob, "backend-req/job")
	b.ReportMetric(float64(f.retried), "exit75-retried")
}

// targetsJSON is the targets key for [filled, free] at the given URLs,
// each with its own credentials directory.
func (cfg placeConfig) targetsJSON(filledURL, freeURL string) string {
	ts := []record.Target{
		{Name: cfg.filled.name, Backend: "slurm", ResourceURL: filledURL, Credentials: cfg.filled.creds},
		{Name: cfg.free.name, Backend: "slurm", ResourceURL: freeURL, Credentials: cfg.free.creds},
	}
	raw, _ := json.Marshal(ts)
	return string(raw)
}

// spec is job i's description and credentials directory in mode.
func (cfg placeConfig) spec(mode string, i int, filledURL, freeURL string) (*record.Spec, string) {
	// The partition named: 24.11's API does not say which is the default
	// (the clusters have two, debug and short), so a probe of a job that
	// names none finds its load unknown.
	s := &record.Spec{Backend: "slurm", JobScript: fmt.Sprintf("#!/bin/sh\nsleep %d\n", cfg.secs), UpdateInterval: "5",
		JobProperties: `{"partition":"debug"}`}
	fixed := func(url, creds string) (*record.Spec, string) {
		s.ResourceURL = url
		return s, creds
	}
	switch {
	case mode == "fixed" || (mode == "round-robin" && i%2 == 0):
		return fixed(filledURL, cfg.filled.creds)
	case mode == "round-robin":
		return fixed(freeURL, cfg.free.creds)
	}
	s.Targets, s.Placement = cfg.targetsJSON(filledURL, freeURL), record.PolicyEarliestStart
	return s, filepath.Dir(cfg.free.creds) // the targets name their own
}

// invokeAll runs the N jobs of a mode at once, each through its own
// in-process invoker with a ConfigMap record, and returns their records.
func (cfg placeConfig) invokeAll(b *testing.B, mode, filledURL, freeURL string) ([]map[string]string, time.Duration, int) {
	kcfg := testkube.Config(b)
	kcfg.QPS, kcfg.Burst = 1000, 2000
	kc, err := kube.New(kcfg)
	if err != nil {
		b.Fatal(err)
	}
	ns := testkube.Namespace(b, testkube.Client(b))
	hc, err := runner.NewHTTPClient("", false)
	if err != nil {
		b.Fatal(err)
	}
	reg := builtin.Registry()
	// Bounded: the background's two rounds, every job in turn on one CPU
	// at worst, and slack; a mode past it fails rather than hang.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(2*cfg.fill+cfg.n*cfg.secs+180)*time.Second)
	defer cancel()
	errs := make([]error, cfg.n)
	results := make([]*runner.Result, cfg.n)
	stores := make([]record.Store, cfg.n)
	names := make([]string, cfg.n)
	var wg sync.WaitGroup
	var retried atomic.Int32
	start := time.Now()
	for i := 0; i < cfg.n; i++ {
		name := fmt.Sprintf("%s%s-%d", cfg.free.prefix, mode, i)
		names[i] = name
		spec, creds := cfg.spec(mode, i, filledURL, freeURL)
		stores[i] = &record.ConfigMapStore{Client: kc, Namespace: ns, Name: record.ConfigMapName(name)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A temporary failure (exit 75: no target answered the probe
			// in time) is run again, at most twice, as a workflow's
			// retryStrategy would: the record keeps what was done.
			for try := 0; try < 3; try++ {
				iv := &runner.Invoker{
					JobName: name, Spec: spec, Registry: reg, Store: stores[i],
					Backend:     backends.Config{Credentials: runner.DirCredentials{Dir: creds, Secrets: &runner.Secrets{}}, HTTPClient: hc},
					Log:         slog.New(slog.DiscardHandler),
					RetryBudget: 2 * time.Minute,
					// The watcher off: its GET jobs/ on 22.05 would count as
					// a probe at the proxy; the probes are shared as in pods.
					Watch: runner.WatchConfig{Off: true},
				}
				errs[i] = iv.Run(ctx)
				results[i] = iv.Result()
				if errs[i] == nil || record.Permanent(errs[i]) || ctx.Err() != nil {
					return
				}
				retried.Add(1)
				b.Logf("%s: retried after %v", name, errs[i])
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	recs := make([]map[string]string, cfg.n)
	for i := range recs {
		if errs[i] != nil || results[i].Status != "DONE" {
			b.Fatalf("%s job %d: %v (%s: %s)", mode, i, errs[i], results[i].Status, results[i].Message)
		}
		rec, err := stores[i].Get(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = rec.Data
		recs[i][benchName] = names[i] // not a record key: the bench's own
	}
	return recs, wall, int(retried.Load())
}

// runMode fills the filled cluster anew and runs the mode's N jobs.
func (cfg placeConfig) runMode(b *testing.B, mode string) placeFigures {
	cfg.filled.fillUp(b, cfg.fill)
	others, known := cfg.free.others(b)
	fp, filledURL := startPlaceProxy(b, cfg.filled.url)
	pp, freeURL := startPlaceProxy(b, cfg.free.url)
	recs, wall, retried := cfg.invokeAll(b, mode, filledURL, freeURL)
	f := placeFigures{mode: mode, wall: wall.Seconds(), others: others, known: known, retried: retried}
	prefix := cfg.free.prefix + mode + "-"
	onFilled, onFree := cfg.filled.jobs(b, prefix), cfg.free.jobs(b, prefix)
	f.onFilled, f.onFree = len(onFilled), len(onFree)
	cfg.exactlyOnce(b, recs, onFilled, onFree)
	f.makespan, f.waitMean, f.waitP95 = queueFigures(b, recs)
	fp.mu.Lock()
	pp.mu.Lock()
	f.probePerJob = float64(fp.probes+pp.probes) / float64(cfg.n)
	f.reqsJob = float64(fp.total+pp.total) / float64(cfg.n)
	f.discoveryPerJob = float64(fp.discovery+pp.discovery) / float64(cfg.n)
	fp.mu.Unlock()
	pp.mu.Unlock()
	if mode == "placement" {
		b.Logf("placement: %s", placementsSeen(recs))
	}
	return f
}

// exactlyOnce checks that each record's job is the one Slurm job of its
// name, on the cluster its record says.
func (cfg placeConfig) exactlyOnce(b *testing.B, recs []map[string]string, onFilled, onFree map[string][]string) {
	for _, d := range recs {
		name := d[benchName]
		ids := append(append([]string{}, onFilled[name]...), onFree[name]...)
		if len(ids) != 1 || ids[0] != d[record.KeyID] {
			b.Errorf("%s: Slurm has jobs %v on filled and %v on free for it; its record says %s", name, onFilled[name], onFree[name], d[record.KeyID])
		}
	}
	if b.Failed() {
		b.FailNow()
	}
}

// queueFigures: the makespan (first submit to last end) and the queue
// waits (start − submit), from the records' times (Slurm's, to the
// second).
func queueFigures(b *testing.B, recs []map[string]string) (makespan, mean, p95 float64) {
	var first, last time.Time
	var waits []float64
	for _, d := range recs {
		t := func(k string) time.Time {
			v, err := time.Parse(time.RFC3339, d[k])
			if err != nil {
				b.Fatalf("%s: %s is %q", d[benchName], k, d[k])
			}
			return v
		}
		sub, st, end := t(record.KeySubmit), t(record.KeyStart), t(record.KeyEnd)
		if first.IsZero() || sub.Before(first) {
			first = sub
		}
		if end.After(last) {
			last = end
		}
		waits = append(waits, st.Sub(sub).Seconds())
	}
	sort.Float64s(waits)
	sum := 0.0
	for _, w := range waits {
		sum += w
	}
	return last.Sub(first).Seconds(), sum / float64(len(waits)), waits[(len(waits)*95+99)/100-1]
}

// placementsSeen sums up what the placements chose and why, for the log.
func placementsSeen(recs []map[string]string) string {
	seen := map[string]int{}
	for _, d := range recs {
		p, err := record.ParsePlaced(d[record.KeyPlacement])
		if err != nil || p == nil {
			seen["no placement"]++
			continue
		}
		key := p.Target
		for _, pr := range p.Probes {
			if pr.Skipped != "" {
				key += fmt.Sprintf(" (%s skipped: %s)", pr.Target, pr.Skipped)
			} else if pr.FreeCPUs != nil && pr.PendingJobs != nil {
				key += fmt.Sprintf(" (%s free %d pending %d)", pr.Target, *pr.FreeCPUs, *pr.PendingJobs)
			} else {
				key += fmt.Sprintf(" (%s load unknown)", pr.Target)
			}
		}
		seen[key]++
	}
	var parts []string
	for k, v := range seen {
		parts = append(parts, fmt.Sprintf("%d× %s", v, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// fault stops the filled cluster's slurmrestd (the instance this run
// started; its slurmctld goes on) and runs N jobs with targets [filled,
// free]: each must run exactly once, on the free cluster, its placement
// recording that the filled one did not answer.
func (cfg placeConfig) fault(b *testing.B, inst rlInstance) {
	stopRestd(b, inst)
	others, known := cfg.free.others(b)
	pp, freeURL := startPlaceProxy(b, cfg.free.url)
	recs, wall, retried := cfg.invokeAll(b, "fault", inst.url, freeURL) // the filled target straight at the stopped daemon
	prefix := cfg.free.prefix + "fault-"
	onFilled, onFree := cfg.filled.jobs(b, prefix), cfg.free.jobs(b, prefix)
	cfg.exactlyOnce(b, recs, onFilled, onFree)
	if len(onFilled) != 0 || len(onFree) != cfg.n {
		b.Fatalf("%d jobs ran on the cluster whose REST daemon was down, %d on the other, of %d", len(onFilled), len(onFree), cfg.n)
	}
	for _, d := range recs {
		p, err := record.ParsePlaced(d[record.KeyPlacement])
		if err != nil || p == nil || p.Target != cfg.free.name {
			b.Fatalf("%s: placed %+v (%v), not on %s", d[benchName], p, err, cfg.free.name)
		}
		if len(p.Probes) != 2 || !strings.HasPrefix(p.Probes[0].Skipped, "did not answer") {
			b.Fatalf("%s: the probes %+v do not say the filled cluster did not answer", d[benchName], p.Probes)
		}
	}
	makespan, mean, p95 := queueFigures(b, recs)
	pp.mu.Lock()
	defer pp.mu.Unlock()
	fmt.Printf("PLACEMENT fault (filled cluster's slurmrestd down): %d of %d jobs ran once each, all on free, every placement recording the filled one did not answer; makespan %.0f s (wall %.0f s), queue wait mean %.1f s p95 %.0f s, requests to free %.1f a job (%.2f probe); %d invokes retried after exit 75; %d other jobs on free at the start, %d known to it\n",
		len(onFree), cfg.n, makespan, wall.Seconds(), mean, p95, float64(pp.total)/float64(cfg.n), float64(pp.probes)/float64(cfg.n), retried, others, known)
	b.ReportMetric(makespan, "makespan-s")
	b.ReportMetric(wall.Seconds(), "wall-s")
	b.ReportMetric(float64(len(onFree)), "jobs-free")
	b.ReportMetric(float64(retried), "exit75-retried")
}

// stopRestd stops the slurmrestd of the instance this benchmark started
// (by its PID file, if that PID still runs slurmrestd) and waits until its
// port refuses connections.
func stopRestd(b *testing.B, inst rlInstance) {
	if restDown(inst.url) {
		return // stopped by an earlier round
	}
	raw, err := os.ReadFile(filepath.Join(inst.dir, "slurmrestd.pid"))
	if err != nil {
		b.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(raw) + " x")[0])
	if err != nil {
		b.Fatalf("slurmrestd.pid: %q", raw)
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "slurmrestd" {
		b.Fatalf("PID %d of %s/slurmrestd.pid is not slurmrestd", pid, inst.dir)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !restDown(inst.url); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("slurmrestd still answers 20 s after SIGTERM")
		}
	}
}

// restDown: nothing listens at url (a refused or dead connection).
func restDown(url string) bool {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url + "/openapi/v3")
	if err != nil {
		return true
	}
	resp.Body.Close()
	return false
}
