package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// The faults of issue 27 with real processes and real services: six
// invokes of one namespace follow short jobs on the real Slurm, records in
// ConfigMaps of the real kube-apiserver, the watcher on and the default
// update interval (20 s), and the watcher is killed, frozen, given a wrong
// token, or cut from slurmrestd. Every job must still end in its true
// state with one Slurm job per record, the lease must not outlive the
// group, and detection may degrade to polling but no further.

const (
	watchInterval = 20 * time.Second // invoke's default --update-interval
	watchTTL      = 10 * time.Second // the lease's TTL (runner.leaseTTL)
)

// detectionBound is the generous ceiling on how late a job's end may be
// seen while the watcher fails: the README's two intervals plus the
// lease's TTL, three times over for a loaded machine.
const detectionBound = 3 * (2*watchInterval + watchTTL)

// watchJob is one invoke of the fleet and the job it runs.
type watchJob struct {
	name    string
	seconds int // how long the job sleeps
	exit    int // the job's own exit code
	args    []string
	env     []string

	cmd    *exec.Cmd
	out    *testutil.SyncBuffer
	done   chan struct{}
	code   int
	exitAt time.Time
}

// start runs (or, after a fault, runs again, as a retry would) the invoke.
func (j *watchJob) start(t *testing.T) {
	t.Helper()
	j.cmd = exec.Command(binary, append([]string{"invoke"}, j.args...)...)
	j.cmd.Env = append(os.Environ(), j.env...)
	j.out = &testutil.SyncBuffer{}
	j.cmd.Stdout, j.cmd.Stderr = j.out, j.out
	require.NoError(t, j.cmd.Start())
	j.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		code := exitOf(cmd.Wait())
		j.code, j.exitAt = code, time.Now()
		close(done)
	}(j.cmd, j.done)
}

// wait waits for the invoke's exit, at most d.
func (j *watchJob) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-j.done:
	case <-time.After(d):
		_ = j.cmd.Process.Signal(syscall.SIGKILL)
		<-j.done
		t.Errorf("%s: invoke did not end within %s: %s", j.name, d, j.out)
	}
}

// watchFleet is n invokes of one namespace on one Slurm.
type watchFleet struct {
	c     slurmCluster
	admin kubernetes.Interface
	ns    string
	jobs  []*watchJob
}

// newWatchFleet starts six invokes on jobs of 20–40 s (the third exits
// 3), with extra flags, through url (slurmrestd itself or a proxy before
// it) and the credentials in creds.
func newWatchFleet(t *testing.T, c slurmCluster, url, creds string, extra ...string) *watchFleet {
	t.Helper()
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	kubeconfig := writeKubeconfig(t, testkube.Config(t), ns)
	f := &watchFleet{c: c, admin: admin, ns: ns}
	for i := range 6 {
		j := &watchJob{name: fmt.Sprintf("wf-%d", i), seconds: 20 + 4*i}
		if i == 2 {
			j.exit = 3
		}
		script := fmt.Sprintf("#!/bin/sh\nsleep %d\nexit %d\n", j.seconds, j.exit)
		j.args = append([]string{"--kubeconfig", kubeconfig, "--job-name", j.name, "--backend", "slurm", "--resource-url", url,
			"--credentials-dir", creds, "--script", script}, extra...)
		j.env = []string{"XDG_STATE_HOME=" + t.TempDir()}
		j.start(t)
		f.jobs = append(f.jobs, j)
	}
	t.Cleanup(func() {
		for _, j := range f.jobs {
			select {
			case <-j.done:
			default:
				_ = j.cmd.Process.Signal(syscall.SIGCONT)
				_ = j.cmd.Process.Signal(syscall.SIGKILL)
				<-j.done
			}
		}
	})
	return f
}

func (f *watchFleet) record(t *testing.T, j *watchJob) map[string]string {
	t.Helper()
	cm, err := f.admin.CoreV1().ConfigMaps(f.ns).Get(context.Background(), record.ConfigMapName(j.name), metav1.GetOptions{})
	require.NoError(t, err)
	return cm.Data
}

