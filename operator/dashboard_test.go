package operator

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/internal/metrics"
)

// dashboardPath is the shipped dashboard (deploy/grafana).
const dashboardPath = "../deploy/grafana/bridge-runner-operator.json"

// notOnDashboard are the exported families the dashboard may leave out,
// each with the reason. Everything else the operator or an agent exports
// has a panel: a new family fails TestDashboardShowsEveryFamily until it
// gets one or a line here.
var notOnDashboard = map[string]string{}

// dashboard is what the tests read of the dashboard's JSON.
type dashboard struct {
	Panels []struct {
		ID          int
		Title       string
		Description string
		FieldConfig struct {
			Defaults struct{ Unit string }
		}
		Targets []struct{ Expr, LegendFormat string }
	}
	Templating struct {
		List []struct{ Name, Definition string }
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// exportedFamilies are the families the operator and the agent serve, as
// their registries make them (the generated reference's source too).
func exportedFamilies() map[string]metrics.Family {
	out := map[string]metrics.Family{}
	for _, f := range append(MetricFamilies(), agent.MetricFamilies()...) {
		out[f.Name] = f
	}
	return out
}

var (
	metricName = regexp.MustCompile(`bridge_runner_[a-z_]+`)
	grouping   = regexp.MustCompile(`(?:by|without|on|ignoring) \(([a-z_, ]+)\)`)
	matcher    = regexp.MustCompile(`([a-z_]+)=~?"`)
)

// familyOf is the family a series name belongs to and the type its suffix
// implies ("" for none).
func familyOf(name string) (base, wantType string) {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok {
			return b, "histogram"
		}
	}
	return name, ""
}

// checkQuery checks one query against the families: every series it
// names exists with the type its suffix implies, counters are read as
// rates or increases, gauges never, and every label it groups or filters
// by is one the series has or one Prometheus adds when it scrapes. It
// returns the families it queries.
func checkQuery(t *testing.T, panel, expr string, fams map[string]metrics.Family) []string {
	t.Helper()
	scrapeLabels := []string{"job", "instance", "pod", "namespace", "service", "container", "endpoint", "le"}
	var queried []string
	for _, name := range metricName.FindAllString(expr, -1) {
		base, want := familyOf(name)
		f, ok := fams[base]
		if !ok {
			t.Errorf("panel %q queries %s, which neither the operator nor the agent serves", panel, name)
			continue
		}
		queried = append(queried, base)
		rated := strings.Contains(expr, "rate("+name) || strings.Contains(expr, "increase("+name)
		switch {
		case want != "" && f.Type != want:
			t.Errorf("panel %q queries %s of a %s", panel, name, f.Type)
		case f.Type == "gauge" && rated:
			t.Errorf("panel %q takes the rate of the gauge %s", panel, name)
		case f.Type != "gauge" && !rated:
			t.Errorf("panel %q reads the %s %s without rate() or increase(): its value is a total since the process started", panel, f.Type, name)
		}
		var used []string
		for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
			used = append(used, strings.Split(strings.ReplaceAll(g[1], " ", ""), ",")...)
		}
		for _, m := range matcher.FindAllStringSubmatch(expr, -1) {
			used = append(used, m[1])
		}
		for _, l := range used {
			if !slices.Contains(f.Labels, l) && !slices.Contains(scrapeLabels, l) {
				t.Errorf("panel %q uses the label %q, which %s does not have", panel, l, base)
			}
		}
	}
	return queried
}

// TestDashboardQueriesTheMetrics checks deploy/grafana's dashboard against
// the operator's and the agent's metrics (checkQuery), and that its panels
// have unique ids and a query each. It does not run Grafana.
func TestDashboardQueriesTheMetrics(t *testing.T) {
	d, fams := readDashboard(t), exportedFamilies()
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkQuery(t, p.Title, tg.Expr, fams)
		}
	}
}

