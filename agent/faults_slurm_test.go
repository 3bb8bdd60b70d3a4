package agent_test

import (
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/testbin"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	kubeclient "github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// The agent's fault matrix on the real kube-apiserver and the real Slurm
// 24.11 (each test behind a counting proxy of its own, so that it counts
// only its own jobs). The agent SIGKILLed is TestAgentKilledOnSlurm2411.

// budgetCeiling is how long a step of a job of run may take at most when
// the agent fails under it: the job, the window of trust (three heartbeat
// periods), the fallback's first rounds, and a queue on the shared
// cluster and a loaded machine (a ceiling, not a figure).
func budgetCeiling(run time.Duration) time.Duration {
	return run + 3*watcher.HeartbeatFloor + 60*time.Second
}

// The agent frozen (SIGSTOP of a `bridge-runner agent` process: it holds
// its connections and writes nothing): its heartbeat stops advancing, the
// steps fall back to the in-step watcher, and every job ends in its true
// state within its budget.
func TestStepsFallBackWhenTheAgentIsFrozenOnSlurm2411(t *testing.T) {
	e := newSlurmEnv(t, 1, time.Second)
	ns := e.nss[0]
	kubeconfig := os.Getenv(testkube.EnvKubeconfig)
	require.NotEmpty(t, kubeconfig, "the real kube-apiserver's kubeconfig")
	cmd := exec.Command(testbin.Path(t, ".."), "agent", "--cluster", cluster, "--backend", "slurm", "--resource-url", e.counter.URL,
		"--credentials-dir", e.creds, "--namespaces", ns, "--query-interval", "1s", "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	e.awaitMemo(ns)
	const run = 12 * time.Second
	go func() {
		time.Sleep(3 * time.Second)
		_ = cmd.Process.Signal(syscall.SIGSTOP)
	}()
	res, took := e.run(3, int(run/time.Second))
	for i, r := range res {
		assert.Equal(t, "DONE", r.Status, "the true state, from the backend")
		assert.Less(t, took[i], budgetCeiling(run), "step %d", i)
	}
	assert.Contains(t, e.logs.String(), inStepWatcher, "the steps fell back to the in-step watcher")
	assert.Equal(t, 3, e.counter.pathCount("step", "submit"), "each job submitted once")
}

// The agent partitioned from the cluster (a black hole between it and
// slurmrestd; the steps' own way open): its queries hang, its heartbeat
// stands still, the steps fall back within their budgets, and follow the
// agent again once the partition heals and its queries answer.
func TestStepsFallBackWhileTheAgentIsPartitionedOnSlurm2411(t *testing.T) {
	e := newSlurmEnv(t, 1, time.Second)
	u, err := url.Parse(e.counter.URL)
	require.NoError(t, err)
	p := testutil.NewProxy(t, u.Host)
	e.startAgentWith(agentOpts{via: p.Addr})
	e.awaitMemo(e.nss[0])
	// The job outlasts the agent's hung query (30 s at most), so that the
	// steps see it serve again before their jobs end.
	const run = 50 * time.Second
	go func() {
		time.Sleep(3 * time.Second)
		p.Set(t, testutil.Blackhole)
		time.Sleep(8 * time.Second)
		p.Restore(t)
	}()
	res, took := e.run(2, int(run/time.Second))
	for i, r := range res {
		assert.Equal(t, "DONE", r.Status, "the true state, from the backend")
		assert.Less(t, took[i], budgetCeiling(run), "step %d", i)
	}
	logs := e.logs.String()
	assert.Contains(t, logs, inStepWatcher, "the steps fell back to the in-step watcher")
	assert.Contains(t, logs, "the cluster's agent serves again", "and followed the agent again once it healed")
	assert.Equal(t, 2, e.counter.pathCount("step", "submit"), "each job submitted once")
}

// The agent's credentials revoked (it runs with another Secret than the
// steps'; its token still works on the cluster): what it writes does not
// verify under the steps' key, so they never follow it: they discover the
// API themselves, elect their own watcher, ignore its observations, and
// end in the true state.
func TestAgentWithOtherCredentialsIsNotTrustedOnSlurm2411(t *testing.T) {
	e := newSlurmEnv(t, 1, time.Second)
	other := t.TempDir()
	entries, err := os.ReadDir(e.creds)
	require.NoError(t, err)
	for _, en := range entries {
		if en.IsDir() || strings.HasPrefix(en.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(e.creds, en.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(other, en.Name()), b, 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(other, "rotated"), []byte("another Secret"), 0o600))
	e.startAgentWith(agentOpts{creds: other})
	e.awaitMemo(e.nss[0])
	const run = 8 * time.Second
	res, took := e.run(3, int(run/time.Second))
	for i, r := range res {
		assert.Equal(t, "DONE", r.Status, "the true state, from the backend")
		assert.Less(t, took[i], budgetCeiling(run), "step %d", i)
	}
	assert.Positive(t, e.batches.calls(), "the agent worked all along")
	assert.Contains(t, e.logs.String(), inStepWatcher, "the steps elected their own watcher")
	assert.Positive(t, e.counter.pathCount("step", "ping"), "the steps found the API themselves: the published one is not trusted")
	assert.Equal(t, 3, e.counter.pathCount("step", "submit"))
}

// Two agents for one cluster at once (a rollout, a second replica): every
// job ends in its true state, none is submitted twice, and the agents'
// Kubernetes writes stay bounded: each writes its heartbeat once per
// period and an observation per change it saw, whatever the other does.
func TestTwoAgentsForOneClusterOnSlurm2411(t *testing.T) {
	e := newSlurmEnv(t, 1, time.Second)
	start := time.Now()
	stopA, kubeA := e.startAgentWith(agentOpts{id: "agent-a"})
	stopB, kubeB := e.startAgentWith(agentOpts{id: "agent-b"})
	e.awaitMemo(e.nss[0])
	const n = 6
	res, _ := e.run(n, 4)
	stopA()
	stopB()
	wall := time.Since(start)
	for _, r := range res {
		assert.Equal(t, "DONE", r.Status, "the true state, from the backend")
	}
	assert.Equal(t, n, e.counter.pathCount("step", "submit"), "no job submitted twice")
	t.Logf("%d jobs in %s: agent A %s, agent B %s; slurmrestd %s", n, wall.Round(time.Second), kubeA.RequestsByVerb(), kubeB.RequestsByVerb(), e.counter.pathCounts())
	// Each agent: a heartbeat a period (2 s; a conflict with the other's
	// costs a read and a write more) and at most 3 observations a job,
	// each written once it lands: an observation's patch carries the
	// version the agent read, and one that lost to a write in between
	// (the other agent's observation, the step's own state) is written
	// again at the next round, once. So twice 3 a job: a CI run's agent
	// wrote 24 observations for 6 jobs. Agents fighting (each writing
	// again what the other wrote) would grow with the rounds instead.
	beats := int(wall/watcher.HeartbeatFloor) + 1
	for name, kc := range map[string]*kubeclient.Client{"A": kubeA, "B": kubeB} {
		assert.LessOrEqual(t, writes(kc), 3*beats+2*3*n, "agent %s's writes", name)
	}
	assert.LessOrEqual(t, float64(e.counter.pathCount("step", "job")+e.counter.pathCount("step", "submit"))/n, 4.0,
		"the steps confirm each change once, however many agents tell it")
}

// writes is how many writes (create, update, patch) client kc sent.
func writes(kc *kubeclient.Client) int {
	by := verbCounts(kc.RequestsByVerb())
	return by["create"] + by["update"] + by["patch"]
}
