package operator

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestClusterLoadInTheMetrics: the load a placement probed (a BridgeCluster's
// status) is in the operator's metrics by namespace and cluster; a figure
// the probe did not give has no series.
func TestClusterLoadInTheMetrics(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.secret("creds-b")
	e.cluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", "")
	e.cluster("hpc-b", "https://slurm-b.example.org:6820", "creds-b", "")
	l := listenLocal(t)
	addr := l.Addr().String()
	e.opts = func(o *Options) { o.MetricsListener = l }
	e.operator("m")
	e.create(e.clusterJob("placed", "hpc-a", "hpc-b"))
	cm, _ := e.children("placed")
	n := func(v int) *int { return &v }
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	p := record.Placed{Target: "hpc-b", Backend: "slurm", Policy: record.PolicyEarliestStart, At: at, Probes: []record.Probe{
		{Target: "hpc-a", Skipped: "did not answer within 10s"},
		{Target: "hpc-b", Queue: "batch", FreeCPUs: n(3), TotalCPUs: n(8), PendingJobs: n(5), RunningJobs: n(2)},
	}}
	raw, _ := json.Marshal(p)
	cm.Data[record.KeyPlacement] = string(raw)
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	if err := e.c.Update(context.Background(), kube.ConfigMaps, e.ns, cm.Name, cm, &kube.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	var fams map[string]*dto.MetricFamily
	e.waitFor("both clusters' load in the metrics", func() (bool, error) {
		fams = scrape(t, addr)
		return value(fams, "bridge_runner_operator_cluster_reachable", "namespace", e.ns, "cluster", "hpc-a") == 0 &&
			value(fams, "bridge_runner_operator_cluster_free_cpus", "namespace", e.ns, "cluster", "hpc-b") == 3, nil
	})
	b := func(fam string, labels ...string) float64 {
		return value(fams, fam, append([]string{"namespace", e.ns, "cluster", "hpc-b"}, labels...)...)
	}
	for _, c := range []struct {
		got, want float64
		what      string
	}{
		{b("bridge_runner_operator_cluster_cpus"), 8, "CPUs"},
		{b("bridge_runner_operator_cluster_jobs", "state", "PENDING"), 5, "pending jobs"},
		{b("bridge_runner_operator_cluster_jobs", "state", "RUNNING"), 2, "running jobs"},
		{b("bridge_runner_operator_cluster_reachable"), 1, "reachable"},
		{b("bridge_runner_operator_cluster_last_probe_timestamp_seconds"), float64(at.Unix()), "last probe"},
		{value(fams, "bridge_runner_operator_cluster_free_cpus", "namespace", e.ns, "cluster", "hpc-a"), -1, "hpc-a's free CPUs (not probed)"},
	} {
		if c.got != c.want {
			t.Errorf("hpc-b %s = %v, want %v", c.what, c.got, c.want)
		}
	}
	// The placed BridgeJob counts under the placed target's backend.
	if v := value(fams, "bridge_runner_operator_bridgejobs", "backend", "slurm"); v != 1 {
		t.Errorf("BridgeJobs on slurm = %v, want 1 (the placed one)", v)
	}
}
