package operator

import "github.com/bridge-runner/bridge-runner/internal/metrics"

// MetricFamilies describes the operator's metrics, for the generated
// reference (docs/reference/metrics.md, `make docs`).
func MetricFamilies() []metrics.Family { return newOpMetrics().reg.Families() }
