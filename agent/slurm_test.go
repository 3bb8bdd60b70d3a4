package agent_test

import (
	"cmp"
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
	"sync/atomic"
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
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// slurmCounter is a reverse proxy in front of slurmrestd that counts its
// requests by kind: the batched queries (GET jobs/, jobs/state/), one
// job's (GET job/<id>), and the rest.
type slurmCounter struct {
	URL   string
	mu    sync.Mutex
	kinds map[string]int
	// paths counts by who sent them (the agent's requests carry whoHeader)
	// and what they ask (pathKind).
	paths    map[string]int
	refusedN int // submits answered 404
	// onRequest is told of every request with its sender (a benchmark's
	// legs), or nil.
	onRequest func(who string, r *http.Request)
}

func (c *slurmCounter) setOnRequest(hook func(string, *http.Request)) {
	c.mu.Lock()
	c.onRequest = hook
	c.mu.Unlock()
}

// statusWriter keeps the status of the answer it writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (c *slurmCounter) refused() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refusedN
}

// whoHeader marks the agent's requests to the counter (agentTransport).
const whoHeader = "X-Bridge-Test-Who"

// pathKind sorts a slurmrestd request by what it asks: discovery (a
// ping, the OpenAPI document), a submit, one job's state, a list of
// jobs (the batched query, or a look-up by key), anything else.
func pathKind(r *http.Request) string {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case strings.HasPrefix(p, "/openapi"):
		return "openapi"
	case strings.HasSuffix(p, "/ping"):
		return "ping"
	case strings.HasPrefix(p, "/slurmdb/"):
		return "accounting" // the efficiency read at a job's end (runner/efficiency.go)
	case strings.HasSuffix(p, "/conf"):
		return "conf" // the array limit (MaxArraySize)
	case strings.HasSuffix(p, "/partitions") || strings.HasSuffix(p, "/nodes"):
		return "probe" // the load probe's (its queue is a list)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/job/submit"):
		return "submit"
	case r.Method == http.MethodGet && strings.Contains(p, "/job/"):
		return "job"
	case r.Method == http.MethodGet && strings.Contains(p, "/jobs"):
		return "list"
	}
	return "other"
}

// agentTransport marks the agent's requests with whoHeader, and sends
// them by way of via (host:port of a fault proxy in front of the
// counter) when set: the agent's own path to the cluster, with the
// cluster's URL unchanged (its records name that URL).
type agentTransport struct {
	next http.RoundTripper
	via  string
}

func (a agentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(whoHeader, "agent")
	if a.via != "" {
		r.URL.Host = a.via
	}
	return a.next.RoundTrip(r)
}

// pathCount is how many requests who ("agent" or "step") sent of kind.
func (c *slurmCounter) pathCount(who, kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[who+" "+kind]
}

func (c *slurmCounter) pathCounts() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.paths)
}

