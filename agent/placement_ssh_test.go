package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/backends/slurm"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	kubeclient "github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// loadCalls counts a backend's load probes (ProbeLoad) and measures
// (MeasureLoad).
type loadCalls struct{ probes, measures atomic.Int64 }

// countedSlurm and countedCondor are the SSH backends, every capability
// kept (embedded), with their load calls counted.
type countedSlurm struct {
	*slurm.SSHBackend
	n *loadCalls
}

func (c countedSlurm) ProbeLoad(ctx context.Context, j backends.Job, a *backends.Array) (backends.Load, error) {
	c.n.probes.Add(1)
	return c.SSHBackend.ProbeLoad(ctx, j, a)
}

func (c countedSlurm) MeasureLoad(ctx context.Context) (string, error) {
	c.n.measures.Add(1)
	return c.SSHBackend.MeasureLoad(ctx)
}

type countedCondor struct {
	*htcondor.Backend
	n *loadCalls
}

func (c countedCondor) ProbeLoad(ctx context.Context, j backends.Job, a *backends.Array) (backends.Load, error) {
	c.n.probes.Add(1)
	return c.Backend.ProbeLoad(ctx, j, a)
}

func (c countedCondor) MeasureLoad(ctx context.Context) (string, error) {
	c.n.measures.Add(1)
	return c.Backend.MeasureLoad(ctx)
}

// sshPlaceEnv is a real cluster over SSH (Slurm 22.05's login node or an
// HTCondor submit host), the steps' and the agent's load calls counted
// apart, and a namespace for the steps' records.
type sshPlaceEnv struct {
	t             *testing.T
	name          string // the backend
	srv           testssh.Server
	steps, agents loadCalls
	kube          *kubeclient.Client
	ns            string
}

func newSSHPlaceEnv(t *testing.T, name string, srv testssh.Server) *sshPlaceEnv {
	e := &sshPlaceEnv{t: t, name: name, srv: srv}
	e.kube = testkube.KubeClient(t, testkube.Config(t))
	e.ns = testkube.Namespace(t, testkube.Client(t))
	return e
}

// newBackend is the counted backend at the server.
func (e *sshPlaceEnv) newBackend(cfg backends.Config, n *loadCalls) (backends.Backend, error) {
	cfg.URL = e.srv.URL
	if e.name == htcondor.Name {
		be, err := htcondor.New(cfg)
		if err != nil {
			return nil, err
		}
		return countedCondor{be.(*htcondor.Backend), n}, nil
	}
	be, err := slurm.New(cfg)
	if err != nil {
		return nil, err
	}
	return countedSlurm{be.(*slurm.SSHBackend), n}, nil
}

func (e *sshPlaceEnv) creds() runner.DirCredentials {
	return runner.DirCredentials{Dir: e.srv.CredsDir, Secrets: &runner.Secrets{}}
}

// startAgent runs the cluster's agent (load published) until the returned
// stop.
func (e *sshPlaceEnv) startAgent() func() {
	be, err := e.newBackend(backends.Config{Credentials: e.creds(), Logger: slog.Default()}, &e.agents)
	require.NoError(e.t, err)
	ac := agent.Config{Cluster: cluster, Backend: e.name, ResourceURL: e.srv.URL, Key: runner.ClusterKey(e.name, e.srv.URL, e.srv.CredsDir),
		Namespaces: []string{e.ns}, Interval: time.Second, Kube: testkube.KubeClient(e.t, testkube.Config(e.t)),
		Batcher: be.(backends.StatusBatcher), Loader: be.(backends.LoadPublisher), ID: "agent-ssh-test", Log: slog.Default()}
	ag, err := agent.New(ac)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ag.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			_ = be.(interface{ Close() error }).Close()
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// awaitLoad waits (60 s at most) for the agent's heartbeat to carry a
// load that verifies under the steps' key.
func (e *sshPlaceEnv) awaitLoad() {
	key := runner.ClusterKey(e.name, e.srv.URL, e.srv.CredsDir)
	back := record.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Factor: 2, Jitter: 0.2}
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); {
		cm := &kubeclient.ConfigMap{}
		if err := e.kube.Get(context.Background(), kubeclient.ConfigMaps, e.ns, record.AgentConfigMap(cluster), cm); err == nil {
			if hb, ok := watcher.ReadHeartbeat(key, e.ns, cluster, cm.Data); ok && hb.Load != "" {
				return
			}
		}
		time.Sleep(back.Next())
	}
	e.t.Fatal("the agent published no load within 60 s")
}

