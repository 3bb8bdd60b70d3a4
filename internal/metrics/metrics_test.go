package metrics

import (
	"net/http/httptest"
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

	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
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
