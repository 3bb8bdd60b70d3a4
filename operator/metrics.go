package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/metrics"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// opMetrics are the operator's Prometheus metrics and the state its
// probes report.
type opMetrics struct {
	reg       *metrics.Registry
	created   metrics.Counter   // backend
	reconcile metrics.Histogram // result
	kube      metrics.Counter   // class
	leader    metrics.Gauge

	// From the records' changes (recordmetrics.go).
	submissions     metrics.Counter   // backend
	transitions     metrics.Counter   // backend, state
	detection       metrics.Histogram // backend
	backendRequests metrics.Counter   // backend, target, class
	cpuEff          metrics.Histogram // backend, target
	memEff          metrics.Histogram // backend, target
	timeFrac        metrics.Histogram // backend, target
	queueWait       metrics.Histogram // backend, target, partition
	startError      metrics.Histogram // cluster, partition
	records         recordMetrics

	// r is the reconciler once its informers have synced (this replica
	// leads, or runs without leader election); nil before.
	r atomic.Pointer[reconciler]
	// standby: leader election is on and this replica waits for the Lease.
	standby atomic.Bool
	// apiDown: the last request to the Kubernetes API got no answer or a
	// 5xx; the next answer clears it.
	apiDown atomic.Bool
}

// reconcileBuckets span a reconcile that reads only caches (milliseconds)
// to one that writes several objects to a slow API server (seconds).
var reconcileBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newOpMetrics() *opMetrics {
	reg := &metrics.Registry{}
	m := &opMetrics{reg: reg}
	reg.GaugeFunc("bridge_runner_operator_bridgejobs", "BridgeJobs by the state in their status (PENDING before the first) and their record's backend.",
		[]string{"state", "backend"}, m.collectJobs)
	m.created = reg.Counter("bridge_runner_operator_jobs_created_total", "Kubernetes Jobs created to run invoke for a BridgeJob (each submits, or adopts, one remote job).", "backend")
	m.reconcile = reg.Histogram("bridge_runner_operator_reconcile_duration_seconds", "Time to reconcile one BridgeJob, by result (success, error or conflict).", reconcileBuckets, "result")
	reg.GaugeFunc("bridge_runner_operator_workqueue_depth", "BridgeJobs waiting in the work queue.", nil, m.collectDepth)
	m.kube = reg.Counter("bridge_runner_operator_kube_requests_total", "Requests to the Kubernetes API by the class of their answer: 2xx, 3xx, 4xx, 5xx, or error (no answer).", "class")
	m.leader = reg.Gauge("bridge_runner_operator_leader", "1 while this replica reconciles (holds the Lease, or runs without leader election), else 0.")
	m.leader.Set(0)
	m.submissions = reg.Counter("bridge_runner_operator_submissions_total", "Remote jobs submitted for BridgeJobs and workflow steps: their records got a job id (a new attempt's id counts again).", "backend")
	m.transitions = reg.Counter("bridge_runner_operator_job_transitions_total", "State changes in the records of BridgeJobs and workflow steps, by the state entered.", "backend", "state")
	m.detection = reg.Histogram("bridge_runner_operator_detection_latency_seconds", "From a remote job's end (the backend's end time, in whole seconds) to the operator seeing the final state in its record.", detectionBuckets, "backend")
	m.backendRequests = reg.Counter("bridge_runner_operator_backend_requests_total", "HTTP requests invoke sent to the backend for BridgeJobs and workflow steps, by the target's host and the class of the answer (1xx-5xx, error: none); counted by invoke in the record, seen here at its state changes.", "backend", "target", "class")
	m.cpuEff = reg.Histogram("bridge_runner_operator_job_cpu_efficiency", "Ended jobs' CPU time against CPUs × elapsed (status.efficiency's cpu, from the cluster's accounting), by the cluster's host.", efficiencyBuckets, "backend", "target")
	m.memEff = reg.Histogram("bridge_runner_operator_job_memory_efficiency", "Ended jobs' peak memory against the memory requested (status.efficiency's memory), by the cluster's host.", efficiencyBuckets, "backend", "target")
	m.timeFrac = reg.Histogram("bridge_runner_operator_job_time_limit_fraction", "Ended jobs' elapsed time against their time limit (status.efficiency's time), by the cluster's host.", efficiencyBuckets, "backend", "target")
	m.queueWait = reg.Histogram("bridge_runner_operator_queue_wait_seconds", "From a job's submit to its start (the record's times), by the cluster's host and the partition jobproperties names (\"\" for none).", queueWaitBuckets, "backend", "target", "partition")
	m.startError = reg.Histogram("bridge_runner_operator_start_estimate_error_seconds", "A placed job's observed start minus the start its placement predicted (status.startEstimate; positive: later than predicted), by the cluster (BridgeCluster or target) and partition it was placed at. Absurd estimates are not counted.", startErrorBuckets, "cluster", "partition")
	m.records.m = m
	m.registerClusterGauges(reg)
	return m
}

