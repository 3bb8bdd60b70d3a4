package operator

import "github.com/bridge-runner/bridge-runner/record"

// startErrorBuckets span a job that started a day earlier than its
// placement predicted to one a day later (the error has a sign).
var startErrorBuckets = []float64{-86400, -4 * 3600, -3600, -900, -300, -60, -15, 0, 15, 60, 300, 900, 3600, 4 * 3600, 86400}

// observeStartError observes a placed job's start estimate error when its
// observed start is first recorded (status.startEstimate gains observed=),
// fed from the records like the queue wait.
func (rm *recordMetrics) observeStartError(od, d map[string]string) {
	if d[record.KeyStartEstimate] == od[record.KeyStartEstimate] {
		return
	}
	e, err := record.ParseStartEstimate(d[record.KeyStartEstimate])
	if err != nil || e == nil {
		return
	}
	if was, _ := record.ParseStartEstimate(od[record.KeyStartEstimate]); was != nil && !was.Observed.IsZero() {
		return // observed before: counted then
	}
	if secs, ok := e.ErrorSeconds(); ok {
		rm.m.startError.Observe(float64(secs), e.Cluster, e.Partition)
	}
}
