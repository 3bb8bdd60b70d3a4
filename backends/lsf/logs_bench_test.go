package lsf

import (
	"fmt"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
)

// BenchmarkLogDelay: delay from the job printing a line (appended to its
// output file in the fake Application Center) to invoke's log showing it,
// through the runner in this process. See BENCHMARKS.md.
func BenchmarkLogDelay(b *testing.B) {
	testutil.BenchLogDelay(b, "lsf-fake", func(b *testing.B, log *testutil.DelayWriter, every time.Duration) {
		h := newHarness(b)
		go h.printStamped(12, 700*time.Millisecond)
		spec := record.Spec{Backend: "lsf", ResourceURL: h.f.URL, JobScript: "#!/bin/sh\ntrue\n",
			JobProperties: `{"outputFile":"out-%J.txt"}`, UpdateInterval: "20"}
		testutil.InvokeInProcess(b, h.b, spec, log, every)
	})
}

// printStamped plays the fake's one job: it runs, appends n stamped lines
// to its output file, one every period, and ends.
func (h *harness) printStamped(n int, period time.Duration) {
	var j *fakelsf.Job
	for j == nil {
		time.Sleep(10 * time.Millisecond)
		h.f.Mu.Lock()
		for _, job := range h.f.Jobs {
			j = job
		}
		h.f.Mu.Unlock()
	}
	file := fmt.Sprintf("%s/out-%d.txt", j.Cwd, j.ID)
	h.f.Set(j.ID, func(j *fakelsf.Job) { j.Status, j.Start = "RUN", time.Now().UTC() })
	for range n {
		h.f.Set(j.ID, func(j *fakelsf.Job) {
			j.Outputs[file] = fmt.Appendf(j.Outputs[file], "BRLAT %d\n", time.Now().UnixNano())
		})
		time.Sleep(period)
	}
	h.f.Set(j.ID, func(j *fakelsf.Job) {
		zero := 0
		j.Status, j.ExitStatus, j.End = "DONE", &zero, time.Now().UTC()
	})
}
