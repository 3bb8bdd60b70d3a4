package main

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// The exposition the throwaway Prometheus scrapes: every metric the
// dashboard's queries name, with the labels they filter and group by, so
// that the test follows the dashboard as it changes.

// family is one metric of the exposition and its series' label values.
type family struct {
	name, kind string              // kind: counter, gauge or histogram
	labels     map[string][]string // label → the values its series take
}

var (
	metricName = regexp.MustCompile(`\bbridge_runner_[a-z0-9_]+`)
	matcher    = regexp.MustCompile(`(\w+)\s*(=~|=)\s*"([^"]*)"`)
	byClause   = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	plainValue = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// familiesOf reads the metric names of the exprs and, per metric, the
// labels of the same expr (minus job, which Prometheus sets, and le).
func familiesOf(exprs []string) []family {
	byName := map[string]*family{}
	for _, e := range exprs {
		labels := map[string][]string{}
		for _, m := range matcher.FindAllStringSubmatch(e, -1) {
			for _, v := range strings.Split(m[3], "|") {
				if plainValue.MatchString(v) {
					labels[m[1]] = append(labels[m[1]], v)
				}
			}
			labels[m[1]] = append(labels[m[1]], []string{}...)
		}
		for _, m := range byClause.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(m[1], ",") {
				l = strings.TrimSpace(l)
				labels[l] = append(labels[l], []string{}...)
			}
		}
		delete(labels, "job")
		delete(labels, "le")
		for _, n := range metricName.FindAllString(e, -1) {
			base, kind := n, "gauge"
			switch {
			case strings.HasSuffix(n, "_bucket") || strings.HasSuffix(n, "_sum") || strings.HasSuffix(n, "_count"):
				base, kind = n[:strings.LastIndex(n, "_")], "histogram"
			case strings.HasSuffix(n, "_total"):
				kind = "counter"
			}
			f := byName[base]
			if f == nil {
				f = &family{name: base, kind: kind, labels: map[string][]string{}}
				byName[base] = f
			}
			for l, vs := range labels {
				f.labels[l] = appendNew(f.labels[l], vs...)
			}
		}
	}
	out := make([]family, 0, len(byName))
	for _, f := range byName {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func appendNew(to []string, vs ...string) []string {
	for _, v := range vs {
		if !strings.Contains(","+strings.Join(to, ",")+",", ","+v+",") {
			to = append(to, v)
		}
	}
	return to
}

// seriesLabels are the label sets of f's series: as many as its label
// with the most values (2 to 6), each label cycling through its values
// (two made-up ones for a label no query filters).
func (f family) seriesLabels() []string {
	n := 2
	for _, vs := range f.labels {
		n = max(n, min(len(vs), 6))
	}
	keys := make([]string, 0, len(f.labels))
	for k := range f.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, n)
	for i := range n {
		var parts []string
		for _, k := range keys {
			vs := f.labels[k]
			if len(vs) == 0 {
				vs = []string{k + "-a", k + "-b"}
			}
			parts = append(parts, fmt.Sprintf("%s=%q", k, vs[i%len(vs)]))
		}
		out[i] = strings.Join(parts, ",")
	}
	return out
}

// write is f's exposition at scrape number tick: counters and histograms
// grow with it, gauges move (the first series stays at 1, so that
// "== 1" finds it).
func (f family) write(w io.Writer, tick int) {
	fmt.Fprintf(w, "# TYPE %s %s\n", f.name, f.kind)
	for k, ls := range f.seriesLabels() {
		switch f.kind {
		case "counter":
			fmt.Fprintf(w, "%s{%s} %d\n", f.name, ls, (k+1)*tick*3)
		case "histogram":
			count := (k + 1) * tick * 4
			for i, le := range []string{"0.05", "0.25", "1", "5", "+Inf"} {
				fmt.Fprintf(w, "%s_bucket{%s} %d\n", f.name, joinLabels(ls, `le="`+le+`"`), count*[]int{2, 5, 8, 9, 10}[i]/10)
			}
			fmt.Fprintf(w, "%s_sum{%s} %g\n%s_count{%s} %d\n", f.name, ls, float64(count)*0.4, f.name, ls, count)
		default:
			v := 1
			if k > 0 {
				v = k + 1 + tick%4
			}
			fmt.Fprintf(w, "%s{%s} %d\n", f.name, ls, v)
		}
	}
}

func joinLabels(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}