// running waits until every job runs on Slurm (each record says so).
func (f *watchFleet) running(t *testing.T) {
	t.Helper()
	for _, j := range f.jobs {
		require.Eventually(t, func() bool {
			cm, err := f.admin.CoreV1().ConfigMaps(f.ns).Get(context.Background(), record.ConfigMapName(j.name), metav1.GetOptions{})
			return err == nil && cm.Data[record.KeyJobStatus] == "RUNNING"
		}, 3*time.Minute, 200*time.Millisecond, "%s never ran (a busy cluster keeps jobs pending): %s", j.name, j.out)
	}
}

// leases returns the group's lease ConfigMaps: name → holder.
func (f *watchFleet) leases(t *testing.T) map[string]string {
	t.Helper()
	cms, err := f.admin.CoreV1().ConfigMaps(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: watcher.LabelWatchGroup})
	require.NoError(t, err)
	out := map[string]string{}
	for _, cm := range cms.Items {
		out[cm.Name] = cm.Data["holder"]
	}
	return out
}

// holder waits for the group's one lease to be held by anyone but not,
// and returns that holder.
func (f *watchFleet) holder(t *testing.T, not string, within time.Duration) string {
	t.Helper()
	var h string
	require.Eventually(t, func() bool {
		ls := f.leases(t)
		if len(ls) != 1 {
			return false
		}
		for _, v := range ls {
			h = v
		}
		return h != "" && h != not
	}, within, 100*time.Millisecond, "no invoke (but %q) holds the watcher's lease: %v", not, f.leases(t))
	return h
}

// leader is the invoke whose pid is the middle field of the lease's
// holder (host/pid/nonce).
func (f *watchFleet) leader(t *testing.T, holder string) *watchJob {
	t.Helper()
	parts := strings.Split(holder, "/")
	require.Len(t, parts, 3, "holder %q", holder)
	pid, err := strconv.Atoi(parts[1])
	require.NoError(t, err)
	for _, j := range f.jobs {
		if j.cmd.Process.Pid == pid {
			assert.Contains(t, j.out.String(), "watching the cluster's jobs of this group", "the lease's holder logs that it watches")
			return j
		}
	}
	t.Fatalf("no invoke of the fleet has pid %d (holder %q)", pid, holder)
	return nil
}

// check asserts every job's true end once every invoke has exited: the
// exit code, the record's state and exit code, and exactly one Slurm job
// with the record's key, in the state slurmctld gives it. It logs how
// long after the job's end (Slurm's end time) its invoke exited, and
// holds that to detectionBound for the jobs in bound; then the group's
// lease must be gone.
func (f *watchFleet) check(t *testing.T, what string, bound func(*watchJob) bool) {
	t.Helper()
	var figures []string
	for _, j := range f.jobs {
		d := f.record(t, j)
		wantState, wantCode, slurmState := "DONE", ExitDone, "COMPLETED"
		if j.exit != 0 {
			wantState, wantCode, slurmState = "FAILED", ExitFailed, "FAILED"
			assert.Equal(t, strconv.Itoa(j.exit), d[record.KeyExitCode], "%s: the job's own exit code", j.name)
		}
		assert.Equal(t, wantCode, j.code, "%s: %s", j.name, j.out)
		assert.Equal(t, wantState, d[record.KeyJobStatus], "%s: %s", j.name, d[record.KeyMessage])
		require.NotEmpty(t, d[record.KeyKey], j.name)
		assert.Equal(t, map[string]string{d[record.KeyID]: slurmState}, slurmJobsByComment(t, f.c, d[record.KeyKey]),
			"%s: exactly one Slurm job for the record, in its true state", j.name)
		end, err := time.Parse(time.RFC3339, d[record.KeyEnd])
		if !assert.NoError(t, err, "%s: status.endTime", j.name) {
			continue
		}
		if os.Getenv("BRIDGE_TEST_WATCH_LOGS") != "" { // to study the figures
			t.Logf("%s ended %s, exited %s:\n%s", j.name, end.Format(time.TimeOnly), j.exitAt.Format("15:04:05.000"), j.out)
		}
		seen := j.exitAt.Sub(end).Round(100 * time.Millisecond)
		figures = append(figures, fmt.Sprintf("%s %ds: %s", j.name, j.seconds, seen))
		if bound(j) {
			assert.Less(t, seen, detectionBound, "%s: its end was seen too late", j.name)
		}
	}
	t.Logf("%s on Slurm %s, the job's end to its invoke's exit (Slurm's end time has 1 s resolution): %s", what, f.c.release, strings.Join(figures, ", "))
	assert.Eventually(t, func() bool { return len(f.leases(t)) == 0 }, 15*time.Second, 200*time.Millisecond,
		"the watcher's lease outlived its group")
	if ls := f.leases(t); len(ls) > 0 {
		t.Logf("leases left: %v", ls)
	}
}

