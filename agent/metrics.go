package agent

import (
	"github.com/bridge-runner/bridge-runner/internal/metrics"
)

// Metrics are the agent's series, served in Prometheus' text format.
type Metrics struct {
	Registry     *metrics.Registry
	queries      metrics.Counter
	failures     metrics.Counter
	observations metrics.Counter
	discoveries  metrics.Counter
	served       metrics.Gauge
	open         metrics.Gauge
	queryTime    metrics.Histogram
}

func newMetrics() *Metrics {
	r := &metrics.Registry{}
	return &Metrics{
		Registry:     r,
		queries:      r.Counter("bridge_runner_agent_queries_total", "Batched status queries sent to the cluster."),
		failures:     r.Counter("bridge_runner_agent_query_failures_total", "Batched status queries that failed."),
		observations: r.Counter("bridge_runner_agent_observations_total", "Observations written into records (one per change of a job's state)."),
		discoveries:  r.Counter("bridge_runner_agent_discoveries_total", "Times the agent asked the cluster what its steps need to know once (Slurm's API version), published in its heartbeat."),
		served:       r.Gauge("bridge_runner_agent_records_served", "Records whose jobs the agent follows."),
		open:         r.Gauge("bridge_runner_agent_records_open", "Records that name the cluster and hold no final state; while there are none the agent is idle and reads the load every minute, not every 5 s."),
		queryTime:    r.Histogram("bridge_runner_agent_query_seconds", "How long a batched status query took.", []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
	}
}

// lastAnswer registers the age of the last answered query, read at scrape
// time (-1 before the first).
func (m *Metrics) lastAnswer(age func() float64) {
	m.Registry.GaugeFunc("bridge_runner_agent_last_answer_age_seconds", "Seconds since the cluster last answered a batched query (-1: never).", nil,
		func(emit func(v float64, labelValues ...string)) { emit(age()) })
}
