package operator

import (
	"strings"
	"testing"
	"time"

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
