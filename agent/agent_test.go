package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// Tests of the agent against the real kube-apiserver, with the fake
// backend (its batched status counted) and real invokes as its steps.

const (
	cluster = "hpc-1"
	fakeURL = "http://127.0.0.1:9/fake" // never reached: the fake answers
)

// env is one cluster (the fake), its credentials and the namespaces of
// its records.
type env struct {
	t     *testing.T
	fake  *fake.Backend
	reg   *backends.Registry
	kube  *kube.Client
	creds runner.DirCredentials
	key   []byte
	nss   []string
	logs  *syncBuffer
}

func newEnv(t *testing.T, namespaces int) *env {
	f := fake.New()
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", f.Factory()))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("fake-token"), 0o600))
	e := &env{t: t, fake: f, reg: reg, kube: testkube.KubeClient(t, testkube.Config(t)),
		creds: runner.DirCredentials{Dir: dir, Secrets: &runner.Secrets{}}, key: runner.ClusterKey("fake", fakeURL, dir), logs: &syncBuffer{}}
	for range namespaces {
		e.nss = append(e.nss, testkube.Namespace(t, testkube.Client(t)))
	}
	return e
}

// startAgent runs the cluster's agent until the returned stop (also at
// the test's end); stop leaves nothing behind, as a SIGKILL would.
func (e *env) startAgent(interval time.Duration) (*agent.Agent, func()) {
	ag, err := agent.New(agent.Config{Cluster: cluster, Backend: "fake", ResourceURL: fakeURL, Key: e.key, Namespaces: e.nss,
		Interval: interval, Kube: e.kube, Batcher: e.fake, ID: "agent-test", Log: slog.New(slog.NewTextHandler(e.logs, nil))})
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ag.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return ag, stop
}

// invoker is the invoke of job in namespace ns, its record naming cluster
// c ("" for none).
func (e *env) invoker(ns, job, props, c string, retryBudget time.Duration) *runner.Invoker {
	spec := &record.Spec{Backend: "fake", ResourceURL: fakeURL, JobScript: "#!/bin/sh\ntrue\n", JobProperties: props, UpdateInterval: "5", Cluster: c}
	return &runner.Invoker{
		JobName: job, Registry: e.reg, Spec: spec, Holder: ns + "/" + job,
		Store:   &record.ConfigMapStore{Client: e.kube, Namespace: ns, Name: record.ConfigMapName(job)},
		Backend: backends.Config{Credentials: e.creds},
		Log:     slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MinPoll: runner.DefaultMinPoll, SubmitLease: 2 * time.Second, RetryBudget: retryBudget, CancelWait: 2 * time.Second, Grace: 2 * time.Second,
	}
}

// runSteps runs perNS invokes in each namespace at once and returns their
// results and how long each took.
func (e *env) runSteps(perNS int, props string, retryBudget time.Duration) ([]runner.Result, []time.Duration) {
	var wg sync.WaitGroup
	n := perNS * len(e.nss)
	res, took := make([]runner.Result, n), make([]time.Duration, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			iv := e.invoker(e.nss[i%len(e.nss)], fmt.Sprintf("job-%d", i), props, cluster, retryBudget)
			// A ceiling, not a figure: an invoke that never ends fails here.
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			start := time.Now()
			assert.NoError(e.t, iv.Run(ctx))
			res[i], took[i] = *iv.Result(), time.Since(start)
		}()
	}
	wg.Wait()
	return res, took
}

// leases counts the in-step watchers' lease ConfigMaps of the namespaces.
func (e *env) leases() int {
	n := 0
	for _, ns := range e.nss {
		cms, err := testkube.Client(e.t).CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: watcher.LabelWatchGroup})
		require.NoError(e.t, err)
		n += len(cms.Items)
	}
	return n
}

// heartbeat reads the agent's heartbeat in ns as a step verifies it.
func (e *env) heartbeat(ns string) (watcher.Heartbeat, bool) {
	cm := &kube.ConfigMap{}
	if err := e.kube.Get(context.Background(), kube.ConfigMaps, ns, record.AgentConfigMap(cluster), cm); err != nil {
		return watcher.Heartbeat{}, false
	}
	return watcher.ReadHeartbeat(e.key, ns, cluster, cm.Data)
}

