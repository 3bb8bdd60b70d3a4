package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExposition checks the text against Prometheus's own parser and
// against the format's letter: HELP and TYPE, escaping, cumulative
// buckets with +Inf, _sum and _count.
func TestExposition(t *testing.T) {
	r := &Registry{}
	c := r.Counter("t_requests_total", "Requests.\nSecond line with a \\ backslash.", "class")
	g := r.Gauge("t_leader", "1 when leading.")
	h := r.Histogram("t_duration_seconds", "Durations.", []float64{0.5, 0.1, 1}, "result")
	r.GaugeFunc("t_jobs", "Jobs.", []string{"state", "backend"}, func(emit func(float64, ...string)) {
		emit(1, "RUNNING", "slurm")
		emit(1, "RUNNING", "slurm")
		emit(1, "DONE", `a"b\c`+"\nd")
	})
	c.Inc("2xx")
	c.Add(2.5, "5xx")
	c.Inc("2xx")
	g.Set(1)
	for _, v := range []float64{0.05, 0.1, 0.3, 0.7, 3} {
		h.Observe(v, "ok")
	}

	addr := serveRoutes(t, map[string]Route{"/metrics": r.Route()})
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	var b strings.Builder
	require.NoError(t, r.Write(&b))
	text := b.String()

	fams, err := new(expfmt.TextParser).TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err, text)
	assert.Equal(t, "Requests.\nSecond line with a \\ backslash.", fams["t_requests_total"].GetHelp())
	assert.Equal(t, 2.0, fams["t_requests_total"].Metric[0].GetCounter().GetValue())
	assert.Equal(t, 1.0, fams["t_leader"].Metric[0].GetGauge().GetValue())
	jobs := fams["t_jobs"].Metric
	require.Len(t, jobs, 2)
	assert.Equal(t, `a"b\c`+"\nd", jobs[0].Label[1].GetValue())
	assert.Equal(t, 2.0, jobs[1].GetGauge().GetValue(), "the same series twice is summed")
	hist := fams["t_duration_seconds"].Metric[0].GetHistogram()
	assert.Equal(t, uint64(5), hist.GetSampleCount())
	assert.InDelta(t, 4.15, hist.GetSampleSum(), 1e-9)
	var cum []uint64
	for _, bk := range hist.Bucket {
		cum = append(cum, bk.GetCumulativeCount())
	}
	assert.Equal(t, []uint64{2, 3, 4, 5}, cum, "le=0.1 holds 0.1 itself")

	assert.Contains(t, text, "# TYPE t_duration_seconds histogram\n")
	assert.Contains(t, text, `t_duration_seconds_bucket{result="ok",le="+Inf"} 5`+"\n")
	assert.Contains(t, text, `t_duration_seconds_bucket{result="ok",le="0.1"} 2`+"\n")
	assert.Contains(t, text, `t_jobs{state="DONE",backend="a\"b\\c\nd"} 1`+"\n")
	assert.Contains(t, text, `# HELP t_requests_total Requests.\nSecond line with a \\ backslash.`+"\n")
}

func TestMisuse(t *testing.T) {
	r := &Registry{}
	c := r.Counter("x_total", "x", "a")
	assert.Panics(t, func() { c.Inc() }, "label values must match")
	assert.Panics(t, func() { c.Add(-1, "a") }, "a counter never goes down")
	assert.Panics(t, func() { r.Gauge("x_total", "again") }, "one name once")
}

func serveRoutes(t *testing.T, routes map[string]Route) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Serve(ctx, l, routes) }()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}

// TestServe: GET and HEAD of a route, a query ignored, 404, 405, a bad or
// oversized request refused, and a client that sends nothing does not
// hold up the others.
func TestServe(t *testing.T) {
	addr := serveRoutes(t, map[string]Route{
		"/readyz": func() (int, string, string) { return http.StatusServiceUnavailable, "text/plain", "not ready: x\n" },
		"/ok":     func() (int, string, string) { return http.StatusOK, "text/plain", "ok\n" },
	})
	idle, err := net.Dial("tcp", addr) // sends nothing
	require.NoError(t, err)
	defer idle.Close()

	resp, err := http.Get("http://" + addr + "/ok?verbose=1")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "ok\n", string(body))
	assert.Equal(t, "text/plain", resp.Header.Get("Content-Type"))

	resp, err = http.Head("http://" + addr + "/ok")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, int64(3), resp.ContentLength)

	for path, want := range map[string]int{"/readyz": 503, "/nothing": 404} {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, path)
	}
	resp, err = http.Post("http://"+addr+"/ok", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 405, resp.StatusCode)

	for raw, want := range map[string]string{
		"NONSENSE\r\n\r\n": "400",
		"GET /ok HTTP/1.1\r\nX: " + strings.Repeat("a", 9000) + "\r\n\r\n": "431",
	} {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, _ = io.WriteString(c, raw)
		got, _ := io.ReadAll(c)
		c.Close()
		assert.True(t, strings.HasPrefix(string(got), "HTTP/1.1 "+want+" "), "%.20q: %.40q", raw, got)
	}
}