func (m *opMetrics) collectJobs(emit func(float64, ...string)) {
	r := m.r.Load()
	if r == nil {
		return
	}
	for _, o := range r.jobs.GetStore().List() {
		bj, ok := o.(*BridgeJob)
		if !ok {
			continue
		}
		state := bj.Status.State
		if state == "" {
			state = "PENDING"
		}
		backend := bj.Spec.Backend
		if cm, _ := r.cached(r.cms, bj.Namespace, record.ConfigMapName(bj.Name)).(*kube.ConfigMap); cm != nil {
			if b, _ := placedAt(cm); b != "" {
				backend = b
			}
		}
		emit(1, state, backend)
	}
}

func (m *opMetrics) collectDepth(emit func(float64, ...string)) {
	if r := m.r.Load(); r != nil {
		emit(float64(r.queue.Len()))
	}
}

// kubeAnswer counts one request's answer (resp nil: none) and keeps the
// API's reachability for /readyz. A request cancelled by its caller says
// nothing about the API.
func (m *opMetrics) kubeAnswer(req *http.Request, resp *http.Response, err error) {
	if err != nil {
		if req.Context().Err() != nil {
			return
		}
		m.kube.Inc("error")
		m.apiDown.Store(true)
		return
	}
	m.kube.Inc(strconv.Itoa(resp.StatusCode/100) + "xx")
	m.apiDown.Store(resp.StatusCode >= 500)
}

// observeReconcile records one reconcile's duration and result.
func (m *opMetrics) observeReconcile(start time.Time, result string) {
	m.reconcile.Observe(time.Since(start).Seconds(), result)
}

// ready says whether this replica does its part: it reconciles with
// synced caches, or stands by for the Lease; and the API answers.
func (m *opMetrics) ready() error {
	switch {
	case m.apiDown.Load():
		return errors.New("the Kubernetes API does not answer")
	case m.r.Load() == nil && !m.standby.Load():
		return errors.New("the informers have not synced yet")
	}
	return nil
}

// serve serves /metrics, /healthz and /readyz on l until ctx ends.
func (m *opMetrics) serve(ctx context.Context, l net.Listener) {
	metrics.Serve(ctx, l, map[string]metrics.Route{
		"/metrics": m.reg.Route(),
		"/healthz": func() (int, string, string) { return http.StatusOK, "text/plain; charset=utf-8", "ok\n" },
		"/readyz": func() (int, string, string) {
			if err := m.ready(); err != nil {
				return http.StatusServiceUnavailable, "text/plain; charset=utf-8", "not ready: " + err.Error() + "\n"
			}
			return http.StatusOK, "text/plain; charset=utf-8", "ok\n"
		},
	})
}

// listen opens the metrics and probes address: the given listener, else
// o.MetricsAddr; nil when both are unset ("0" too).
func (o *Options) listen() (net.Listener, error) {
	if o.MetricsListener != nil {
		return o.MetricsListener, nil
	}
	if o.MetricsAddr == "" || o.MetricsAddr == "0" {
		return nil, nil
	}
	l, err := net.Listen("tcp", o.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("serving metrics and probes on %s: %w", o.MetricsAddr, err)
	}
	return l, nil
}
