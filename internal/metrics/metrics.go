// Package metrics is a small Prometheus exposition: counters, gauges
// (set, or read at scrape time) and histograms with labels, served in the
// text format 0.0.4. prometheus/client_golang would add 2.3 MiB to a
// binary that must stay under 20 MiB (and register collectors at start in
// every invoke); the operator needs a dozen series, which this covers.
package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Registry holds metric families in the order they were made.
type Registry struct {
	mu       sync.Mutex
	families []*family
}

type kind string

const (
	counterKind   kind = "counter"
	gaugeKind     kind = "gauge"
	histogramKind kind = "histogram"
)

type family struct {
	name, help string
	kind       kind
	labels     []string
	buckets    []float64 // histograms

	mu     sync.Mutex
	series map[string]*series
	// collect, for a gauge read at scrape time, emits its values.
	collect func(emit func(v float64, labelValues ...string))
}

type series struct {
	labelValues []string
	value       float64  // counter, gauge; a histogram's sum
	counts      []uint64 // a histogram's per-bucket (not cumulative) counts, +Inf last
	count       uint64   // a histogram's count
}

func (r *Registry) add(f *family) *family {
	f.series = map[string]*series{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.families {
		if o.name == f.name {
			panic("metrics: " + f.name + " registered twice")
		}
	}
	r.families = append(r.families, f)
	return f
}

// Counter is a monotonically increasing value per label set.
type Counter struct{ f *family }

// Counter makes a counter family; its name should end in _total.
func (r *Registry) Counter(name, help string, labels ...string) Counter {
	return Counter{r.add(&family{name: name, help: help, kind: counterKind, labels: labels})}
}

// Add adds v (≥ 0) to the series of the label values.
func (c Counter) Add(v float64, labelValues ...string) {
	if v < 0 {
		panic("metrics: a counter cannot go down")
	}
	c.f.with(labelValues, func(s *series) { s.value += v })
}

// Inc adds 1.
func (c Counter) Inc(labelValues ...string) { c.Add(1, labelValues...) }

// Gauge is a value that goes up and down.
type Gauge struct{ f *family }

// Gauge makes a gauge family.
func (r *Registry) Gauge(name, help string, labels ...string) Gauge {
	return Gauge{r.add(&family{name: name, help: help, kind: gaugeKind, labels: labels})}
}

// Set sets the series of the label values to v.
func (g Gauge) Set(v float64, labelValues ...string) {
	g.f.with(labelValues, func(s *series) { s.value = v })
}

// GaugeFunc makes a gauge family whose values collect emits at each
// scrape (e.g. from an informer's cache): nothing to keep in step.
func (r *Registry) GaugeFunc(name, help string, labels []string, collect func(emit func(v float64, labelValues ...string))) {
	r.add(&family{name: name, help: help, kind: gaugeKind, labels: labels, collect: collect})
}

// Histogram counts observations in buckets.
type Histogram struct{ f *family }

// Histogram makes a histogram family with these upper bounds (sorted; +Inf
// is implied).
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) Histogram {
	b := append([]float64(nil), buckets...)
	sort.Float64s(b)
	return Histogram{r.add(&family{name: name, help: help, kind: histogramKind, labels: labels, buckets: b})}
}

// Observe records v in the series of the label values.
func (h Histogram) Observe(v float64, labelValues ...string) {
	h.f.with(labelValues, func(s *series) {
		if s.counts == nil {
			s.counts = make([]uint64, len(h.f.buckets)+1)
		}
		i := sort.SearchFloat64s(h.f.buckets, v) // the first bound ≥ v
		s.counts[i]++
		s.count++
		s.value += v
	})
}

func (f *family) with(labelValues []string, fn func(*series)) {
	if len(labelValues) != len(f.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", f.name, len(f.labels), len(labelValues)))
	}
	key := strings.Join(labelValues, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.series[key]
	if s == nil {
		s = &series{labelValues: append([]string(nil), labelValues...)}
		f.series[key] = s
	}
	fn(s)
}

// ContentType is the text format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Route answers a scrape with the registry in the text format.
func (r *Registry) Route() Route {
	return func() (int, string, string) {
		var b strings.Builder
		_ = r.Write(&b)
		return http.StatusOK, ContentType, b.String()
	}
}

// Write writes every family in the text format 0.0.4, series sorted by
// their label values.
func (r *Registry) Write(w io.Writer) error {
	r.mu.Lock()
	fams := append([]*family(nil), r.families...)
	r.mu.Unlock()
	var b strings.Builder
	for _, f := range fams {
		f.write(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (f *family) write(b *strings.Builder) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.kind)
	for _, s := range f.snapshot() {
		if f.kind != histogramKind {
			writeSample(b, f.name, f.labels, s.labelValues, "", s.value)
			continue
		}
		var cum uint64
		for i, bound := range f.buckets {
			cum += s.counts[i]
			writeSample(b, f.name+"_bucket", f.labels, s.labelValues, formatFloat(bound), float64(cum))
		}
		writeSample(b, f.name+"_bucket", f.labels, s.labelValues, "+Inf", float64(s.count))
		writeSample(b, f.name+"_sum", f.labels, s.labelValues, "", s.value)
		writeSample(b, f.name+"_count", f.labels, s.labelValues, "", float64(s.count))
	}
}

// snapshot copies the series (or collects them), sorted.
func (f *family) snapshot() []series {
	var out []series
	if f.collect != nil {
		byKey := map[string]int{}
		f.collect(func(v float64, lv ...string) {
			if len(lv) != len(f.labels) {
				panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", f.name, len(f.labels), len(lv)))
			}
			k := strings.Join(lv, "\xff")
			if i, ok := byKey[k]; ok {
				out[i].value += v // the same series twice: a sum (e.g. counted per object)
				return
			}
			byKey[k] = len(out)
			out = append(out, series{labelValues: append([]string(nil), lv...), value: v})
		})
	} else {
		f.mu.Lock()
		for _, s := range f.series {
			c := *s
			c.counts = append([]uint64(nil), s.counts...)
			out = append(out, c)
		}
		f.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.Join(out[i].labelValues, "\xff") < strings.Join(out[j].labelValues, "\xff")
	})
	return out
}

func writeSample(b *strings.Builder, name string, labels, values []string, le string, v float64) {
	b.WriteString(name)
	if len(labels) > 0 || le != "" {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, `%s="%s"`, l, escapeLabel(values[i]))
		}
		if le != "" {
			if len(labels) > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, `le="%s"`, le)
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(v))
	b.WriteByte('\n')
}

// escapeHelp escapes a HELP text: backslash and line feed.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// escapeLabel escapes a label value: backslash, double quote and line feed.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Family describes one metric family: what the generated reference
// (docs/reference/metrics.md) lists of it.
type Family struct {
	Name, Help, Type string
	Labels           []string
}

// Families describes every family of r, in the order they were made.
func (r *Registry) Families() []Family {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Family, 0, len(r.families))
	for _, f := range r.families {
		out = append(out, Family{Name: f.name, Help: f.help, Type: string(f.kind), Labels: append([]string(nil), f.labels...)})
	}
	return out
}

// Lookup returns the labels and type (counter, gauge, histogram) of the
// family name; ok is false when there is none. Dashboards are tested
// against it.
func (r *Registry) Lookup(name string) (labels []string, typ string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.families {
		if f.name == name {
			return append([]string(nil), f.labels...), string(f.kind), true
		}
	}
	return nil, "", false
}
