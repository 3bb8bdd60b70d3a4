package operator

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"k8s.io/client-go/rest"
)

// scrape reads the operator's /metrics and parses it with Prometheus's own
// text parser: a malformed exposition fails the test.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	fams, err := new(expfmt.TextParser).TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value is the series of fam with these labels (name=value pairs), or -1
// when there is none; a histogram's value is its count.
func value(fams map[string]*dto.MetricFamily, fam string, labels ...string) float64 {
	f := fams[fam]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// histogram is fam's first series' histogram, or nil.
func histogram(fams map[string]*dto.MetricFamily, fam string) *dto.Histogram {
	if f := fams[fam]; f != nil && len(f.Metric) > 0 {
		return f.Metric[0].Histogram
	}
	return nil
}

func probe(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func listenLocal(t *testing.T) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestMetricsFollowABridgeJob scrapes a running operator (against the real
// apiserver) through a BridgeJob's life: the gauge of BridgeJobs moves from
// PENDING to DONE, the Job counter and the reconcile histogram grow.
func TestMetricsFollowABridgeJob(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	l := listenLocal(t)
	addr := l.Addr().String()
	e.opts = func(o *Options) { o.MetricsListener = l }
	e.operator("m")
	e.waitFor("/readyz to answer 200", func() (bool, error) {
		code, body := probe(addr, "/readyz")
		return code == 200, fmt.Errorf("%d %s", code, body)
	})
	if code, _ := probe(addr, "/healthz"); code != 200 {
		t.Errorf("/healthz answered %d", code)
	}
	// Ready already while it stands by for the Lease; then it leads.
	var before map[string]*dto.MetricFamily
	e.waitFor("leader 1 in the metrics", func() (bool, error) {
		before = scrape(t, addr)
		return value(before, "bridge_runner_operator_leader") == 1, nil
	})
	if v := value(before, "bridge_runner_operator_jobs_created_total", "backend", "local"); v > 0 {
		t.Errorf("jobs created before any BridgeJob = %v", v)
	}

	e.create(e.localJob("counted", "echo counted"))
	_, kj := e.children("counted")
	var fams map[string]*dto.MetricFamily
	// The status write is seen before the reconcile that wrote it is
	// counted: wait for both.
	e.waitFor("the PENDING BridgeJob and a reconcile in the metrics", func() (bool, error) {
		fams = scrape(t, addr)
		return value(fams, "bridge_runner_operator_bridgejobs", "state", "PENDING", "backend", "local") == 1 &&
			value(fams, "bridge_runner_operator_reconcile_duration_seconds", "result", "success") >= 1, nil
	})
	if v := value(fams, "bridge_runner_operator_jobs_created_total", "backend", "local"); v != 1 {
		t.Errorf("jobs created = %v, want 1", v)
	}
	reconciles := value(fams, "bridge_runner_operator_reconcile_duration_seconds", "result", "success")
	if reconciles < 1 {
		t.Errorf("successful reconciles = %v", reconciles)
	}

	if code := exitCode(t, e.invoke(kj)); code != 0 {
		t.Fatalf("invoke exited %d; stderr:\n%s", code, e.logs)
	}
	e.waitState("counted", "DONE")
	e.waitFor("the DONE BridgeJob in the metrics", func() (bool, error) {
		fams = scrape(t, addr)
		return value(fams, "bridge_runner_operator_bridgejobs", "state", "DONE", "backend", "local") == 1 &&
			value(fams, "bridge_runner_operator_reconcile_duration_seconds", "result", "success") > reconciles, nil
	})
	if v := value(fams, "bridge_runner_operator_bridgejobs", "state", "PENDING", "backend", "local"); v != -1 {
		t.Errorf("PENDING after DONE = %v, want no series", v)
	}
	if v := value(fams, "bridge_runner_operator_reconcile_duration_seconds", "result", "success"); v <= reconciles {
		t.Errorf("successful reconciles %v after the job ran, %v before", v, reconciles)
	}
	// From the record's changes: one submission, RUNNING (or straight to
	// DONE) and DONE entered once each, one end detected.
	if v := value(fams, "bridge_runner_operator_submissions_total", "backend", "local"); v != 1 {
		t.Errorf("submissions = %v, want 1", v)
	}
	if v := value(fams, "bridge_runner_operator_job_transitions_total", "backend", "local", "state", "DONE"); v != 1 {
		t.Errorf("transitions to DONE = %v, want 1", v)
	}
	if v := value(fams, "bridge_runner_operator_detection_latency_seconds", "backend", "local"); v != 1 {
		t.Errorf("detections = %v, want 1", v)
	}
	if h := histogram(fams, "bridge_runner_operator_detection_latency_seconds"); h == nil || h.GetSampleSum() > 30 {
		t.Errorf("detection latency %v, want one end seen within 30 s", h)
	}
	if v := value(fams, "bridge_runner_operator_kube_requests_total", "class", "2xx"); v < 5 {
		t.Errorf("2xx requests = %v", v)
	}
	if v := value(fams, "bridge_runner_operator_workqueue_depth"); v < 0 {
		t.Errorf("no workqueue depth")
	}
	for name, f := range fams {
		if strings.HasSuffix(name, "_total") && f.GetType() != dto.MetricType_COUNTER {
			t.Errorf("%s is a %v, not a counter", name, f.GetType())
		}
	}

	// A second replica stands by: ready, not leading, no BridgeJob figures
	// (a sum over both replicas counts each BridgeJob once).
	l2 := listenLocal(t)
	e.opts = func(o *Options) { o.MetricsListener = l2 }
	e.operator("m2")
	addr2 := l2.Addr().String()
	e.waitFor("the standby's /readyz to answer 200", func() (bool, error) {
		code, body := probe(addr2, "/readyz")
		return code == 200, fmt.Errorf("%d %s", code, body)
	})
	standby := scrape(t, addr2)
	if v := value(standby, "bridge_runner_operator_leader"); v != 0 {
		t.Errorf("the standby's leader = %v", v)
	}
	if v := value(standby, "bridge_runner_operator_bridgejobs", "state", "DONE"); v != -1 {
		t.Errorf("the standby counts BridgeJobs: %v", v)
	}
}

// TestProbesWithoutAPIServer: an operator whose API server does not answer
// is alive but not ready, and counts its failed requests.
func TestProbesWithoutAPIServer(t *testing.T) {
	dead := listenLocal(t)
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there now
	l := listenLocal(t)
	addr := l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: &rest.Config{Host: "http://" + deadAddr, Timeout: time.Second}, Namespace: "x",
			JobImage: "x", MetricsListener: l})
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the operator did not stop")
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := probe(addr, "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "does not answer") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %q, want 503 naming the API", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _ := probe(addr, "/healthz"); code != 200 {
		t.Errorf("/healthz answered %d, want 200 (alive)", code)
	}
	fams := scrape(t, addr)
	if v := value(fams, "bridge_runner_operator_kube_requests_total", "class", "error"); v < 1 {
		t.Errorf("failed requests = %v", v)
	}
	if v := value(fams, "bridge_runner_operator_leader"); v != 0 {
		t.Errorf("leader = %v before the caches synced", v)
	}
}

// tcpProxy forwards one loopback address to the API server; stop closes
// the listener and every connection (the API server as a network outage
// sees it), start listens again on the same address.
type tcpProxy struct {
	target, addr string
	mu           sync.Mutex
	l            net.Listener
	conns        map[net.Conn]bool
}

func (p *tcpProxy) start(t *testing.T) {
	t.Helper()
	addr := cmp.Or(p.addr, "127.0.0.1:0")
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.l, p.addr, p.conns = l, l.Addr().String(), map[net.Conn]bool{}
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *tcpProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.l.Close()
	for c := range p.conns {
		c.Close()
	}
}

// TestReadyzFollowsTheAPIServer: an operator that reconciles turns not
// ready when its API server stops answering (every connection to it cut,
// nothing listening), stays alive, and is ready again once it answers.
func TestReadyzFollowsTheAPIServer(t *testing.T) {
	e := newEnv(t)
	u, err := url.Parse(e.cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{target: u.Host}
	p.start(t)
	t.Cleanup(p.stop) // after the operator's stop (cleanups run last first)
	e.opCfg = rest.CopyConfig(e.cfg)
	e.opCfg.Host = u.Scheme + "://" + p.addr
	l := listenLocal(t)
	addr := l.Addr().String()
	// No Lease: an outage longer than its renew deadline would end Run.
	e.opts = func(o *Options) { o.MetricsListener = l; o.LeaderElection = false }
	e.operator("r")
	readyz := func(want int, text string) {
		e.waitFor(fmt.Sprintf("/readyz to answer %d", want), func() (bool, error) {
			code, body := probe(addr, "/readyz")
			return code == want && strings.Contains(body, text), fmt.Errorf("%d %s", code, body)
		})
	}
	readyz(200, "ok")
	p.stop()
	readyz(http.StatusServiceUnavailable, "the Kubernetes API does not answer")
	if code, _ := probe(addr, "/healthz"); code != 200 {
		t.Errorf("/healthz answered %d during the outage, want 200 (alive)", code)
	}
	if v := value(scrape(t, addr), "bridge_runner_operator_kube_requests_total", "class", "error"); v < 1 {
		t.Errorf("requests without an answer = %v", v)
	}
	p.start(t)
	readyz(200, "ok")
}
