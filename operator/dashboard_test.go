package operator

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDashboardQueriesTheMetrics checks deploy/grafana's dashboard against
// the operator's metrics: every series it queries exists, with the type
// its suffix implies, and every label it groups or filters by is one the
// series has (or one Prometheus adds when it scrapes). It does not run
// Grafana.
func TestDashboardQueriesTheMetrics(t *testing.T) {
	b, err := os.ReadFile("../deploy/grafana/bridge-runner-operator.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string
		Panels []struct {
			ID      int
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	reg := newOpMetrics().reg
	scrapeLabels := []string{"job", "instance", "pod", "namespace", "service", "container", "endpoint"}
	metric := regexp.MustCompile(`bridge_runner_[a-z_]+`)
	grouping := regexp.MustCompile(`by \(([a-z_, ]+)\)`)
	matcher := regexp.MustCompile(`([a-z_]+)=~?"`)
	ids := map[int]bool{}
	queried := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				base, want := name, ""
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if strings.HasSuffix(name, suf) {
						base, want = strings.TrimSuffix(name, suf), "histogram"
					}
				}
				labels, typ, ok := reg.Lookup(base)
				if !ok {
					t.Errorf("panel %q queries %s, which the operator does not serve", p.Title, name)
					continue
				}
				queried[base] = true
				if want != "" && typ != want {
					t.Errorf("panel %q queries %s of a %s", p.Title, name, typ)
				}
				if strings.Contains(tg.Expr, "rate("+name) && typ == "gauge" {
					t.Errorf("panel %q takes the rate of the gauge %s", p.Title, name)
				}
				allowed := append(append(labels, scrapeLabels...), "le")
				var used []string
				for _, g := range grouping.FindAllStringSubmatch(tg.Expr, -1) {
					used = append(used, strings.Split(strings.ReplaceAll(g[1], " ", ""), ",")...)
				}
				for _, m := range matcher.FindAllStringSubmatch(tg.Expr, -1) {
					used = append(used, m[1])
				}
				for _, l := range used {
					if !slices.Contains(allowed, l) {
						t.Errorf("panel %q uses the label %q, which %s does not have", p.Title, l, base)
					}
				}
			}
		}
	}
	for _, name := range []string{"bridge_runner_operator_bridgejobs", "bridge_runner_operator_jobs_created_total",
		"bridge_runner_operator_reconcile_duration_seconds", "bridge_runner_operator_workqueue_depth",
		"bridge_runner_operator_kube_requests_total", "bridge_runner_operator_leader", "bridge_runner_operator_submissions_total",
		"bridge_runner_operator_job_transitions_total", "bridge_runner_operator_detection_latency_seconds",
		"bridge_runner_operator_backend_requests_total", "bridge_runner_operator_cluster_free_cpus", "bridge_runner_operator_cluster_cpus",
		"bridge_runner_operator_cluster_jobs", "bridge_runner_operator_cluster_reachable",
		"bridge_runner_operator_cluster_last_probe_timestamp_seconds"} {
		if !queried[name] {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
}