func newSlurmCounter(t testing.TB, target string) *slurmCounter {
	u, err := url.Parse(target)
	require.NoError(t, err)
	c := &slurmCounter{kinds: map[string]int{}, paths: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "other"
		switch {
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/jobs"):
			kind = "batch"
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/job/"):
			kind = "job"
		}
		who := "step"
		if r.Header.Get(whoHeader) != "" {
			who = "agent"
		}
		c.mu.Lock()
		c.kinds[kind]++
		c.paths[who+" "+pathKind(r)]++
		hook := c.onRequest
		c.mu.Unlock()
		if hook != nil {
			hook(who, r)
		}
		sw := &statusWriter{ResponseWriter: w}
		rp.ServeHTTP(sw, r)
		if pathKind(r) == "submit" && sw.status == http.StatusNotFound {
			c.mu.Lock()
			c.refusedN++
			c.mu.Unlock()
		}
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
func slurm2411(t testing.TB) (string, string) {
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
	t        testing.TB
	counter  *slurmCounter
	creds    string
	reg      *backends.Registry
	kube     *kubeclient.Client
	nss      []string
	logs     *syncBuffer
	batches  *countingBatcher
	interval time.Duration
	// serving counts the agents running for the steps' own URL (counter's):
	// such an agent observes every record of that URL, a step's that names
	// no cluster among them, so a figure of "polling alone" taken beside
	// one is not one (loneJobKube).
	serving atomic.Int32
}

func newSlurmEnv(t *testing.T, namespaces int, interval time.Duration) *slurmEnv {
	u, creds := slurm2411(t)
	return newSlurmEnvOn(t, u, creds, namespaces, interval)
}

// newSlurmEnvOn is newSlurmEnv on the slurmrestd at u.
func newSlurmEnvOn(t testing.TB, u, creds string, namespaces int, interval time.Duration) *slurmEnv {
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
	mu      sync.Mutex
	n       int
	onQuery func(start time.Time, sts map[string]backends.Status) // a benchmark's (legs), or nil
}

func (c *countingBatcher) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	c.mu.Lock()
	c.n++
	hook := c.onQuery
	c.mu.Unlock()
	start := time.Now()
	sts, err := c.StatusBatcher.StatusMany(ctx, ids)
	if hook != nil && err == nil {
		hook(start, sts)
	}
	return sts, err
}

// setOnQuery has hook told of every answered query from now on.
func (c *countingBatcher) setOnQuery(hook func(time.Time, map[string]backends.Status)) {
	c.mu.Lock()
	c.onQuery = hook
	c.mu.Unlock()
}

func (c *countingBatcher) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// startAgent runs the agent until the returned stop, which leaves nothing
// behind (as SIGKILL).
func (e *slurmEnv) startAgent() func() {
	stop, _ := e.startAgentWith(agentOpts{})
	return stop
}

// agentOpts are what sets an agent apart from the steps' own: its ID, its
// credentials directory (default the steps') and its path to the cluster
// (via: a fault proxy's host:port).
type agentOpts struct {
	id, creds, via string
	// figures: the agent reads and publishes the array limit and the load
	// (as the command's agent does), at the cost of their requests.
	figures bool
	// cluster and url: another cluster than the steps' own (its name, and
	// the URL of a counter in front of its slurmrestd).
	cluster, url string
}

// startAgentWith runs an agent as o says, with a Kubernetes client of its
// own (returned, to count its requests), until the returned stop.
func (e *slurmEnv) startAgentWith(o agentOpts) (func(), *kubeclient.Client) {
	cfg := e.backendConfig()
	cfg.URL = cmp.Or(o.url, cfg.URL)
	creds := cmp.Or(o.creds, e.creds)
	cfg.Credentials = runner.DirCredentials{Dir: creds, Secrets: &runner.Secrets{}}
	cfg.HTTPClient.Transport = agentTransport{next: cfg.HTTPClient.Transport, via: o.via}
	be, err := e.reg.New("slurm", cfg)
	require.NoError(e.t, err)
	e.batches = &countingBatcher{StatusBatcher: be.(backends.StatusBatcher)}
	kc := testkube.KubeClient(e.t, testkube.Config(e.t))
	ac := agent.Config{Cluster: cmp.Or(o.cluster, cluster), Backend: "slurm", ResourceURL: cfg.URL, Key: runner.ClusterKey("slurm", cfg.URL, creds),
		Namespaces: e.nss, Interval: e.interval, Kube: kc, Batcher: e.batches, Discoverer: be.(backends.Discoverer),
		ID: cmp.Or(o.id, "agent-slurm-test"), Log: slog.New(slog.NewTextHandler(e.logs, nil))}
	if o.figures {
		ac.Limiter, ac.Loader = be.(backends.ArrayLimiter), be.(backends.LoadPublisher)
	}
	ag, err := agent.New(ac)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ours := cfg.URL == e.counter.URL
	if ours {
		e.serving.Add(1)
	}
	go func() { defer close(done); _ = ag.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			if ours {
				e.serving.Add(-1)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop, kc
}

// run runs perNS steps of secs seconds in each namespace, naming the
// cluster, and returns their results and times.
func (e *slurmEnv) run(perNS, secs int) ([]runner.Result, []time.Duration) {
	return e.runSpecs(perNS, func(int) *record.Spec {
		return &record.Spec{Backend: "slurm", ResourceURL: e.counter.URL, JobScript: fmt.Sprintf("#!/bin/sh\nsleep %d\n", secs), UpdateInterval: "5", Cluster: cluster}
	})
}

// runSpecs runs perNS steps in each namespace, step i of spec(i), and
// returns their results and times.
func (e *slurmEnv) runSpecs(perNS int, spec func(i int) *record.Spec) ([]runner.Result, []time.Duration) {
	n := perNS * len(e.nss)
	res, took := make([]runner.Result, n), make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns, job := e.nss[i%len(e.nss)], fmt.Sprintf("agent-%d", i)
			iv := &runner.Invoker{JobName: job, Registry: e.reg, Holder: ns + "/" + job, Backend: e.backendConfig(),
				Spec:  spec(i),
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

// On the real Slurm 24.11 behind a counting proxy: the agent asks once
// which API slurmrestd serves and publishes it sealed in its heartbeat;
// the steps that name the cluster send no discovery request of their own
// (no ping, no OpenAPI document) and about 3 requests a job: the
// submit, a confirm of what the agent observed, the final read (one more
// when the agent's first observation comes after coverGrace). Before,
// each step discovered for itself (5 pings on 24.11), then polled at once
// after its submit and confirmed every change.
func TestStepsUseTheAgentsDiscoveryOnSlurm2411(t *testing.T) {
	e := newSlurmEnv(t, 1, time.Second)
	e.startAgent()
	assert.Regexp(t, `(?m)^api=v0\.0\.\d+$`, e.awaitMemo(e.nss[0]), "the agent published the version it found (beside its cadence)")
	const n = 6
	res, _ := e.run(n, 3)
	for _, r := range res {
		assert.Equal(t, "DONE", r.Status, "the true state, from the backend")
	}
	c := e.counter
	t.Logf("%d jobs of 3 s: requests by sender and kind %s", n, c.pathCounts())
	agentDisc := c.pathCount("agent", "ping") + c.pathCount("agent", "openapi")
	assert.Positive(t, agentDisc, "the agent found the version")
	assert.LessOrEqual(t, agentDisc, 10, "once: a ping per known version at most (and the document only if no ping answers)")
	assert.Zero(t, c.pathCount("step", "ping")+c.pathCount("step", "openapi"), "no step discovered")
	assert.Equal(t, n, c.pathCount("step", "submit"), "one submit a job")
	steps := 0
	for _, k := range []string{"submit", "job", "list", "conf", "probe", "other"} {
		steps += c.pathCount("step", k)
	}
	// The submit, a confirm, the final read; and, on a loaded machine, one
	// poll of its own where the agent's first word on the job came later
	// than coverGrace (the CI run beside make e2e: 19 for 6 jobs).
	assert.LessOrEqual(t, float64(steps)/n, 4.0, "the steps' requests a job: submit, a confirm, the final read, one poll if the agent was late")
	// Beside following: what the ended job used, read once from slurmdbd
	// (24.11 here keeps no accounting: the one read learns that).
	assert.LessOrEqual(t, c.pathCount("step", "accounting"), n, "one accounting read a job at most")
}

// A heartbeat that publishes a version slurmrestd does not serve (sealed
// under the steps' key: an agent that found it before an upgrade) costs
// each step one refused submit and one discovery of its own, no more, and
// every job runs once and ends DONE.
func TestStepsRediscoverWhenThePublishedVersionIsRefused(t *testing.T) {
	e := newSlurmEnv(t, 1, time.Second)
	ns := e.nss[0]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.keepBeating(ctx, ns, "api=v0.0.44") }() // 24.11 serves v0.0.40 to v0.0.42
	defer func() { cancel(); wg.Wait() }()
	e.awaitMemo(ns)
	const n = 3
	res, _ := e.run(n, 2)
	for _, r := range res {
		assert.Equal(t, "DONE", r.Status)
	}
	c := e.counter
	t.Logf("requests by sender and kind %s", c.pathCounts())
	assert.Equal(t, n, c.refused(), "one refused submit a step (of the published version)")
	assert.Equal(t, 2*n, c.pathCount("step", "submit"), "and one accepted")
	assert.LessOrEqual(t, c.pathCount("step", "ping"), n*5, "one discovery a step (5 pings on 24.11)")
	assert.Positive(t, c.pathCount("step", "ping"))
}

// awaitMemo waits for the heartbeat in ns to publish a memo, and returns it.
func (e *slurmEnv) awaitMemo(ns string) string {
	back := record.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Factor: 2, Jitter: 0.2}
	end := time.Now().Add(30 * time.Second)
	for time.Now().Before(end) {
		cm := &kubeclient.ConfigMap{}
		if err := e.kube.Get(context.Background(), kubeclient.ConfigMaps, ns, record.AgentConfigMap(cluster), cm); err == nil && cm.Data["memo"] != "" {
			return cm.Data["memo"]
		}
		time.Sleep(back.Next())
	}
	e.t.Fatal("no heartbeat with a memo within 30 s")
	return ""
}

// keepBeating writes a heartbeat sealed under the steps' key, publishing
// memo, its sequence advancing every 500 ms, until ctx ends.
func (e *slurmEnv) keepBeating(ctx context.Context, ns, memo string) {
	key, name := runner.ClusterKey("slurm", e.counter.URL, e.creds), record.AgentConfigMap(cluster)
	back := record.Backoff{Initial: 500 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.1}
	for seq := uint64(1); ctx.Err() == nil; seq++ {
		cm := &kubeclient.ConfigMap{}
		err := e.kube.Get(ctx, kubeclient.ConfigMaps, ns, name, cm)
		cm.Name, cm.Namespace = name, ns
		cm.Data = watcher.SealHeartbeat(key, ns, cluster, watcher.Heartbeat{Agent: "before-the-upgrade", Seq: seq, Interval: 500 * time.Millisecond, Memo: memo})
		if err != nil {
			_ = e.kube.Create(ctx, kubeclient.ConfigMaps, ns, cm, &kubeclient.ConfigMap{})
		} else {
			_ = e.kube.Update(ctx, kubeclient.ConfigMaps, ns, name, cm, &kubeclient.ConfigMap{})
		}
		record.SleepCtx(ctx, back.Next())
	}
}

// One invoke (a process) builds several backends for one slurmrestd: its
// own and its in-step watcher's (placement's probes are built the same
// way). They share what the process found, so the server is asked which
// API it serves once per process, not once per backend.
func TestInvokeDiscoversOncePerProcessOnSlurm2411(t *testing.T) {
	e := newSlurmEnv(t, 1, time.Second)
	ns, job := e.nss[0], "one-process"
	iv := &runner.Invoker{JobName: job, Registry: e.reg, Holder: ns + "/" + job, Backend: e.backendConfig(),
		Spec:  &record.Spec{Backend: "slurm", ResourceURL: e.counter.URL, JobScript: "#!/bin/sh\nsleep 6\n", UpdateInterval: "5"},
		Store: &record.ConfigMapStore{Client: e.kube, Namespace: ns, Name: record.ConfigMapName(job)},
		Log:   slog.New(slog.NewTextHandler(e.logs, nil)), MinPoll: runner.DefaultMinPoll,
		SubmitLease: 30 * time.Second, RetryBudget: 60 * time.Second, CancelWait: 10 * time.Second, Grace: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a ceiling
	defer cancel()
	require.NoError(t, iv.Run(ctx))
	assert.Equal(t, "DONE", iv.Result().Status)
	require.Contains(t, e.logs.String(), inStepWatcher, "the invoke ran a watcher of its own, on a backend of its own")
	c := e.counter
	t.Logf("requests by kind %s", c.pathCounts())
	assert.Zero(t, c.pathCount("step", "openapi"), "no OpenAPI document")
	pings := c.pathCount("step", "ping")
	assert.Positive(t, pings)
	assert.LessOrEqual(t, pings, 5, "one discovery (a ping per known version down to 24.11's v0.0.42)")
}