func (f *watchFleet) waitAll(t *testing.T, d time.Duration) {
	t.Helper()
	for _, j := range f.jobs {
		j.wait(t, d)
	}
}

func everyJob(*watchJob) bool { return true }

// watchCluster is the Slurm the fault tests run on: the newest there
// (26.05, else 24.11), whose batched status is GET jobs/state/, else 22.05
// (GET jobs/).
func watchCluster(t *testing.T) slurmCluster {
	cs := slurmClusters(t)
	return cs[len(cs)-1]
}

func TestWatcherFaultsOnSlurm(t *testing.T) {
	clearEnv(t)
	c := watchCluster(t)
	t.Run("SIGKILL", func(t *testing.T) { testWatcherKilled(t, c) })
	t.Run("SIGSTOP", func(t *testing.T) { testWatcherFrozen(t, c) })
	t.Run("WrongToken", func(t *testing.T) { testWatcherWrongToken(t, c) })
	t.Run("SlurmrestdRestart", func(t *testing.T) { testWatcherRestdRestart(t, c) })
	t.Run("BlackHole", func(t *testing.T) { testWatcherBlackHole(t, c) })
	t.Run("BatchedQuery", func(t *testing.T) { testWatcherBatchedQueryFaults(t, c) })
}

// testWatcherKilled SIGKILLs the invoke that watches; another invoke
// takes the lease over once it goes stale, and the killed one's retry
// (as Argo's) re-attaches to its job.
func testWatcherKilled(t *testing.T, c slurmCluster) {
	f := newWatchFleet(t, c, c.url, c.creds)
	f.running(t)
	h := f.holder(t, "", 30*time.Second)
	l := f.leader(t, h)
	require.NoError(t, l.cmd.Process.Signal(syscall.SIGKILL))
	<-l.done
	killed := time.Now()
	h2 := f.holder(t, h, watchInterval+watchTTL+30*time.Second)
	t.Logf("watcher %s SIGKILLed; %s took the lease over %s later", l.name, h2, time.Since(killed).Round(100*time.Millisecond))
	l.start(t)
	f.waitAll(t, 3*time.Minute)
	f.check(t, "watcher SIGKILLed", everyJob)
}

