package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// dashboard is the part of a Grafana dashboard JSON that the page draws.
type dashboard struct {
	Title      string
	Panels     []panel
	Templating struct{ List []variable }
}

// panel is one Grafana panel; a collapsed row holds its panels inside.
type panel struct {
	Title   string
	Type    string
	GridPos struct{ X, Y, W, H int }
	// FieldConfig.Defaults.Unit is Grafana's unit id ("s", "reqps", ...).
	FieldConfig struct{ Defaults struct{ Unit string } }
	Targets     []target
	Panels      []panel
}

type target struct {
	Expr         string
	LegendFormat string
	Hide         bool
}

// variable is a dashboard variable; with includeAll its All value (a
// regex, ".*" when unset) is what the page puts for it, as in
// e2e/dashboard_test.go.
type variable struct {
	Name       string
	Type       string
	IncludeAll bool
	AllValue   string
}

// loadDashboard reads a dashboard and returns its drawable panels (rows
// flattened) in reading order: top to bottom, left to right.
func loadDashboard(path string) (dashboard, []panel, error) {
	var d dashboard
	b, err := os.ReadFile(path)
	if err != nil {
		return d, nil, fmt.Errorf("-dashboard: %v", err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, nil, fmt.Errorf("-dashboard %s: not a dashboard JSON: %v", path, err)
	}
	var out []panel
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	if len(out) == 0 {
		return d, nil, fmt.Errorf("-dashboard %s: no panel to draw", path)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].GridPos, out[j].GridPos
		return a.Y < b.Y || a.Y == b.Y && a.X < b.X
	})
	return d, out, nil
}

// varRef is a Grafana variable in a query: $name or ${name}.
var varRef = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

// variables are the values the queries get: each variable with All its
// All value, Grafana's built-ins (rateInterval for $__rate_interval, the
// step for $__interval, the window for $__range), then the -var
// overrides.
func variables(d dashboard, builtins, overrides map[string]string) map[string]string {
	vals := map[string]string{}
	for _, v := range d.Templating.List {
		if v.IncludeAll {
			vals[v.Name] = v.AllValue
			if v.AllValue == "" {
				vals[v.Name] = ".*"
			}
		}
	}
	for k, v := range builtins {
		vals[k] = v
	}
	for k, v := range overrides {
		vals[k] = v
	}
	return vals
}

// substitute puts the variables' values into expr; a variable without a
// value is an error naming it and the flag that gives one.
func substitute(expr string, vals map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.Trim(m, "${}")
		v, ok := vals[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("the query uses $%s, which has no value: give one with -var %s=VALUE", missing[0], missing[0])
	}
	return out, nil
}
