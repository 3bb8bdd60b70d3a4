package operator

import "github.com/bridge-runner/bridge-runner/internal/metrics"

// The per-cluster load as placement probed it: each BridgeCluster's status
// (clusterstatus.go), read at scrape time. A figure the newest probe did
// not give has no series, rather than a made-up 0.

// registerClusterGauges adds the BridgeClusters' gauges to reg.
func (m *opMetrics) registerClusterGauges(reg *metrics.Registry) {
	m.clusterGauge(reg, "bridge_runner_operator_cluster_free_cpus", "CPUs free on a BridgeCluster when a placement last probed it.", nil,
		func(st *BridgeClusterStatus, emit func(float64, ...string)) { emitInt(emit, st.FreeCPUs) })
	m.clusterGauge(reg, "bridge_runner_operator_cluster_cpus", "CPUs of a BridgeCluster (its partition or queue) when a placement last probed it.", nil,
		func(st *BridgeClusterStatus, emit func(float64, ...string)) { emitInt(emit, st.TotalCPUs) })
	m.clusterGauge(reg, "bridge_runner_operator_cluster_jobs", "Jobs on a BridgeCluster by state (PENDING, RUNNING) when a placement last probed it.", []string{"state"},
		func(st *BridgeClusterStatus, emit func(float64, ...string)) {
			emitInt(emit, st.PendingJobs, "PENDING")
			emitInt(emit, st.RunningJobs, "RUNNING")
		})
	m.clusterGauge(reg, "bridge_runner_operator_cluster_reachable", "1 if the last placement's probe of a BridgeCluster got an answer, 0 if not.", nil,
		func(st *BridgeClusterStatus, emit func(float64, ...string)) {
			if st.Reachable != nil {
				emit(map[bool]float64{true: 1, false: 0}[*st.Reachable])
			}
		})
	m.clusterGauge(reg, "bridge_runner_operator_cluster_last_probe_timestamp_seconds", "When a placement last probed a BridgeCluster (Unix time).", nil,
		func(st *BridgeClusterStatus, emit func(float64, ...string)) {
			if st.LastProbe != nil {
				emit(float64(st.LastProbe.UnixNano()) / 1e9)
			}
		})
}

// clusterGauge is a gauge over every BridgeCluster's status, labelled by
// its namespace and name, then extra.
func (m *opMetrics) clusterGauge(reg *metrics.Registry, name, help string, extra []string,
	get func(st *BridgeClusterStatus, emit func(float64, ...string))) {
	reg.GaugeFunc(name, help, append([]string{"namespace", "cluster"}, extra...), func(emit func(float64, ...string)) {
		r := m.r.Load()
		if r == nil || r.clusters == nil {
			return
		}
		for _, o := range r.clusters.GetStore().List() {
			bc, ok := o.(*BridgeCluster)
			if !ok {
				continue
			}
			get(&bc.Status, func(v float64, labels ...string) { emit(v, append([]string{bc.Namespace, bc.Name}, labels...)...) })
		}
	})
}

func emitInt(emit func(float64, ...string), v *int, labels ...string) {
	if v != nil {
		emit(float64(*v), labels...)
	}
}
