package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	kubeclient "github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// placedSpec is a step's job placed between target a (the cluster the
// agent serves: its URL and credentials) and target b (the same Slurm by
// another proxy and a copy of the credentials: another cluster, named
// bCluster when not "").
func (e *slurmEnv) placedSpec(b *slurmCounter, bCreds, bCluster string) func(int) *record.Spec {
	targets := fmt.Sprintf(`[{"name":"a","backend":"slurm","resourceURL":%q,"credentials":%q},{"name":"b","backend":"slurm","resourceURL":%q,"credentials":%q,"cluster":%q}]`,
		e.counter.URL, e.creds, b.URL, bCreds, bCluster)
	return func(int) *record.Spec {
		return &record.Spec{JobScript: "#!/bin/sh\ntrue\n", Targets: targets, UpdateInterval: "5", Cluster: cluster}
	}
}

// copyCreds is a copy of credentials directory dir (another Secret).
func copyCreds(t testing.TB, dir string) string {
	out := t.TempDir()
	for _, f := range []string{"token", "username"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out, f), b, 0o600))
	}
	return out
}

// On the real Slurm 26.05 behind counting proxies: the agent measures
// the load (partitions/, nodes/, the queue); the steps placing their jobs
// read it from the heartbeat and send none of the probe's requests to
// the agent's cluster, while the target without an agent is probed by
// the steps as before.
func TestPlacementReadsTheAgentsLoadOnSlurm2605(t *testing.T) {
	u, creds := slurm2605(t)
	e := newSlurmEnvOn(t, u, creds, 1, time.Second)
	b, bCreds := newSlurmCounter(t, u), copyCreds(t, creds)
	stop, _ := e.startAgentWith(agentOpts{figures: true})
	e.awaitHeartbeat(e.nss[0], func(hb watcher.Heartbeat) bool { return hb.Load != "" })
	const n = 4
	res, _ := e.runSpecs(n, e.placedSpec(b, bCreds, ""))
	stop()
	for _, r := range res {
		assert.Equal(t, "DONE", r.Status)
	}
	t.Logf("%d placed jobs: requests to the agent's cluster %s; to the other %s", n, e.counter.pathCounts(), b.pathCounts())
	assert.Positive(t, e.counter.pathCount("agent", "probe"), "the agent measured the load")
	assert.Zero(t, e.counter.pathCount("step", "probe"), "no step probed the agent's cluster")
	assert.Positive(t, b.pathCount("step", "probe"), "the cluster without an agent was probed by the steps")
}

// A heartbeat whose load a namespace writer edited (the seal not
// re-made: here every partition made idle and huge), or that is stale
// (left by an agent that stopped an hour ago), is not believed: the step
// probes the cluster itself.
func TestPlacementProbesWithoutATrustedAgentOnSlurm2605(t *testing.T) {
	u, creds := slurm2605(t)
	for _, c := range []struct {
		name string
		edit func(d map[string]string, load string)
		at   time.Duration
	}{
		{"forged", func(d map[string]string, load string) {
			d["memo"] = "\nat=" + time.Now().UTC().Format(time.RFC3339Nano) + "\nload=" + load
		}, 0},
		{"stale", func(map[string]string, string) {}, -time.Hour},
	} {
		e := newSlurmEnvOn(t, u, creds, 1, time.Second) // a namespace and a count of its own
		b, bCreds := newSlurmCounter(t, u), copyCreds(t, creds)
		key, ns := runner.ClusterKey("slurm", e.counter.URL, e.creds), e.nss[0]
		load := `{"f":1,"p":[{"n":"debug","d":true,"s":"UP","tc":100000,"fc":100000,"tn":1000,"fn":1000,"mm":-1,"mn":-1,"mc":-1,"p":0,"r":0,"pc":0,"rc":0,"ps":0,"rs":0}]}`
		d := watcher.SealHeartbeat(key, ns, cluster, watcher.Heartbeat{Agent: "agent", Seq: 9, Interval: time.Second, At: time.Now().Add(c.at), Load: load})
		c.edit(d, load)
		cm := &kubeclient.ConfigMap{}
		cm.Name, cm.Namespace, cm.Data = record.AgentConfigMap(cluster), ns, d
		require.NoError(t, e.kube.Create(context.Background(), kubeclient.ConfigMaps, ns, cm, &kubeclient.ConfigMap{}))
		res, _ := e.runSpecs(1, e.placedSpec(b, bCreds, ""))
		assert.Equal(t, "DONE", res[0].Status, c.name)
		assert.Positive(t, e.counter.pathCount("step", "probe"), "%s: the step probed the cluster itself", c.name)
	}
}

// Each target is judged by the load its own cluster's agent published:
// target b names its cluster (hpc-2, another agent on another URL and
// credentials), target a the record's; no step probes either.
func TestPlacementReadsEachTargetsAgentOnSlurm2605(t *testing.T) {
	u, creds := slurm2605(t)
	e := newSlurmEnvOn(t, u, creds, 1, time.Second)
	b, bCreds := newSlurmCounter(t, u), copyCreds(t, creds)
	stopA, _ := e.startAgentWith(agentOpts{figures: true})
	stopB, _ := e.startAgentWith(agentOpts{figures: true, id: "agent-b", cluster: "hpc-2", url: b.URL, creds: bCreds})
	e.awaitHeartbeat(e.nss[0], func(hb watcher.Heartbeat) bool { return hb.Load != "" })
	e.awaitHeartbeatOf(e.nss[0], "hpc-2", b.URL, bCreds, func(hb watcher.Heartbeat) bool { return hb.Load != "" })
	res, _ := e.runSpecs(3, e.placedSpec(b, bCreds, "hpc-2"))
	stopA()
	stopB()
	for _, r := range res {
		assert.Equal(t, "DONE", r.Status)
	}
	t.Logf("requests to a %s; to b %s", e.counter.pathCounts(), b.pathCounts())
	assert.Positive(t, b.pathCount("agent", "probe"), "b's agent measured b")
	assert.Zero(t, e.counter.pathCount("step", "probe")+b.pathCount("step", "probe"), "no step probed either target")
}