// TestDashboardShowsEveryFamily (issue 44): every family the operator or
// an agent exports, listed from their registries (not by hand), is
// queried by a panel of the shipped dashboard, or is in notOnDashboard
// with a reason; an entry there names a family that exists and that no
// panel shows (else it is stale).
func TestDashboardShowsEveryFamily(t *testing.T) {
	d, fams := readDashboard(t), exportedFamilies()
	queried := map[string]bool{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, name := range metricName.FindAllString(tg.Expr, -1) {
				base, _ := familyOf(name)
				queried[base] = true
			}
		}
	}
	if len(fams) < 20 {
		t.Fatalf("only %d families exported: the registries were not read", len(fams))
	}
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		f := fams[name]
		reason, excluded := notOnDashboard[name]
		switch {
		case !queried[name] && !excluded:
			t.Errorf("the dashboard shows nothing of %s (%s, %s); add a panel, or an entry with the reason to notOnDashboard", name, f.Type, f.Help)
		case excluded && queried[name]:
			t.Errorf("%s is on the dashboard and in notOnDashboard; drop the entry", name)
		case excluded && strings.TrimSpace(reason) == "":
			t.Errorf("notOnDashboard gives no reason for %s", name)
		}
	}
	for name := range notOnDashboard {
		if _, ok := fams[name]; !ok {
			t.Errorf("notOnDashboard names %s, which nobody exports", name)
		}
	}
}

// grafanaVars are what the promtool checks put for the dashboard's
// variables (as e2e/dashboard_test.go does for a real Prometheus).
var grafanaVars = strings.NewReplacer(`$job`, `.*`, `$__rate_interval`, `1m`)

// dashQuery is one query of the dashboard, its variables replaced.
type dashQuery struct{ what, expr string }

// queries are the dashboard's panel queries, then its variables' (Grafana's
// label_values(selector, label) as the selector's series grouped by label).
func (d dashboard) queries(t *testing.T) []dashQuery {
	t.Helper()
	var out []dashQuery
	add := func(what, expr string) {
		expr = grafanaVars.Replace(expr)
		if strings.Contains(expr, "$") {
			t.Errorf("%s: a variable this test does not know: %s", what, expr)
		}
		out = append(out, dashQuery{what, expr})
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			add(fmt.Sprintf("panel %q", p.Title), tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if in, ok := strings.CutPrefix(v.Definition, "label_values("); ok {
			sel, label, _ := strings.Cut(strings.TrimSuffix(in, ")"), ",")
			add("variable "+v.Name, "count by ("+strings.TrimSpace(label)+") ("+sel+")")
		}
	}
	return out
}

// needPromtool is Debian's promtool (package prometheus, the version
// hack/prometheus-up.sh runs): Prometheus's own parser and rule evaluator.
// Without it the test skips, and fails under CI=true.
func needPromtool(t *testing.T) string {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not on PATH (Debian's prometheus package; CI=true, so this fails instead of skipping)")
		}
		t.Skip("promtool is not on PATH (Debian's prometheus package)")
	}
	return promtool
}

// promtoolRun writes each of files (JSON, which is YAML) into a temporary
// directory and runs promtool with args, the first file's path last.
func promtoolRun(t *testing.T, promtool string, args []string, files map[string]any, first string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	for name, v := range files {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(promtool, append(args, first)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// recordingRules are qs as the rule group promtool reads: dq_<i> records
// query i.
func recordingRules(qs []dashQuery) map[string]any {
	var rules []map[string]string
	for i, q := range qs {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dq_%d", i), "expr": q.expr})
	}
	return map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
}

// TestDashboardQueriesParse has Prometheus's own parser (promtool check
// rules) parse every panel query and variable query of the dashboard as a
// recording rule: a query Prometheus would refuse fails here, without the
// e2e suite.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := needPromtool(t)
	qs := readDashboard(t).queries(t)
	out, err := promtoolRun(t, promtool, []string{"check", "rules"}, map[string]any{"rules.json": recordingRules(qs)}, "rules.json")
	if err != nil {
		for i, q := range qs {
			out = strings.ReplaceAll(out, fmt.Sprintf("%q", fmt.Sprintf("dq_%d", i)), q.what)
		}
		t.Errorf("promtool check rules: %v\n%s", err, out)
	} else if !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(qs))) {
		t.Errorf("promtool did not check the %d queries:\n%s", len(qs), out)
	}
}
