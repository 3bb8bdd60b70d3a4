package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// The start estimate's error is observed once, when the observed start is
// first recorded; a prediction recorded as unknown, or a record edited
// into what bridge-runner never writes, is not counted.
func TestStartErrorObservedOnce(t *testing.T) {
	m := newOpMetrics()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	pred := record.StartEstimate{Cluster: "hpc-1", Partition: "debug", Predicted: at}
	seen := pred
	seen.Observed = at.Add(-40 * time.Second)
	unknown := record.StartEstimate{Cluster: "hpc-2", Observed: at}
	steps := [][2]string{
		{"", pred.String()},
		{pred.String(), seen.String()},
		{seen.String(), seen.String()},                  // unchanged
		{seen.String(), seen.String() + " "},            // rewritten, observed before
		{"", unknown.String()},                          // no prediction
		{"", "cluster=hpc-3 predicted=soon observed=x"}, // not ours
	}
	for _, s := range steps {
		m.records.observeStartError(map[string]string{record.KeyStartEstimate: s[0]}, map[string]string{record.KeyStartEstimate: s[1]})
	}
	var b strings.Builder
	if err := m.reg.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`bridge_runner_operator_start_estimate_error_seconds_count{cluster="hpc-1",partition="debug"} 1`,
		`bridge_runner_operator_start_estimate_error_seconds_sum{cluster="hpc-1",partition="debug"} -40`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	for _, not := range []string{`cluster="hpc-2"`, `cluster="hpc-3"`} {
		if strings.Contains(out, not) {
			t.Errorf("%s counted", not)
		}
	}
}

// TestClusterLearnsStartErrors: the start estimate errors of the jobs
// placed at a BridgeCluster (its namespace's records) become its status,
// by partition, against the real API server; a BridgeJob created after
// carries them in its record's targets, where earliest-start reads them.
func TestClusterLearnsStartErrors(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.secret("creds-b")
	e.cluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", "")
	e.cluster("hpc-b", "https://slurm-b.example.org:6820", "creds-b", "")
	e.operator("a")
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for i, late := range []int64{600, 1200, 900} {
		name := fmt.Sprintf("placed-%d", i)
		e.create(e.clusterJob(name, "hpc-a", "hpc-b"))
		cm, _ := e.children(name)
		p := record.Placed{Target: "hpc-a", Backend: "slurm", Policy: record.PolicyEarliestStart, At: at,
			Probes: []record.Probe{{Target: "hpc-a", Queue: "debug"}, {Target: "hpc-b", Queue: "batch"}}}
		raw, _ := json.Marshal(p)
		est := record.StartEstimate{Cluster: "hpc-a", Partition: "debug", Predicted: at.Add(time.Minute)}
		est.Observed = est.Predicted.Add(time.Duration(late) * time.Second)
		cm.Data[record.KeyPlacement], cm.Data[record.KeyStartEstimate] = string(raw), est.String()
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
		if err := e.c.Update(context.Background(), kube.ConfigMaps, e.ns, cm.Name, cm, &kube.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
	}
	want := record.StartError{Partition: "debug", MedianSeconds: 900, LowSeconds: 600, HighSeconds: 1200, Samples: 3}
	e.waitFor("hpc-a's learnt start error", func() (bool, error) {
		bc, err := e.bridgeCluster("hpc-a")
		return err == nil && len(bc.Status.StartErrors) == 1 && bc.Status.StartErrors[0] == want, err
	})
	a, _ := e.bridgeCluster("hpc-a")
	if a.Status.StartError != "debug +15m (3)" {
		t.Errorf("hpc-a's startError %q, want \"debug +15m (3)\"", a.Status.StartError)
	}
	if b, err := e.bridgeCluster("hpc-b"); err != nil || len(b.Status.StartErrors) != 0 || b.Status.StartError != "" {
		t.Errorf("hpc-b, where nothing was placed, learnt %+v (%v)", b.Status, err)
	}
	e.create(e.clusterJob("next", "hpc-a", "hpc-b"))
	cm, _ := e.children("next")
	d, err := record.SpecFromData(cm.Data).Parse()
	if err != nil || len(d.Targets) != 2 {
		t.Fatalf("the next record's description: %v", err)
	}
	if got := d.Targets[0].StartErrors; len(got) != 1 || got[0] != want || len(d.Targets[1].StartErrors) != 0 {
		t.Errorf("the next record's targets carry %+v and %+v, want hpc-a's %+v", got, d.Targets[1].StartErrors, want)
	}
}