// awaitBeat waits until the heartbeat in ns has advanced past seq.
func (e *env) awaitBeat(ns string, seq uint64) watcher.Heartbeat {
	var hb watcher.Heartbeat
	require.Eventually(e.t, func() bool {
		var ok bool
		hb, ok = e.heartbeat(ns)
		return ok && hb.Seq > seq
	}, 20*time.Second, 50*time.Millisecond, "the agent's heartbeat in %s did not advance past %d", ns, seq)
	return hb
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Steps in two namespaces that name one cluster follow its one agent:
// every job ends in its true state; the agent's batched queries keep its
// interval, whatever the number of jobs and namespaces; a step asks the
// backend only at its first poll and once per change the agent told it;
// nobody elects an in-step watcher.
func TestStepsFollowTheAgentAcrossNamespaces(t *testing.T) {
	e := newEnv(t, 2)
	const interval = 500 * time.Millisecond
	start := time.Now()
	_, stop := e.startAgent(interval)
	for _, ns := range e.nss {
		e.awaitBeat(ns, 1)
	}
	const perNS = 4
	res, _ := e.runSteps(perNS, `{"pending":"1s","run":"2s"}`, 30*time.Second)
	stop()
	elapsed := time.Since(start)
	n := perNS * len(e.nss)
	for _, r := range res {
		assert.Equal(t, "DONE", r.Status, "the true state, from the backend")
	}
	batched := e.fake.Count("statusmany")
	perJob := float64(e.fake.Count("status")) / float64(n)
	t.Logf("%d jobs in %d namespaces: %d batched queries in %s (interval %s), %.1f status requests per job",
		n, len(e.nss), batched, elapsed.Round(time.Millisecond), interval, perJob)
	assert.LessOrEqual(t, float64(batched), float64(elapsed)/float64(interval)+1, "one batched query per interval for every namespace and job")
	assert.Positive(t, batched)
	// The first poll, then one confirm per change told (PENDING, RUNNING, DONE).
	assert.LessOrEqual(t, perJob, 4.0, "a step polls only to confirm what the agent told it")
	assert.Zero(t, e.leases(), "no step elected an in-step watcher")
	assert.Equal(t, n, e.fake.Count("submit"))
}

// While the cluster's queries fail the heartbeat's sequence stands still
// (so steps stop trusting it); it advances again once they answer. The
// agent writes an observation only when a job's state changed: at most
// one per state the job went through.
func TestAgentHeartbeatStandsStillWhileQueriesFail(t *testing.T) {
	e := newEnv(t, 1)
	ns := e.nss[0]
	ag, _ := e.startAgent(200 * time.Millisecond)
	// A record of a running job, as an invoke leaves it.
	iv := e.invoker(ns, "job-0", `{"run":"1h"}`, cluster, 30*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = iv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	e.awaitBeat(ns, 3)
	require.Eventually(t, func() bool { return ag.Ready() }, 10*time.Second, 20*time.Millisecond)
	e.fake.SetBatch(backends.Transient(fmt.Errorf("401 unauthorized")), false)
	time.Sleep(time.Second) // the failing query after the last answer
	stuck, ok := e.heartbeat(ns)
	require.True(t, ok)
	failedFrom := e.fake.Count("statusmany")
	time.Sleep(3 * time.Second)
	now, ok := e.heartbeat(ns)
	require.True(t, ok)
	assert.Equal(t, stuck.Seq, now.Seq, "no advance while the queries fail")
	failed := e.fake.Count("statusmany") - failedFrom
	// Backing off from the interval (200 ms, doubling, jittered): far
	// fewer than one query per interval.
	assert.Less(t, failed, 15, "the failing queries back off (15 intervals passed)")
	e.fake.SetBatch(nil, false)
	e.awaitBeat(ns, now.Seq)
	assert.LessOrEqual(t, int(counterValue(t, ag, "bridge_runner_agent_observations_total")), 2, "one observation per state seen (PENDING or RUNNING)")
}

// counterValue reads one unlabelled series of the agent's metrics.
func counterValue(t *testing.T, ag *agent.Agent, name string) float64 {
	var b strings.Builder
	require.NoError(t, ag.Metrics().Registry.Write(&b))
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("no %s in\n%s", name, b.String())
	return 0
}

// A record of another origin (kubectl's: no labels) that names the
// cluster is labelled by its invoke and served by the agent.
func TestAgentServesARecordOfAnyOrigin(t *testing.T) {
	e := newEnv(t, 1)
	ns := e.nss[0]
	ag, _ := e.startAgent(200 * time.Millisecond)
	e.awaitBeat(ns, 1)
	iv := e.invoker(ns, "kubectl-job", `{"pending":"1s","run":"1s"}`, cluster, 30*time.Second)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: record.ConfigMapName("kubectl-job")}, Data: iv.Spec.WithDefaults().Data()}
	_, err := testkube.Client(t).CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	require.NoError(t, iv.Run(ctx))
	assert.Equal(t, "DONE", iv.Result().Status)
	got, err := testkube.Client(t).CoreV1().ConfigMaps(ns).Get(context.Background(), cm.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, cluster, got.Labels[record.LabelCluster])
	assert.NotContains(t, got.Labels, record.LabelManagedBy, "otherwise as kubectl made it")
	assert.Positive(t, counterValue(t, ag, "bridge_runner_agent_observations_total"), "the agent told the record what it saw")
	assert.NotContains(t, e.logs.String(), inStepWatcher)
}

