package agent_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	kubeclient "github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// slurm2605 is the shared real Slurm 26.05 (hack/slurm2605-up.sh), the one
// whose slurmrestd serves MaxArraySize (GET conf): its URL and
// credentials; missing, the test is skipped, and fails under CI.
func slurm2605(t testing.TB) (string, string) {
	u, creds := os.Getenv("BRIDGE_TEST_SLURM2605_URL"), os.Getenv("BRIDGE_TEST_SLURM2605_CREDS")
	if u == "" || creds == "" {
		msg := "this test needs the real Slurm 26.05: bash hack/slurm2605-up.sh && source /tmp/bridge-runner-slurm2605/env"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return u, creds
}

// arraySpec is a step's job: a small array naming the cluster.
func (e *slurmEnv) arraySpec(int) *record.Spec {
	return &record.Spec{Backend: "slurm", ResourceURL: e.counter.URL, JobScript: "#!/bin/sh\ntrue\n", Array: "0-2",
		UpdateInterval: "5", Cluster: cluster}
}

// awaitHeartbeat waits (30 s at most) for ns's heartbeat to verify under
// the steps' key and satisfy ok, and returns it.
func (e *slurmEnv) awaitHeartbeat(ns string, ok func(watcher.Heartbeat) bool) watcher.Heartbeat {
	return e.awaitHeartbeatOf(ns, cluster, e.counter.URL, e.creds, ok)
}

// awaitHeartbeatOf is awaitHeartbeat for the agent of cluster c at url
// with the credentials creds.
func (e *slurmEnv) awaitHeartbeatOf(ns, c, url, creds string, ok func(watcher.Heartbeat) bool) watcher.Heartbeat {
	key := runner.ClusterKey("slurm", url, creds)
	back := record.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Factor: 2, Jitter: 0.2}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		cm := &kubeclient.ConfigMap{}
		if err := e.kube.Get(context.Background(), kubeclient.ConfigMaps, ns, record.AgentConfigMap(c), cm); err == nil {
			if hb, verified := watcher.ReadHeartbeat(key, ns, c, cm.Data); verified && ok(hb) {
				return hb
			}
		}
		time.Sleep(back.Next())
	}
	e.t.Fatal("no such heartbeat within 30 s")
	return watcher.Heartbeat{}
}

// On the real Slurm 26.05 behind a counting proxy: the agent reads the
// array limit (GET conf) and publishes it; the steps that split arrays
// and name the cluster ask for it none.
func TestStepsUseTheAgentsArrayLimitOnSlurm2605(t *testing.T) {
	u, creds := slurm2605(t)
	e := newSlurmEnvOn(t, u, creds, 1, time.Second)
	stop, _ := e.startAgentWith(agentOpts{figures: true})
	hb := e.awaitHeartbeat(e.nss[0], func(hb watcher.Heartbeat) bool { return hb.ArrayLimit > 0 })
	assert.Equal(t, 1001, hb.ArrayLimit, "26.05's MaxArraySize, read by the agent")
	assert.True(t, hb.Current(time.Now()))
	const n = 4
	res, _ := e.runSpecs(n, e.arraySpec)
	stop()
	for _, r := range res {
		assert.Equal(t, "DONE", r.Status)
	}
	c := e.counter
	t.Logf("%d arrays: requests by sender and kind %s", n, c.pathCounts())
	assert.Positive(t, c.pathCount("agent", "conf"), "the agent read the limit")
	assert.LessOrEqual(t, c.pathCount("agent", "conf"), 1, "once in its first 10 minutes")
	assert.Zero(t, c.pathCount("step", "conf"), "no step asked for the limit")
	assert.Equal(t, n, c.pathCount("step", "submit"), "one submit an array (no chunks)")
}

// A heartbeat that verifies but is stale (left by an agent that stopped
// an hour ago, here publishing a limit of 2), or one whose limit a
// namespace writer edited (its seal not re-made), is not used: the step
// reads the limit itself, and splits by the cluster's, not the forged one.
func TestStepsReadTheArrayLimitWithoutAFreshAgentOnSlurm2605(t *testing.T) {
	u, creds := slurm2605(t)
	for _, c := range []struct {
		name string
		data func(key []byte, ns string) map[string]string
	}{
		{"stale", func(key []byte, ns string) map[string]string {
			return watcher.SealHeartbeat(key, ns, cluster, watcher.Heartbeat{Agent: "stopped", Seq: 9, Interval: time.Second, At: time.Now().Add(-time.Hour), ArrayLimit: 2})
		}},
		{"forged", func(key []byte, ns string) map[string]string {
			d := watcher.SealHeartbeat(key, ns, cluster, watcher.Heartbeat{Agent: "live", Seq: 9, Interval: time.Second, At: time.Now(), ArrayLimit: 1001})
			d["memo"] = "\nat=" + time.Now().UTC().Format(time.RFC3339Nano) + "\narrayLimit=2"
			return d
		}},
	} {
		e := newSlurmEnvOn(t, u, creds, 1, time.Second) // a namespace and a count of its own
		key, ns := runner.ClusterKey("slurm", e.counter.URL, e.creds), e.nss[0]
		cm := &kubeclient.ConfigMap{}
		cm.Name, cm.Namespace, cm.Data = record.AgentConfigMap(cluster), ns, c.data(key, ns)
		require.NoError(t, e.kube.Create(context.Background(), kubeclient.ConfigMaps, ns, cm, &kubeclient.ConfigMap{}))
		res, _ := e.runSpecs(1, func(i int) *record.Spec {
			s := e.arraySpec(i)
			s.Array = "0-3"
			return s
		})
		assert.Equal(t, "DONE", res[0].Status, c.name)
		assert.Equal(t, 1, e.counter.pathCount("step", "conf"), "%s: the step read the limit itself", c.name)
		assert.NotContains(t, res[0].ID, "@", "%s: one array, not chunks of the published 2", c.name)
		assert.Equal(t, 1, e.counter.pathCount("step", "submit"), c.name)
	}
}
