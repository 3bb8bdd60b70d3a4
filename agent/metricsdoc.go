package agent

import "github.com/bridge-runner/bridge-runner/internal/metrics"

// MetricFamilies describes the agent's metrics, for the generated reference
// (docs/reference/metrics.md, `make docs`): those of newMetrics and those New
// adds.
func MetricFamilies() []metrics.Family {
	m := newMetrics()
	m.lastAnswer(func() float64 { return -1 })
	return m.Registry.Families()
}