// discoverer is a backends.Discoverer that counts its discoveries, over
// a batcher whose queries the test can have refused outright.
type discoverer struct {
	backends.StatusBatcher
	mu            sync.Mutex
	found, refuse int
}

func (d *discoverer) Remember() string { return "api=v0.0.42" }
func (d *discoverer) Recall(string)    {}
func (d *discoverer) Discover(context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.found++
	return d.Remember(), nil
}

func (d *discoverer) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	d.mu.Lock()
	refuse := d.refuse > 0
	if refuse {
		d.refuse--
	}
	d.mu.Unlock()
	if refuse {
		return nil, backends.Invalid("resourceURL", "slurmrestd does not serve /slurm/v0.0.42/jobs/")
	}
	return d.StatusBatcher.StatusMany(ctx, ids)
}

func (d *discoverer) counts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.found
}

// The agent asks the cluster once at its start what the steps would each
// ask (Discover), publishes it sealed in its heartbeat, and asks again
// only after a query was refused outright (a slurmrestd upgraded under
// it): once per refusal, not once per round.
func TestAgentDiscoversOnceAndAfterARefusal(t *testing.T) {
	e := newEnv(t, 1)
	ns := e.nss[0]
	d := &discoverer{StatusBatcher: e.fake}
	ag, err := agent.New(agent.Config{Cluster: cluster, Backend: "fake", ResourceURL: fakeURL, Key: e.key, Namespaces: e.nss,
		Interval: 100 * time.Millisecond, Kube: e.kube, Batcher: d, Discoverer: d, ID: "agent-test", Log: slog.New(slog.NewTextHandler(e.logs, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ag.Run(ctx) }()
	defer func() { cancel(); <-done }()
	hb := e.awaitBeat(ns, 2)
	assert.Equal(t, "api=v0.0.42", hb.Memo, "published, sealed")
	assert.Equal(t, 1, d.counts(), "asked once, however many rounds")

	// A job to ask for, and two refusals of its query.
	d.mu.Lock()
	d.refuse = 2
	d.mu.Unlock()
	res, _ := e.runSteps(1, `{"run":"1s"}`, 30*time.Second)
	assert.Equal(t, "DONE", res[0].Status)
	e.awaitBeat(ns, e.awaitBeat(ns, 0).Seq)
	assert.Equal(t, 3, d.counts(), "asked again once after each refusal")
	assert.Equal(t, 3.0, counterValue(t, ag, "bridge_runner_agent_discoveries_total"))
}

// slowBatcher is a cluster whose jobs fill three requests a round (as 500
// Slurm jobs do, 200 ids a request) and whose rounds take delay.
type slowBatcher struct {
	backends.StatusBatcher
	delay time.Duration
}

func (s slowBatcher) StatusManyRequests(int) int { return 3 }
func (s slowBatcher) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	time.Sleep(s.delay)
	return s.StatusBatcher.StatusMany(ctx, ids)
}

// The agent announces the cadence it keeps, not only its interval: three
// requests a round at 200 ms start a round every 600 ms, and a round that
// takes 300 ms says so; a step trusts it for three of those (an agent
// announcing its 200 ms interval alone, at 500 jobs, looked stale to its
// steps between two heartbeats and they fell back).
func TestAgentAnnouncesTheCadenceItKeeps(t *testing.T) {
	e := newEnv(t, 1)
	ns := e.nss[0]
	const interval, delay = 200 * time.Millisecond, 300 * time.Millisecond
	ag, err := agent.New(agent.Config{Cluster: cluster, Backend: "fake", ResourceURL: fakeURL, Key: e.key, Namespaces: e.nss,
		Interval: interval, Kube: e.kube, Batcher: slowBatcher{StatusBatcher: e.fake, delay: delay}, ID: "agent-test", Log: slog.New(slog.NewTextHandler(e.logs, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ag.Run(ctx) }()
	// A running job for the rounds to ask about.
	iv := e.invoker(ns, "job-0", `{"run":"1h"}`, cluster, 30*time.Second)
	stepped := make(chan struct{})
	go func() { defer close(stepped); _ = iv.Run(ctx) }()
	defer func() { cancel(); <-done; <-stepped }()
	var hb watcher.Heartbeat
	require.Eventually(t, func() bool {
		var ok bool
		hb, ok = e.heartbeat(ns)
		return ok && hb.Round >= delay
	}, 30*time.Second, 50*time.Millisecond, "a heartbeat after a round that asked for the job")
	assert.Equal(t, 3*interval, hb.Every, "three requests a round, one interval each")
	assert.Less(t, hb.Round, 10*time.Second, "the round's own time, not more (a generous ceiling)")
	assert.Equal(t, watcher.HeartbeatFloor+hb.Round, hb.Due(), "due after its period (the floor's, longer than its rounds') and its round")
}
