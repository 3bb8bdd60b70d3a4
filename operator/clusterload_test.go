package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// slurmMeasure is a load measure in the Slurm backend's published format
// (one default partition "debug") with the figures given.
func slurmMeasure(free, pending, running int, pendSecs int64) string {
	return fmt.Sprintf(`{"f":1,"p":[{"n":"debug","d":true,"s":"UP","tc":8,"fc":%d,"tn":2,"fn":1,"mm":60,"mn":2,"mc":8,"p":%d,"r":%d,"pc":%d,"rc":2,"ps":%d,"rs":600}]}`,
		free, pending, running, pending, pendSecs)
}

// agentKeyOf is the key an agent seals with when data is its mounted
// Secret: runner.ClusterKey of the files the mount makes.
func agentKeyOf(t *testing.T, backend, url string, data map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return runner.ClusterKey(backend, url, dir)
}

// TestBeatKeyIsTheAgents: the key the operator derives from a Secret's
// data is the one the agent derives from the same Secret mounted.
func TestBeatKeyIsTheAgents(t *testing.T) {
	data := map[string]string{"token": " tok \n", "user": "alice", record.OriginsKey: "https://a.example.org:6820",
		"big": strings.Repeat("x", runner.MaxCredentialFileBytes+1), "at-the-limit": strings.Repeat("y", runner.MaxCredentialFileBytes)}
	raw := map[string][]byte{}
	for k, v := range data {
		raw[k] = []byte(v)
	}
	want := agentKeyOf(t, "slurm", "https://a.example.org:6820", data)
	if got := cluster.New(cluster.Spec{Backend: "slurm", URL: "https://a.example.org:6820", CredentialText: cluster.CredentialText(raw)}).Key(); string(got) != string(want) || len(want) == 0 {
		t.Errorf("the operator's key %x differs from the agent's %x", got, want)
	}
}