// place runs n steps (jobs prefix-0…) that place a short job on the
// cluster (its only target) and end DONE.
func (e *sshPlaceEnv) place(prefix string, n int) {
	reg := backends.NewRegistry()
	require.NoError(e.t, reg.Register(e.name, func(cfg backends.Config) (backends.Backend, error) { return e.newBackend(cfg, &e.steps) }))
	targets := fmt.Sprintf(`[{"name":"a","backend":%q,"resourceURL":%q}]`, e.name, e.srv.URL)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := fmt.Sprintf("%s-%d", prefix, i)
			iv := &runner.Invoker{JobName: job, Registry: reg, Holder: e.ns + "/" + job, Backend: backends.Config{Credentials: e.creds()},
				Spec:  &record.Spec{JobScript: "#!/bin/sh\ntrue\n", Targets: targets, UpdateInterval: "2", Cluster: cluster},
				Store: &record.ConfigMapStore{Client: e.kube, Namespace: e.ns, Name: record.ConfigMapName(job)},
				Log:   slog.Default(), MinPoll: runner.DefaultMinPoll,
				SubmitLease: 30 * time.Second, RetryBudget: 60 * time.Second, CancelWait: 10 * time.Second, Grace: 10 * time.Second}
			// A ceiling, not a figure: the shared cluster may queue the jobs.
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			assert.NoError(e.t, iv.Run(ctx), job)
			assert.Equal(e.t, "DONE", iv.Result().Status, job)
		}()
	}
	wg.Wait()
}

// placesWithoutProbing: steps placing their jobs on the cluster probe it
// (ProbeLoad, shared among them) while no agent serves it; once its agent publishes the
// load, they send no probe at all, and only the agent measures.
func placesWithoutProbing(t *testing.T, e *sshPlaceEnv) {
	const n = 3
	k0 := e.kube.Requests()
	e.place("alone", n)
	alone, kAlone := e.steps.probes.Load(), e.kube.Requests()-k0
	// Steps of a namespace share a probe for LoadShareTTL: one at least.
	assert.Positive(t, alone, "without an agent the steps probe")
	stop := e.startAgent()
	e.awaitLoad()
	k1 := e.kube.Requests()
	e.place("agent", n)
	kAgent := e.kube.Requests() - k1
	stop()
	withAgent := e.steps.probes.Load() - alone
	// Figures for the report: probes and the steps' Kubernetes requests
	// (the whole invoke's, placement's among them).
	t.Logf("%s: %d placements: %d step probes and %d Kubernetes requests without an agent; %d probes and %d requests with it (the agent measured %d times)",
		e.name, n, alone, kAlone, withAgent, kAgent, e.agents.measures.Load())
	assert.Zero(t, withAgent, "no step probes the cluster whose agent publishes its load")
	assert.Positive(t, e.agents.measures.Load(), "the agent measured the load")
}

// Over SSH, on the real Slurm 22.05 login node.
func TestPlacementReadsTheAgentsLoadOverSSH(t *testing.T) {
	placesWithoutProbing(t, newSSHPlaceEnv(t, slurm.Name, testssh.Default(t)))
}

// On each real HTCondor pool.
func TestPlacementReadsTheAgentsLoadOnHTCondor(t *testing.T) {
	testssh.EachCondor(t, func(t *testing.T, srv testssh.Server) {
		placesWithoutProbing(t, newSSHPlaceEnv(t, htcondor.Name, srv))
	})
}
