package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	kubeclient "github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// slurmCounter is a reverse proxy in front of slurmrestd that counts its
// requests by kind: the batched queries (GET jobs/, jobs/state/), one
// job's (GET job/<id>), and the rest.
type slurmCounter struct {
	URL   string
	mu    sync.Mutex
	kinds map[string]int
}

func newSlurmCounter(t *testing.T, target string) *slurmCounter {
	u, err := url.Parse(target)
	require.NoError(t, err)
	c := &slurmCounter{kinds: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "other"
		switch {
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/jobs"):
			kind = "batch"
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/job/"):
			kind = "job"
		}
		c.mu.Lock()
		c.kinds[kind]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *slurmCounter) count(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kinds[kind]
}

// slurm2411 is the shared real Slurm 24.11 (hack/slurm2411-up.sh): its
// URL and credentials; missing, the test is skipped, and fails under CI.
func slurm2411(t *testing.T) (string, string) {
	u, creds := os.Getenv("BRIDGE_TEST_SLURM2411_URL"), os.Getenv("BRIDGE_TEST_SLURM2411_CREDS")
	if u == "" || creds == "" {
		msg := "this test needs the real Slurm 24.11: bash hack/slurm2411-up.sh && source /tmp/bridge-runner-slurm2411/env"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return u, creds
}

// slurmEnv is a test's view of the real Slurm: behind its counter, with
// its credentials, and the namespaces of its steps' records.
type slurmEnv struct {
	t        *testing.T
	counter  *slurmCounter
	creds    string
	reg      *backends.Registry
	kube     *kubeclient.Client
	nss      []string
	logs     *syncBuffer
	batches  *countingBatcher
	interval time.Duration
}

func newSlurmEnv(t *testing.T, namespaces int, interval time.Duration) *slurmEnv {
	u, creds := slurm2411(t)
	e := &slurmEnv{t: t, counter: newSlurmCounter(t, u), creds: creds, reg: builtin.Registry(), logs: &syncBuffer{}, interval: interval}
	e.kube = testkube.KubeClient(t, testkube.Config(t))
	for range namespaces {
		e.nss = append(e.nss, testkube.Namespace(t, testkube.Client(t)))
	}
	return e
}

func (e *slurmEnv) backendConfig() backends.Config {
	hc, err := runner.NewHTTPClient("", false)
	require.NoError(e.t, err)
	return backends.Config{URL: e.counter.URL, Credentials: runner.DirCredentials{Dir: e.creds, Secrets: &runner.Secrets{}}, HTTPClient: hc,
		Logger: slog.New(slog.NewTextHandler(e.logs, nil))}
}

// countingBatcher counts the agent's batched queries.
type countingBatcher struct {
	backends.StatusBatcher
	mu sync.Mutex
	n  int
}

func (c *countingBatcher) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.StatusBatcher.StatusMany(ctx, ids)
}

func (c *countingBatcher) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// startAgent runs the agent until the returned stop, which leaves nothing
// behind (as SIGKILL).
func (e *slurmEnv) startAgent() func() {
	be, err := e.reg.New("slurm", e.backendConfig())
	require.NoError(e.t, err)
	e.batches = &countingBatcher{StatusBatcher: be.(backends.StatusBatcher)}
	ag, err := agent.New(agent.Config{Cluster: cluster, Backend: "slurm", ResourceURL: e.counter.URL, Key: runner.ClusterKey("slurm", e.counter.URL, e.creds),
		Namespaces: e.nss, Interval: e.interval, Kube: e.kube, Batcher: e.batches, ID: "agent-slurm-test", Log: slog.New(slog.NewTextHandler(e.logs, nil))})
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ag.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return stop
}

// run runs perNS steps of secs seconds in each namespace, naming the
// cluster, and returns their results and times.
func (e *slurmEnv) run(perNS, secs int) ([]runner.Result, []time.Duration) {
	n := perNS * len(e.nss)
	res, took := make([]runner.Result, n), make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, job := e.nss[i%len(e.nss)], fmt.Sprintf("agent-%d", i)
			iv := &runner.Invoker{JobName: job, Registry: e.reg, Holder: ns + "/" + job, Backend: e.backendConfig(),
				Spec:  &record.Spec{Backend: "slurm", ResourceURL: e.counter.URL, JobScript: fmt.Sprintf("#!/bin/sh\nsleep %d\n", secs), UpdateInterval: "5", Cluster: cluster},
				Store: &record.ConfigMapStore{Client: e.kube, Namespace: ns, Name: record.ConfigMapName(job)},
				Log:   slog.New(slog.NewTextHandler(e.logs, nil)), MinPoll: runner.DefaultMinPoll,
				SubmitLease: 30 * time.Second, RetryBudget: 60 * time.Second, CancelWait: 10 * time.Second, Grace: 10 * time.Second}
			// A ceiling, not a figure: the shared cluster may queue the jobs.
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			start := time.Now()
			assert.NoError(e.t, iv.Run(ctx), job)
			res[i], took[i] = *iv.Result(), time.Since(start)
		}()
	}
	wg.Wait()
	return res, took
}

// On the real Slurm 24.11: steps in two namespaces follow one agent; the
// cluster gets one batched query per interval at most (flat in jobs and
// namespaces), and a step asks for its own job only at its first poll and
// to confirm what the agent told it.
func TestAgentOnSlurm2411(t *testing.T) {
	e := newSlurmEnv(t, 2, time.Second)
	start := time.Now()
	stop := e.startAgent()
	time.Sleep(2500 * time.Millisecond) // its first heartbeat
	const perNS = 3
	res, _ := e.run(perNS, 3)
	stop()
	elapsed := time.Since(start)
	n := perNS * len(e.nss)
	for _, r := range res {
		assert.Equal(t, "DONE", r.Status, "the true state, from the backend")
	}
	batched, jobReq := e.counter.count("batch"), e.counter.count("job")
	t.Logf("%d jobs of 3 s in %d namespaces: %d batched queries in %s (interval %s), %.1f requests for one job per step",
		n, len(e.nss), batched, elapsed.Round(time.Millisecond), e.interval, float64(jobReq)/float64(n))
	assert.Equal(t, e.batches.calls(), batched, "the agent alone asked in batches: no step elected a watcher")
	assert.LessOrEqual(t, float64(batched), float64(elapsed)/float64(e.interval)+1, "one batched query per interval")
	// The first poll, and a confirm per change the agent told (a 24.11
	// jobs/state/ answer is coarser than the job's own: one more, at most).
	assert.LessOrEqual(t, float64(jobReq)/float64(n), 5.0)
	assert.NotContains(t, e.logs.String(), inStepWatcher)
}

// On the real Slurm 24.11: the agent killed mid-run; the steps fall back
// (the in-step watcher) and every job ends in its true state within its
// budget.
func TestAgentKilledOnSlurm2411(t *testing.T) {
	e := newSlurmEnv(t, 2, time.Second)
	stop := e.startAgent()
	time.Sleep(2500 * time.Millisecond)
	go func() {
		time.Sleep(4 * time.Second)
		stop()
	}()
	res, took := e.run(2, 8)
	for i, r := range res {
		assert.Equal(t, "DONE", r.Status)
		// A ceiling: the job, its queue on the shared cluster, the window.
		assert.Less(t, took[i], 3*time.Minute, "step %d", i)
	}
	assert.Contains(t, e.logs.String(), inStepWatcher, "the steps fell back to the in-step watcher")
}
