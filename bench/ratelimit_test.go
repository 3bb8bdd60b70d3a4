package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
)

// BenchmarkRateLimitedSlurm: N workflow steps at once (default 200,
// BRIDGE_BENCH_RL_STEPS), each an invoke process with its own ConfigMap
// record following a short Slurm job (5-10 s, every tenth exits 3),
// against a Slurm 24.11 whose slurmctld limits each user's RPCs
// (SlurmctldParameters=rl_enable,... from BRIDGE_BENCH_RL, by default a
// bucket of 10 refilled with 10 a second: slurmrestd spends two RPCs on
// each request, REQUEST_FED_INFO and the request's own, so Slurm's default
// refill of 2 a second would be spent whole by the watcher's one query a
// second). It runs once with the cluster's
// watcher and once with --watcher=false. The instance is a second one,
// started here in its own state directory beside the shared 24.11 (see
// hack/slurm2411-up.sh) and stopped at the end: the shared one is never
// reconfigured.
//
// A throttled RPC is not an HTTP error: slurmctld tells slurmrestd's
// libslurm to back off and libslurm sleeps and tries again, so the client
// sees a slow 200. So beside the answers by status code (a proxy in front
// of slurmrestd counts them) the throttling is counted where slurmctld
// logs it ("RPC rate limit exceeded", rl_log_freq=0 by default logs each).
func BenchmarkRateLimitedSlurm(b *testing.B) {
	kubeconfig := needEnv(b, "BRIDGE_TEST_KUBECONFIG")[0]
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			b.Fatal("the rate-limited Slurm instance needs root (it mounts and chroots)")
		}
		b.Skip("the rate-limited Slurm instance needs root (it mounts and chroots)")
	}
	n := 200
	if s := os.Getenv("BRIDGE_BENCH_RL_STEPS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	rl := cmp.Or(os.Getenv("BRIDGE_BENCH_RL"), "rl_enable,rl_bucket_size=10,rl_refill_rate=10,rl_refill_period=1")
	inst := startRateLimited(b, rl)
	b.Logf("slurmctld: SlurmctldParameters=%s", rl)
	for _, watcher := range []bool{true, false} {
		b.Run(fmt.Sprintf("watcher=%v/steps=%d", watcher, n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rateLimitedOnce(b, inst, kubeconfig, n, watcher)
			}
		})
	}
}

// rlInstance is the rate-limited Slurm 24.11 this benchmark started.
type rlInstance struct {
	url, creds, root string
	dir              string // its state directory (slurmrestd.pid)
}

func startRateLimited(b *testing.B, rl string) rlInstance {
	return startSlurm2411(b, cmp.Or(os.Getenv("BRIDGE_BENCH_RL_DIR"), "/tmp/bridge-runner-slurm2411-rl"), "the rate-limited Slurm", "BRIDGE_SLURM2411_RL="+rl)
}

// startSlurm2411 starts a private Slurm 24.11 in its own state directory
// dir, beside the shared one, with settings of hack/slurm2411-up.sh
// (VAR=value), and stops it when the benchmark ends.
func startSlurm2411(b *testing.B, dir, what string, settings ...string) rlInstance {
	env := append(append(os.Environ(), "BRIDGE_SLURM2411_DIR="+dir), settings...)
	script := func(name string) *exec.Cmd {
		c := exec.Command("bash", filepath.Join("..", "hack", name))
		c.Env = env
		return c
	}
	b.Cleanup(func() {
		if out, err := script("slurm2411-down.sh").CombinedOutput(); err != nil {
			b.Errorf("stopping %s: %v\n%s", what, err, out)
		}
	})
	out, err := script("slurm2411-up.sh").CombinedOutput()
	if err != nil {
		b.Fatalf("starting %s: %v\n%s", what, err, out)
	}
	vals := map[string]string{}
	f, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(f), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			vals[k] = v
		}
	}
	return rlInstance{url: vals["BRIDGE_TEST_SLURM2411_URL"], creds: vals["BRIDGE_TEST_SLURM2411_CREDS"], root: vals["BRIDGE_TEST_SLURM2411_ROOT"], dir: dir}
}

// throttled counts the RPCs slurmctld has told to back off so far.
func (in rlInstance) throttled(b *testing.B) int {
	f, err := os.Open(filepath.Join(in.root, "var/log/slurm/slurmctld.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte("RPC rate limit exceeded")) {
			n++
		}
	}
	return n
}

