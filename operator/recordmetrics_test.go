package operator

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

func recordCM(uid string, data map[string]string) *kube.ConfigMap {
	cm := &kube.ConfigMap{Data: data}
	cm.UID = types.UID("uid-" + uid)
	return cm
}

// TestRecordMetricsCountChanges: the counters follow a record's changes
// by differences (never back), take the records of the first list as they
// are, start again with a new run, and name the target by host alone.
func TestRecordMetricsCountChanges(t *testing.T) {
	m := newOpMetrics()
	rm := &m.records
	base := map[string]string{"backend": "slurm", "resourceURL": "https://user:pw@slurm.example:6820/slurm/"}
	with := func(kv ...string) map[string]string {
		d := map[string]string{}
		for k, v := range base {
			d[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			d[kv[i]] = kv[i+1]
		}
		return d
	}
	// A record of the first list: nothing counted, its counts the base.
	old := recordCM("a", with(record.KeyID, "7", record.KeyJobStatus, "RUNNING", record.KeyBackendRequests, "2xx=40"))
	rm.changed(nil, old, true)
	end := time.Now().Add(-3 * time.Second).UTC().Format(time.RFC3339)
	cm := recordCM("a", with(record.KeyID, "7", record.KeyJobStatus, "DONE", record.KeyEnd, end, record.KeyBackendRequests, "2xx=43 5xx=1"))
	rm.changed(old, cm, false)
	// A new BridgeJob's record through its life.
	b0 := recordCM("b", with())
	rm.changed(nil, b0, false)
	b1 := recordCM("b", with(record.KeyID, "8", record.KeyJobStatus, "PENDING", record.KeyBackendRequests, "2xx=2"))
	rm.changed(b0, b1, false)
	rm.changed(b1, b1, false) // a resync: no change
	// A new run of the record: its counts start again.
	b2 := recordCM("b", with(record.KeyID, "9", record.KeyJobStatus, "RUNNING", record.KeyBackendRequests, "2xx=1 error=1"))
	rm.changed(b1, b2, false)
	// A word that is no state, written by hand: no series.
	rm.changed(b2, recordCM("b", with(record.KeyID, "9", record.KeyJobStatus, "WHATEVER", record.KeyBackendRequests, "2xx=1 error=1")), false)

	// A placed record: the placed target's backend and host.
	placed := map[string]string{"targets": `[{"name":"a","backend":"ray","resourceURL":"http://ray-a.example:8265"},{"name":"b","backend":"slurm"}]`,
		record.KeyPlacement:       `{"target":"a","backend":"ray","policy":"earliest-start","at":"2026-11-27T01:00:00Z","probes":[]}`,
		record.KeyBackendRequests: "2xx=4"}
	rm.changed(nil, recordCM("c", placed), false)

	var out strings.Builder
	if err := m.reg.Write(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		`bridge_runner_operator_backend_requests_total{backend="slurm",target="slurm.example:6820",class="2xx"} 6`, // 3 + 2 + 1
		`bridge_runner_operator_backend_requests_total{backend="slurm",target="slurm.example:6820",class="5xx"} 1`,
		`bridge_runner_operator_backend_requests_total{backend="slurm",target="slurm.example:6820",class="error"} 1`,
		`bridge_runner_operator_submissions_total{backend="slurm"} 2`, // b's 8 and 9, not a's
		`bridge_runner_operator_job_transitions_total{backend="slurm",state="DONE"} 1`,
		`bridge_runner_operator_job_transitions_total{backend="slurm",state="PENDING"} 1`,
		`bridge_runner_operator_job_transitions_total{backend="slurm",state="RUNNING"} 1`,
		`bridge_runner_operator_detection_latency_seconds_count{backend="slurm"} 1`,
		`bridge_runner_operator_backend_requests_total{backend="ray",target="ray-a.example:8265",class="2xx"} 4`,
		`bridge_runner_operator_detection_latency_seconds_bucket{backend="slurm",le="2"} 0`,
		`bridge_runner_operator_detection_latency_seconds_bucket{backend="slurm",le="5"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no line %s in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "WHATEVER") {
		t.Errorf("a word that is no state made a series:\n%s", text)
	}
	if strings.Contains(text, "user") || strings.Contains(text, "pw@") {
		t.Errorf("the URL's user info is in the metrics:\n%s", text)
	}
}
