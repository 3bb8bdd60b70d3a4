package quantum

import (
	"fmt"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
)

// BenchmarkLogDelay: delay from the job logging a line (appended to its log
// in the fake IBM Quantum Platform) to invoke's log showing it, through the
// runner in this process. See BENCHMARKS.md.
func BenchmarkLogDelay(b *testing.B) {
	testutil.BenchLogDelay(b, "quantum-fake", func(b *testing.B, log *testutil.DelayWriter, every time.Duration) {
		h := newHarness(b)
		go h.logStamped(12, 700*time.Millisecond)
		spec := record.Spec{Backend: "quantum", ResourceURL: h.f.URL + "/api/v1/", JobScript: bell,
			JobProperties: `{"program_id":"sampler","backend":"ibm_torino"}`, UpdateInterval: "20"}
		testutil.InvokeInProcess(b, h.b, spec, log, every)
	})
}

// logStamped plays the fake's one job: it runs, logs n stamped lines, one
// every period, and completes.
func (h *harness) logStamped(n int, period time.Duration) {
	id := ""
	for id == "" {
		time.Sleep(10 * time.Millisecond)
		h.f.Mu.Lock()
		for k := range h.f.Jobs {
			id = k
		}
		h.f.Mu.Unlock()
	}
	h.f.Set(id, func(j *fakequantum.Job) { j.Status = "Running" })
	for range n {
		h.f.Set(id, func(j *fakequantum.Job) { j.Logs += fmt.Sprintf("BRLAT %d\n", time.Now().UnixNano()) })
		time.Sleep(period)
	}
	h.f.Set(id, func(j *fakequantum.Job) { j.Status = "Completed" })
}
