package operator

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bridge-runner/bridge-runner/internal/metrics"
)

// fallbackOf is a query's fallback, a labelled 0 for when the query has
// nothing to show (no series yet, or no observation in the window): the
// label and its text.
var fallbackOf = regexp.MustCompile(` or on\(\) label_replace\(vector\(0\), "([a-z_]+)", "([^"]+)", "", ""\)$`)

// seriesOf is the input promtool reads for one family: a series per name
// the family exposes (one bucket and +Inf for a histogram), every label
// "x", rising by one per step when active, else flat.
func seriesOf(f metrics.Family, active bool) []map[string]string {
	var labels []string
	for _, l := range f.Labels {
		labels = append(labels, l+`="x"`)
	}
	labels = append(labels, `job="bridge-runner"`)
	values := "5x40"
	if active && f.Type != "gauge" {
		values = "0+1x40"
	}
	names := []string{f.Name}
	if f.Type == "histogram" {
		names = []string{f.Name + `_bucket{le="1",`, f.Name + `_bucket{le="+Inf",`, f.Name + "_sum{", f.Name + "_count{"}
	} else {
		names[0] += "{"
	}
	var out []map[string]string
	for _, n := range names {
		out = append(out, map[string]string{"series": n + strings.Join(labels, ",") + "}", "values": values})
	}
	return out
}

// TestDashboardFallbacks evaluates the dashboard's queries with promtool's
// rule tests (Prometheus's own engine, no server) in three scrapes of
// every exported family: none at all, active (counters and histograms
// rising), and quiet (flat). A query of a histogram's quantile or mean
// must carry a fallback (a window without observations is NaN, which
// Grafana and the e2e suite's test show as no data). Every query with a
// fallback shows exactly its fallback with no series, real samples and not
// its fallback when active (so the fallback hides no broken query), and a
// quantile or mean shows its fallback when quiet (its NaN is dropped).
func TestDashboardFallbacks(t *testing.T) {
	promtool := needPromtool(t)
	qs, fams := readDashboard(t).queries(t), exportedFamilies()
	var none, active, quiet []map[string]any
	for i, q := range qs {
		rec := fmt.Sprintf("dq_%d", i)
		fb := fallbackOf.FindStringSubmatch(q.expr)
		// A quantile or a mean is NaN in a window without observations (a
		// rate of _count alone is 0 there).
		nanInQuiet := slices.ContainsFunc(metricName.FindAllString(q.expr, -1), func(n string) bool {
			return strings.HasSuffix(n, "_bucket") || strings.HasSuffix(n, "_sum")
		})
		switch {
		case fb == nil && nanInQuiet:
			t.Errorf("%s reads a histogram's quantile or mean without a fallback (or on() label_replace(vector(0), ...)): %s", q.what, q.expr)
			continue
		case fb == nil:
			continue
		}
		only := fmt.Sprintf(`%s{%s=%q}`, rec, fb[1], fb[2])
		exactlyFallback := map[string]any{"expr": rec, "eval_time": "5m", "exp_samples": []any{map[string]any{"labels": only, "value": 0}}}
		none = append(none, exactlyFallback)
		active = append(active,
			map[string]any{"expr": fmt.Sprintf(`count(%s{%s!=%q} >= 0)`, rec, fb[1], fb[2]), "eval_time": "5m",
				"exp_samples": []any{map[string]any{"labels": "{}", "value": 1}}},
			map[string]any{"expr": only, "eval_time": "5m", "exp_samples": []any{}})
		if nanInQuiet {
			quiet = append(quiet, exactlyFallback)
		}
	}
	if len(none) == 0 || len(quiet) == 0 {
		t.Fatalf("%d queries with a fallback, %d of histograms: the dashboard was not read", len(none), len(quiet))
	}
	var activeIn, quietIn []map[string]string
	for _, f := range fams {
		activeIn = append(activeIn, seriesOf(f, true)...)
		quietIn = append(quietIn, seriesOf(f, false)...)
	}
	tests := map[string]any{"rule_files": []string{"rules.json"}, "evaluation_interval": "15s", "tests": []any{
		map[string]any{"interval": "15s", "input_series": []any{}, "promql_expr_test": none},
		map[string]any{"interval": "15s", "input_series": activeIn, "promql_expr_test": active},
		map[string]any{"interval": "15s", "input_series": quietIn, "promql_expr_test": quiet},
	}}
	out, err := promtoolRun(t, promtool, []string{"test", "rules"}, map[string]any{"rules.json": recordingRules(qs), "tests.json": tests}, "tests.json")
	if err != nil {
		for i := len(qs) - 1; i >= 0; i-- { // dq_12 before dq_1
			out = strings.ReplaceAll(out, fmt.Sprintf("dq_%d", i), qs[i].what)
		}
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}