// drain cancels the jobs left in the queue once every step has ended (a
// submit slurmrestd carried out after its client gave up: no step follows
// it), waits for the queue to empty and for the bucket to refill, and
// returns how many there were.
func (in rlInstance) drain(b *testing.B) int {
	squeue := func() []string {
		out, err := exec.Command("chroot", in.root, "squeue", "-h", "-o", "%i").Output()
		if err != nil {
			b.Fatalf("squeue: %v", err)
		}
		return strings.Fields(string(out))
	}
	left := squeue()
	if len(left) > 0 {
		if out, err := exec.Command("chroot", append([]string{in.root, "scancel"}, left...)...).CombinedOutput(); err != nil {
			b.Logf("scancel: %v: %s", err, out)
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); len(squeue()) > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Second)
	}
	time.Sleep(5 * time.Second) // the bucket refills
	return len(left)
}

// countingProxy forwards to slurmrestd and counts the answers by status
// code, the requests per second since start, and the slowest answer.
type countingProxy struct {
	mu       sync.Mutex
	start    time.Time
	byStatus map[int]int
	perSec   map[int]int
	slowest  time.Duration
	total    int
	gaveUp   int // requests the client gave up on (its timeout) before slurmrestd answered
}

func newCountingProxy(b *testing.B, target string) (*countingProxy, string) {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	p := &countingProxy{start: time.Now(), byStatus: map[int]int{}, perSec: map[int]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // a client's timeout is counted, not logged
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(sw, r)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.total++
		if r.Context().Err() != nil {
			p.gaveUp++
			return
		}
		p.byStatus[sw.status]++
		p.perSec[int(t0.Sub(p.start)/time.Second)]++
		p.slowest = max(p.slowest, time.Since(t0))
	}))
	b.Cleanup(srv.Close)
	return p, srv.URL
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func rateLimitedOnce(b *testing.B, in rlInstance, kubeconfig string, n int, watcher bool) {
	kc := testkube.Client(b)
	ns := testkube.Namespace(b, kc)
	in.drain(b) // nothing left of an earlier run
	proxy, proxyURL := newCountingProxy(b, in.url)
	before := in.throttled(b)
	stamp := time.Now().UnixNano()
	errs := make([]bytes.Buffer, n)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	step := func(i int) *exec.Cmd {
		return exec.Command(binary, "invoke", "--kubeconfig", kubeconfig, "--namespace", ns,
			"--job-name", fmt.Sprintf("rl-%d-%d", stamp, i), "--backend", "slurm", "--resource-url", proxyURL,
			"--credentials-dir", in.creds, "--script", rlScript(i), "--follow-logs=false",
			"--watcher="+strconv.FormatBool(watcher))
	}
	start := time.Now()
	codes := make([]int, n)
	for i, c := range runSteps(b, step, all, errs) {
		codes[i] = c
	}
	firstWall := time.Since(start)
	exits, firstWhy := map[int]int{}, map[string]int{}
	var again []int
	for i, c := range codes {
		exits[c]++
		if c == record.ExitTempFail {
			firstWhy[failure(errs[i].String())]++
			again = append(again, i)
		}
	}
	// Exit 75 is a temporary failure that a workflow retries (Argo's
	// retryStrategy, a Job's podFailurePolicy): one retry of those steps,
	// which re-attaches to a job submitted meanwhile (the record keeps the
	// submit's idempotency key) or submits it.
	retryErrs := make([]bytes.Buffer, n)
	for i, c := range runSteps(b, step, again, retryErrs) {
		codes[i], errs[i] = c, retryErrs[i]
	}
	wall := time.Since(start)
	throttled := in.throttled(b) - before
	orphans := in.drain(b)
	right, wrong, why := judgeRateLimited(b, kc, ns, stamp, codes, errs)
	finalExits := map[int]int{}
	for _, c := range codes {
		finalExits[c]++
	}
	var leads, failedRounds int
	for i := range errs {
		leads += strings.Count(errs[i].String(), "watching the cluster's jobs of this group")
		failedRounds += strings.Count(errs[i].String(), "the cluster's batched status query failed")
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	peak := slices.Max(slices.Collect(maps.Values(proxy.perSec)))
	// Printed, not logged: a benchmark's log keeps only its first lines.
	fmt.Printf("RATE-LIMITED watcher=%v: first run: exit codes %v in %.0f s, exit 75 by error %v; %d retried once; "+
		"then %d of %d steps ended in their true state (%d in a wrong one), in %.0f s in all; exit codes %v; "+
		"slurmrestd answers by status %v, %d requests (%.2f/s, peak %d in one second), %d given up by the client (its 30 s timeout), slowest answer %.1f s; "+
		"slurmctld told %d RPC attempts to back off; %d watcher terms began, %d batched queries failed; still unfinished by error %v; %d Slurm jobs left that no step follows\n",
		watcher, exits, firstWall.Seconds(), firstWhy, len(again), right, n, wrong, wall.Seconds(), finalExits, proxy.byStatus, proxy.total, float64(proxy.total)/wall.Seconds(), peak,
		proxy.gaveUp, proxy.slowest.Seconds(), throttled, leads, failedRounds, why, orphans)
	if wrong > 0 {
		b.Fatalf("%d steps ended in a state that is not their job's", wrong)
	}
	b.ReportMetric(float64(right), "true-state")
	b.ReportMetric(wall.Seconds(), "wall-s")
	b.ReportMetric(float64(len(again)), "exit75-first")
	b.ReportMetric(float64(throttled), "ctld-throttled")
	b.ReportMetric(float64(proxy.total-proxy.gaveUp-proxy.byStatus[http.StatusOK]), "non-200")
	b.ReportMetric(float64(proxy.gaveUp), "client-timeouts")
	b.ReportMetric(float64(leads), "watcher-terms")
	b.ReportMetric(float64(proxy.total)/wall.Seconds(), "backend-req/s")
	b.ReportMetric(float64(peak), "peak-req/s")
	b.ReportMetric(proxy.slowest.Seconds(), "slowest-s")
	b.ReportMetric(0, "ns/op")
}

// runSteps starts the steps idx at once and returns their exit codes.
func runSteps(b *testing.B, step func(int) *exec.Cmd, idx []int, errs []bytes.Buffer) map[int]int {
	cmds := map[int]*exec.Cmd{}
	for _, i := range idx {
		cmds[i] = step(i)
		cmds[i].Stderr = &errs[i]
		if err := cmds[i].Start(); err != nil {
			b.Fatal(err)
		}
	}
	codes := map[int]int{}
	for i, c := range cmds {
		_ = c.Wait()
		codes[i] = c.ProcessState.ExitCode()
	}
	return codes
}

// rlScript is step i's job: 5-10 s, and every tenth fails with exit 3.
func rlScript(i int) string {
	s := fmt.Sprintf("#!/bin/sh\nsleep %d\n", 5+i%6)
	if i%10 == 9 {
		s += "exit 3\n"
	}
	return s
}

// judgeRateLimited compares each step's record and exit code with its
// job's truth (DONE, or FAILED with exit code 3): right when both say it,
// wrong when either says another final state. A step that ended without
// a final state (a temporary failure, exit 75) is neither; why is counted
// by the start of its error.
func judgeRateLimited(b *testing.B, kc kubernetes.Interface, ns string, stamp int64, codes []int, errs []bytes.Buffer) (right, wrong int, why map[string]int) {
	ids := map[string]int{}
	why = map[string]int{}
	for i, code := range codes {
		want, wantExit := backends.Done, record.ExitCode(backends.Done, "")
		if i%10 == 9 {
			want, wantExit = backends.Failed, record.ExitCode(backends.Failed, backends.CategoryJob)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, record.ConfigMapName(fmt.Sprintf("rl-%d-%d", stamp, i)), metav1.GetOptions{})
		cancel()
		if err != nil {
			b.Fatalf("step %d: reading its record: %v", i, err)
		}
		got := backends.State(cm.Data[record.KeyJobStatus])
		switch {
		case got == want && code == wantExit && (want == backends.Done || cm.Data[record.KeyExitCode] == "3"):
			right++
			ids[cm.Data[record.KeyID]]++
		case got.Final() || code != record.ExitTempFail:
			wrong++
			b.Logf("step %d: %s (exit %d, exitCode %q), not %s (exit %d)\n%s", i, got, code, cm.Data[record.KeyExitCode], want, wantExit, lastLines(errs[i].String(), 5))
		default:
			why[failure(errs[i].String())]++
		}
	}
	for id, k := range ids {
		if k > 1 {
			b.Errorf("%d steps share Slurm job %s", k, id)
		}
	}
	return right, wrong, why
}

var failedRE = regexp.MustCompile(`msg="invoke failed" err="([^"(]{1,60})`)

// failure is the start of the error an invoke ended with.
func failure(stderr string) string {
	if m := failedRE.FindStringSubmatch(stderr); m != nil {
		return strings.TrimSpace(m[1])
	}
	return "no error logged"
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
