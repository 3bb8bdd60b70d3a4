package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metricsOf is one scrape of an operator replica, parsed.
type metricsOf map[string]*dto.MetricFamily

// operatorMetrics scrapes /metrics of every operator replica through the
// API server's pod proxy (the suite sends nothing but to this machine and
// its pods), parses each with Prometheus's own text-format parser (a
// malformed exposition is an error) and returns the leader's: only the
// leader has BridgeJob figures.
func (e *env) operatorMetrics(ctx context.Context) (metricsOf, error) {
	m, _, err := e.operatorLeaderMetrics(ctx)
	return m, err
}

// operatorLeaderMetrics is operatorMetrics with who answered: the leading
// pod's UID and its container's restarts. Counters start over in a new
// leader (the Lease moved under load) or a restarted one, so figures of
// two scrapes compare only when both came from the same leader.
func (e *env) operatorLeaderMetrics(ctx context.Context) (metricsOf, string, error) {
	pods, err := e.kube.CoreV1().Pods("bridge-runner-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=bridge-runner-operator"})
	if err != nil {
		return nil, "", err
	}
	var why []string
	for _, p := range pods.Items {
		if p.Status.Phase != "Running" || p.DeletionTimestamp != nil {
			continue
		}
		raw, err := e.kube.CoreV1().Pods(p.Namespace).ProxyGet("http", p.Name, "8080", "metrics", nil).DoRaw(ctx)
		if err != nil {
			why = append(why, p.Name+": "+err.Error())
			continue
		}
		fams, err := new(expfmt.TextParser).TextToMetricFamilies(bytes.NewReader(raw))
		if err != nil {
			return nil, "", fmt.Errorf("parsing %s's /metrics: %w", p.Name, err)
		}
		if metricsOf(fams).value("bridge_runner_operator_leader") == 1 {
			restarts := int32(0)
			for _, c := range p.Status.ContainerStatuses {
				restarts += c.RestartCount
			}
			return fams, fmt.Sprintf("%s (uid %s, %d restarts)", p.Name, p.UID, restarts), nil
		}
		why = append(why, p.Name+": not the leader")
	}
	return nil, "", fmt.Errorf("no leading operator replica answered: %s", strings.Join(why, "; "))
}

// quietOperator scrapes the leader until two scrapes 2 s apart by the same
// leader agree on backend's job figures: what an earlier test's BridgeJobs
// still had counted (a reconcile after their end) lands before, not in the
// differences a test compares.
func (e *env) quietOperator(ctx context.Context, backend string) (metricsOf, string, error) {
	var last metricsOf
	var lastLeader string
	var err error
	fig := func(m metricsOf) string {
		return fmt.Sprint(m.value("bridge_runner_operator_jobs_created_total", "backend", backend),
			m.value("bridge_runner_operator_submissions_total", "backend", backend),
			m.value("bridge_runner_operator_job_transitions_total", "backend", backend, "state", "RUNNING"),
			m.value("bridge_runner_operator_job_transitions_total", "backend", backend, "state", "DONE"),
			m.value("bridge_runner_operator_detection_latency_seconds", "backend", backend))
	}
	perr := poll(ctx, 2*time.Second, func() (bool, error) {
		var m metricsOf
		var leader string
		m, leader, err = e.operatorLeaderMetrics(ctx)
		if err != nil {
			return false, nil
		}
		quiet := last != nil && leader == lastLeader && fig(m) == fig(last)
		last, lastLeader = m, leader
		return quiet, nil
	})
	if perr != nil {
		return nil, "", fmt.Errorf("%w (last scrape: %v)", perr, err)
	}
	return last, lastLeader, nil
}

// value is the series of fam with these labels (name=value pairs; others
// may be there too), or 0 when there is none (a counter not counted yet);
// a histogram's value is its count.
func (m metricsOf) value(fam string, labels ...string) float64 {
	s := m.series(fam, labels...)
	switch {
	case s == nil:
		return 0
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return 0
}

// histSum is the sum of fam's histogram for backend (0 without one).
func (m metricsOf) histSum(fam, backend string) float64 {
	if s := m.series(fam, "backend", backend); s != nil {
		return s.GetHistogram().GetSampleSum()
	}
	return 0
}

func (m metricsOf) series(fam string, labels ...string) *dto.Metric {
	f := m[fam]
	if f == nil {
		return nil
	}
next:
	for _, s := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range s.Label {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			if !found {
				continue next
			}
		}
		return s
	}
	return nil
}

// checkTypes wants the types Prometheus's naming rules imply: a _total
// is a counter, a _seconds a histogram (here) or a gauge, never a counter.
func (m metricsOf) checkTypes(t *testing.T) {
	t.Helper()
	for name, f := range m {
		if strings.HasSuffix(name, "_total") && f.GetType() != dto.MetricType_COUNTER {
			t.Errorf("%s is a %v, not a counter", name, f.GetType())
		}
		if strings.HasSuffix(name, "_seconds") && f.GetType() == dto.MetricType_COUNTER {
			t.Errorf("%s is a counter without _total", name)
		}
	}
}

// watchMidLife scrapes the operator's leader every second until ctx ends
// and returns every scrape the leader answered (pickMid chooses among
// them once the other Slurm jobs of the window are known).
func (e *env) watchMidLife(ctx context.Context, leader string) <-chan []metricsOf {
	ch := make(chan []metricsOf, 1)
	go func() {
		var got []metricsOf
		defer func() { ch <- got }()
		_ = poll(ctx, time.Second, func() (bool, error) {
			if m, by, err := e.operatorLeaderMetrics(ctx); err == nil && by == leader {
				got = append(got, m)
			}
			return false, nil
		})
	}()
	return ch
}

// pickMid is the first scrape that saw the BridgeJob RUNNING and its end
// not yet counted: the Slurm BridgeJob gauge RUNNING (this test's is the
// only Slurm BridgeJob meanwhile: slurmBridgeJobs), RUNNING transitions
// grown by one and DONE by none — exactly when no other Slurm job was
// active meanwhile (others 0), else by up to one more each for the others
// (the operator counts workflow steps' records too, and the suite runs
// Slurm steps beside this test); nil when none did.
func pickMid(before metricsOf, scrapes []metricsOf, backend string, others int) metricsOf {
	for _, m := range scrapes {
		d := func(state string) float64 {
			return m.value("bridge_runner_operator_job_transitions_total", "backend", backend, "state", state) -
				before.value("bridge_runner_operator_job_transitions_total", "backend", backend, "state", state)
		}
		run, done := d("RUNNING"), d("DONE")
		if m.value("bridge_runner_operator_bridgejobs", "backend", backend, "state", "RUNNING") >= 1 &&
			run >= 1 && run <= 1+float64(others) && done <= float64(others) {
			return m
		}
	}
	return nil
}

// hostOf is a URL's host and port, as the operator labels a target.
func hostOf(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