// beat writes the heartbeat ConfigMap of cluster with data d, as the agent
// (or a forger) would.
func (e *env) beat(cluster string, d map[string]string) {
	e.t.Helper()
	ctx := context.Background()
	cm := &kube.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: record.AgentConfigMap(cluster), Namespace: e.ns,
		Labels: map[string]string{record.LabelCluster: cluster, "app.kubernetes.io/component": "agent"}}, Data: d}
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	cur := &kube.ConfigMap{}
	err := e.c.Get(ctx, kube.ConfigMaps, e.ns, cm.Name, cur)
	switch {
	case apierrors.IsNotFound(err):
		err = e.c.Create(ctx, kube.ConfigMaps, e.ns, cm, &kube.ConfigMap{})
	case err == nil:
		cur.Data, cur.APIVersion, cur.Kind = d, "v1", "ConfigMap"
		err = e.c.Update(ctx, kube.ConfigMaps, e.ns, cm.Name, cur, &kube.ConfigMap{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// TestClusterLoadFromItsAgent: the measure a BridgeCluster's agent
// publishes in its sealed heartbeat becomes status.load; a heartbeat
// sealed under another key, one not sealed at all, and the agent's own
// earlier heartbeat replayed never do. The operator runs with the grants
// of deploy/operator/rbac.yaml only.
func TestClusterLoadFromItsAgent(t *testing.T) {
	e := newEnv(t)
	const url = "https://slurm-a.example.org:6820"
	data := map[string]string{"token": "not-for-logs", record.OriginsKey: testOrigins}
	e.secretWith(e.ns, "creds-a", map[string]string{SecretOptInLabel: "true"}, data)
	e.cluster("hpc-a", url, "creds-a", "")
	e.grantOperatorRBAC(true, "../deploy/operator/rbac.yaml")
	e.opCfg = testkube.ServiceAccountConfig(t, e.kc, e.ns, "bridge-runner-operator")
	e.opts = func(o *Options) { o.Registry = builtin.Registry() }
	e.operator("a")

	ag := &fakeAgent{e: e, key: agentKeyOf(t, "slurm", url, data), hb: watcher.Heartbeat{Agent: "agent-1", Interval: 2 * time.Second}}
	ag.hb.Load = slurmMeasure(3, 4, 2, 7200)
	bc := e.waitLoad("the agent's first measure", ag.beat, func(l *ClusterLoad) bool { return l.FreeCPUs != nil && *l.FreeCPUs == 3 })
	first := ag.last
	l := bc.Status.Load
	if l.PendingJobs == nil || *l.PendingJobs != 4 || l.RunningJobs == nil || *l.RunningJobs != 2 || l.TotalCPUs == nil || *l.TotalCPUs != 8 ||
		l.PendingCPUSeconds == nil || *l.PendingCPUSeconds != 7200 || l.Queue != "debug" || l.Agent != "agent-1" || l.MeasuredAt.IsZero() {
		t.Errorf("status.load %+v", *l)
	}

	// Forged figures, past the agent's measuring period since the shown
	// ones (a genuine measure would be taken): sealed under another
	// Secret's key, or not sealed at all.
	other := agentKeyOf(t, "slurm", url, map[string]string{"token": "the-forger's"})
	for time.Since(l.MeasuredAt.Time) < 7*time.Second {
		forged := watcher.Heartbeat{Agent: "agent-1", Seq: ag.hb.Seq + 1, Interval: 2 * time.Second, At: time.Now(), Load: slurmMeasure(99, 0, 0, 0)}
		e.beat("hpc-a", watcher.SealHeartbeat(other, e.ns, "hpc-a", forged))
		e.neverLoad("a heartbeat sealed under another key", 99)
		unsealed := watcher.SealHeartbeat(ag.key, e.ns, "hpc-a", forged)
		delete(unsealed, "tag")
		e.beat("hpc-a", unsealed)
		e.neverLoad("an unsealed heartbeat", 99)
	}

	ag.hb.Load = slurmMeasure(5, 1, 6, 600)
	published := time.Now()
	e.waitLoad("the agent's next measure", ag.beat, func(l *ClusterLoad) bool { return l.FreeCPUs != nil && *l.FreeCPUs == 5 })
	t.Logf("a new measure reached status.load %v after it was published", time.Since(published).Round(time.Millisecond))
	e.beat("hpc-a", first) // replayed: older than shown, and no longer current
	e.neverLoad("the agent's first heartbeat replayed", 3)

	// The same measure in a heartbeat every 100 ms for 8 s: status.load
	// takes it again at most once per the agent's measuring period (5 s),
	// not at each heartbeat (the ceiling allows for the window's edges).
	taken := map[time.Time]bool{}
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ag.beat()
		bc, err := e.bridgeCluster("hpc-a")
		require.NoError(t, err)
		taken[bc.Status.Load.MeasuredAt.Time] = true
	}
	if len(taken) > 3 {
		t.Errorf("status.load took the same measure %d times in 8 s of heartbeats every 100 ms: %v", len(taken), taken)
	}
}

// fakeAgent writes heartbeats as a cluster's agent does: sealed under its
// key, each with the next sequence and the time it is written.
type fakeAgent struct {
	e    *env
	key  []byte
	hb   watcher.Heartbeat
	last map[string]string // the data last written
}

func (a *fakeAgent) beat() {
	a.hb.Seq++
	a.hb.At = time.Now()
	a.last = watcher.SealHeartbeat(a.key, a.e.ns, "hpc-a", a.hb)
	a.e.beat("hpc-a", a.last)
}

// waitLoad waits for the BridgeCluster hpc-a's status.load to satisfy ok,
// calling beat at each look.
func (e *env) waitLoad(what string, beat func(), ok func(*ClusterLoad) bool) *BridgeCluster {
	e.t.Helper()
	var bc *BridgeCluster
	e.waitFor("status.load: "+what, func() (bool, error) {
		beat()
		var err error
		bc, err = e.bridgeCluster("hpc-a")
		return err == nil && bc.Status.Load != nil && ok(bc.Status.Load), err
	})
	return bc
}

// neverLoad checks for 3 s that hpc-a's status.load does not show free
// CPUs, the figure of what.
func (e *env) neverLoad(what string, free int) {
	e.t.Helper()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		bc, err := e.bridgeCluster("hpc-a")
		if err != nil {
			e.t.Fatal(err)
		}
		if l := bc.Status.Load; l != nil && l.FreeCPUs != nil && *l.FreeCPUs == free {
			e.t.Fatalf("status.load took %s: %+v", what, *l)
		}
	}
}