// testWatcherFrozen SIGSTOPs the invoke that watches until every other
// invoke has ended: the others take the lease over and see their jobs end;
// after SIGCONT the frozen one gives its stale watcher up and finishes.
func testWatcherFrozen(t *testing.T, c slurmCluster) {
	f := newWatchFleet(t, c, c.url, c.creds)
	f.running(t)
	h := f.holder(t, "", 30*time.Second)
	l := f.leader(t, h)
	require.NoError(t, l.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	h2 := f.holder(t, h, watchInterval+watchTTL+30*time.Second)
	t.Logf("watcher %s SIGSTOPped; %s took the lease over %s later", l.name, h2, time.Since(stopped).Round(100*time.Millisecond))
	for _, j := range f.jobs {
		if j != l {
			j.wait(t, 3*time.Minute)
		}
	}
	if err := l.cmd.Process.Signal(syscall.SIGCONT); errors.Is(err, os.ErrProcessDone) {
		// It had exited (its own job ended) before the SIGSTOP reached it:
		// a zombie takes a signal without a word. Its lease went over all
		// the same; the checks below hold.
		t.Logf("the watcher %s had ended before it could be frozen", l.name)
	} else {
		require.NoError(t, err)
	}
	t.Logf("SIGCONT after %s frozen", time.Since(stopped).Round(100*time.Millisecond))
	l.wait(t, time.Minute)
	f.check(t, "watcher SIGSTOPped", func(j *watchJob) bool { return j != l })
}

// testWatcherRestdRestart takes slurmrestd away from every invoke (a
// proxy they all reach it through stops listening, as a restarting
// daemon does) for 20 s while the first job ends, then brings it back.
func testWatcherRestdRestart(t *testing.T, c slurmCluster) {
	u, err := url.Parse(c.url)
	require.NoError(t, err)
	px := testutil.NewProxy(t, u.Host)
	f := newWatchFleet(t, c, "http://"+px.Addr, c.creds)
	f.running(t)
	f.holder(t, "", 30*time.Second)
	px.Cut()
	time.Sleep(20 * time.Second)
	px.Restore(t)
	f.waitAll(t, 3*time.Minute)
	seen := 0
	for _, j := range f.jobs {
		if strings.Contains(j.out.String(), "status request failed; will try again") || strings.Contains(j.out.String(), "batched status query failed") {
			seen++
		}
	}
	assert.NotZero(t, seen, "the outage was seen and ridden out")
	f.check(t, "slurmrestd away for 20 s", everyJob)
}

// testWatcherWrongToken gives a whole group a wrong token once its jobs
// run (the credentials Secret rotated to a bad value): the watcher's
// queries and every invoke's own polls fail. What happens must be what
// happens without a watcher: each invoke rides the failure out for its
// retry budget and exits 75 with the job's last known state, and the
// retry, with the right token again, re-attaches and ends in the true
// state. A fleet with --watcher=false runs beside it for the comparison.
func testWatcherWrongToken(t *testing.T, c slurmCluster) {
	ended := map[bool]time.Duration{}
	for _, on := range []bool{true, false} {
		t.Run("watcher="+strconv.FormatBool(on), func(t *testing.T) {
			t.Parallel()
			ended[on] = wrongTokenFleet(t, c, on)
		})
	}
	t.Cleanup(func() {
		t.Logf("wrong token to the last exit 75: %s with the watcher, %s without", ended[true], ended[false])
	})
}

func wrongTokenFleet(t *testing.T, c slurmCluster, watcher bool) time.Duration {
	creds := t.TempDir()
	for _, n := range []string{"username", "token"} {
		b, err := os.ReadFile(filepath.Join(c.creds, n))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(creds, n), b, 0o600))
	}
	good, _ := os.ReadFile(filepath.Join(creds, "token"))
	f := newWatchFleet(t, c, c.url, creds, "--retry-budget", "30s", "--watcher="+strconv.FormatBool(watcher))
	f.running(t)
	if watcher {
		f.holder(t, "", 30*time.Second)
	}
	rotateFile(t, filepath.Join(creds, "token"), []byte("not-the-token"))
	wrong := time.Now()
	f.waitAll(t, 3*time.Minute)
	var last time.Duration
	for _, j := range f.jobs {
		last = max(last, j.exitAt.Sub(wrong))
		assert.Equal(t, ExitTempFail, j.code, "%s: a refused token is retried within the budget, then exit 75: %s", j.name, j.out)
		assert.Equal(t, "RUNNING", f.record(t, j)[record.KeyJobStatus], "%s: the record keeps the last known state", j.name)
	}
	rotateFile(t, filepath.Join(creds, "token"), good)
	for _, j := range f.jobs {
		j.start(t) // the retry
	}
	f.waitAll(t, 3*time.Minute)
	f.check(t, fmt.Sprintf("wrong token, then the retry (watcher %v)", watcher), func(*watchJob) bool { return false })
	return last.Round(100 * time.Millisecond)
}

// rotateFile replaces a credential file whole, at once, as the kubelet
// updates a mounted Secret (a rename): os.WriteFile truncates first, and an
// invoke once read the token in that instant, found no key and rightly
// refused the credentials (exit 2), which no rotation of a Secret shows.
// The temporary name is a dot-entry, which credential readers skip.
func rotateFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// blackHole is how long testWatcherBlackHole keeps slurmrestd dark: over
// twice blackHoleBudget, as in issue 37's reproduction.
const (
	blackHole       = 150 * time.Second
	blackHoleBudget = 60 * time.Second
)

