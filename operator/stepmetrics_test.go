package operator

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/record"
)

// TestMetricsCountWorkflowSteps: a workflow step's record (labelled
// managed-by=bridge-runner, owned by no BridgeJob), written as invoke
// writes it, is in the same series as BridgeJobs' records, against the
// real API server; with its queue wait (by partition) and efficiency.
func TestMetricsCountWorkflowSteps(t *testing.T) {
	e := newEnv(t)
	l := listenLocal(t)
	addr := l.Addr().String()
	e.opts = func(o *Options) { o.MetricsListener = l }
	e.operator("m")
	e.waitFor("a leading, synced operator", func() (bool, error) {
		code, _ := probe(addr, "/readyz")
		return code == 200 && value(scrape(t, addr), "bridge_runner_operator_leader") == 1, nil
	})
	ctx := context.Background()
	cms := e.kc.CoreV1().ConfigMaps(e.ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "step-bridge-cm", Labels: map[string]string{record.LabelManagedBy: "bridge-runner"}},
		Data: map[string]string{"backend": "slurm", "resourceURL": "http://hpc.example:6820", "jobproperties": `{"partition":"debug"}`}}
	cm, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	submit := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	write := func(kv ...string) {
		for i := 0; i < len(kv); i += 2 {
			cm.Data[kv[i]] = kv[i+1]
		}
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	est := record.StartEstimate{Cluster: "hpc-1", Partition: "debug", Predicted: submit.Add(5 * time.Second)}
	write(record.KeyID, "41", record.KeyJobStatus, "PENDING", record.KeySubmit, submit.Format(time.RFC3339), record.KeyBackendRequests, "2xx=3",
		record.KeyStartEstimate, est.String())
	est.Observed = submit.Add(12 * time.Second)
	write(record.KeyJobStatus, "RUNNING", record.KeyStart, submit.Add(12*time.Second).Format(time.RFC3339), record.KeyBackendRequests, "2xx=4",
		record.KeyStartEstimate, est.String())
	write(record.KeyJobStatus, "DONE", record.KeyEnd, time.Now().UTC().Format(time.RFC3339), record.KeyBackendRequests, "2xx=5 5xx=1")
	write(record.KeyEfficiency, `{"cpu":0.5,"memory":0.25,"time":0.1,"queueWaitSeconds":12}`, record.KeyBackendRequests, "2xx=6 5xx=1")

	slurm := []string{"backend", "slurm", "target", "hpc.example:6820"}
	e.waitFor("the step's efficiency in the metrics", func() (bool, error) {
		fams := scrape(t, addr)
		return value(fams, "bridge_runner_operator_job_cpu_efficiency", slurm...) == 1, nil
	})
	fams := scrape(t, addr)
	for _, c := range []struct {
		fam    string
		labels []string
		want   float64
	}{
		{"bridge_runner_operator_submissions_total", []string{"backend", "slurm"}, 1},
		{"bridge_runner_operator_job_transitions_total", []string{"backend", "slurm", "state", "DONE"}, 1},
		{"bridge_runner_operator_job_transitions_total", []string{"backend", "slurm", "state", "RUNNING"}, 1},
		{"bridge_runner_operator_detection_latency_seconds", []string{"backend", "slurm"}, 1},
		{"bridge_runner_operator_backend_requests_total", append(slurm, "class", "2xx"), 6},
		{"bridge_runner_operator_backend_requests_total", append(slurm, "class", "5xx"), 1},
		{"bridge_runner_operator_job_memory_efficiency", slurm, 1},
		{"bridge_runner_operator_job_time_limit_fraction", slurm, 1},
		{"bridge_runner_operator_queue_wait_seconds", append(slurm, "partition", "debug"), 1},
		{"bridge_runner_operator_start_estimate_error_seconds", []string{"cluster", "hpc-1", "partition", "debug"}, 1},
	} {
		if v := value(fams, c.fam, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.fam, c.labels, v, c.want)
		}
	}
	for fam, sum := range map[string]float64{"bridge_runner_operator_queue_wait_seconds": 12, "bridge_runner_operator_start_estimate_error_seconds": 7, "bridge_runner_operator_job_cpu_efficiency": 0.5} {
		if h := histogram(fams, fam); h == nil || h.GetSampleSum() != sum {
			t.Errorf("%s: %v, want the sum %v", fam, h, sum)
		}
	}
	if v := value(fams, "bridge_runner_operator_bridgejobs", "backend", "slurm"); v != -1 {
		t.Errorf("a step's record is no BridgeJob: %v", v)
	}
}