// testWatcherBlackHole black-holes slurmrestd (a proxy every invoke
// reaches it through stops answering, its open connections muted) for
// 150 s once every job runs, for a fleet with the watcher and one
// without, side by side. A member hears of its job no longer than a
// polling step: each invoke exits 75 within its retry budget of its last
// news (the outage's start) and one update interval, whether a watcher
// served it or not; the retry, after the outage, ends each job in its
// true state. (Here the code before the fix passed too: its members left
// the lease when the watcher's back-off outgrew a failed query; the fault
// it missed is testWatcherBatchedQueryFaults' black hole, where every
// query takes its whole 30 s timeout.)
func testWatcherBlackHole(t *testing.T, c slurmCluster) {
	var mu sync.Mutex
	exits := map[bool][]time.Duration{}
	for _, on := range []bool{true, false} {
		t.Run("watcher="+strconv.FormatBool(on), func(t *testing.T) {
			t.Parallel()
			e := blackHoleFleet(t, c, on)
			mu.Lock()
			exits[on] = e
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		t.Logf("slurmrestd black-holed for %s, --retry-budget %s: the outage's start to each exit 75: %v with the watcher, %v without",
			blackHole, blackHoleBudget, exits[true], exits[false])
	})
}

func blackHoleFleet(t *testing.T, c slurmCluster, watcher bool) []time.Duration {
	u, err := url.Parse(c.url)
	require.NoError(t, err)
	px := testutil.NewProxy(t, u.Host)
	f := newWatchFleet(t, c, "http://"+px.Addr, c.creds, "--retry-budget", blackHoleBudget.String(), "--watcher="+strconv.FormatBool(watcher))
	f.running(t)
	if watcher {
		f.holder(t, "", 30*time.Second)
	}
	px.Set(t, testutil.Blackhole)
	dark := time.Now()
	// A ceiling, generous for a loaded machine: the budget, an update
	// interval for the first poll to fail, a TTL and a margin.
	bound := blackHoleBudget + watchInterval + watchTTL + 10*time.Second
	var exits []time.Duration
	for _, j := range f.jobs {
		j.wait(t, blackHole)
		e := j.exitAt.Sub(dark)
		exits = append(exits, e.Round(100*time.Millisecond))
		assert.Equal(t, ExitTempFail, j.code, "%s: a dark cluster is ridden out for the budget, then exit 75: %s", j.name, j.out)
		assert.Less(t, e, bound, "%s: heard nothing of its job for longer than its budget", j.name)
	}
	time.Sleep(time.Until(dark.Add(blackHole)))
	px.Restore(t)
	for _, j := range f.jobs {
		j.start(t) // the retry
	}
	f.waitAll(t, 3*time.Minute)
	f.check(t, fmt.Sprintf("slurmrestd black-holed, then the retry (watcher %v)", watcher), func(*watchJob) bool { return false })
	return exits
}

// batchFront is an HTTP front before slurmrestd that passes every request
// but the batched status query (GET jobs/state/ on 24.11, GET jobs before),
// to which it does its fault: "blackhole" holds it unanswered until the
// client gives up, "slow" answers it after slowBatch (past the lease's TTL,
// within the query timeout: single reads still answer at once), "503"
// answers 503.
type batchFront struct {
	srv   *httptest.Server
	mu    sync.Mutex
	fault string
}

const slowBatch = 15 * time.Second

func newBatchFront(t *testing.T, target string) *batchFront {
	u, err := url.Parse(target)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	f := &batchFront{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimSuffix(r.URL.Path, "/")
		batched := r.Method == http.MethodGet && (strings.HasSuffix(path, "/jobs/state") || strings.HasSuffix(path, "/jobs"))
		f.mu.Lock()
		fault := f.fault
		f.mu.Unlock()
		switch {
		case !batched || fault == "":
		case fault == "blackhole":
			<-r.Context().Done()
			return
		case fault == "slow":
			select {
			case <-r.Context().Done():
				return
			case <-time.After(slowBatch):
			}
		case fault == "503":
			http.Error(w, "", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *batchFront) set(fault string) { f.mu.Lock(); f.fault = fault; f.mu.Unlock() }

// testWatcherBatchedQueryFaults makes the watcher's batched query alone
// fail once every job runs (black-holed, slower than the lease's TTL, or
// answering 503) while single-job reads still answer, until every invoke
// has ended: the members stop trusting the watcher within a TTL of its
// last answer, poll for themselves, and see their jobs end within the
// bound of a failing watcher. Before, a black-holed or slow query kept
// the watcher's lease live and its members silent.
func testWatcherBatchedQueryFaults(t *testing.T, c slurmCluster) {
	for _, fault := range []string{"blackhole", "slow", "503"} {
		t.Run(fault, func(t *testing.T) {
			front := newBatchFront(t, c.url)
			f := newWatchFleet(t, c, front.srv.URL, c.creds)
			f.running(t)
			f.holder(t, "", 30*time.Second)
			front.set(fault)
			f.waitAll(t, 3*time.Minute)
			front.set("")
			f.check(t, "batched query "+fault, everyJob)
		})
	}
}
