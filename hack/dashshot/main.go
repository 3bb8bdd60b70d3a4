// Command dashshot draws a Grafana dashboard's panels from any Prometheus
// without Grafana (issue 44: Grafana is AGPL and not here): it evaluates
// every panel's queries over a time window (query_range), writes one
// self-contained HTML page of SVG line charts laid out as the dashboard's
// grid, and has Debian's headless chromium take a PNG of it. It prints one
// JSON line: the panels, those with data, those without, the files.
//
//	go run ./hack/dashshot -prometheus http://127.0.0.1:9090 -window 1h \
//	    -html dash.html -png dash.png
//
// Exit codes: 0 drawn; 1 a query refused or the screenshot failed (the
// page is still written); 2 bad flags or dashboard, nothing queried; 75
// Prometheus unreachable after retries.
//
// It lives under hack/ like hack/fakes: a tool for the docs and the e2e
// suite (e2e/dashshot_test.go runs it), never linked into bridge-runner.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) }

// config is the flags, checked.
type config struct {
	prometheus, dashboard, html, png, chromium string
	win                                        window
	rateInterval                               string
	vars                                       map[string]string
	width                                      int
	shotTimeout                                time.Duration
}

// summary is the JSON line on stdout.
type summary struct {
	Panels   int      `json:"panels"`
	WithData int      `json:"with_data"`
	NoData   []string `json:"no_data"`
	Errors   []string `json:"errors"`
	HTML     string   `json:"html"`
	PNG      string   `json:"png,omitempty"`
	Width    int      `json:"width"`
	Height   int      `json:"height"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "dashshot:", err)
		return 2
	}
	d, panels, err := loadDashboard(cfg.dashboard)
	if err != nil {
		fmt.Fprintln(stderr, "dashshot:", err)
		return 2
	}
	builtins := map[string]string{"__rate_interval": cfg.rateInterval, "__interval": promDuration(cfg.win.Step),
		"__range": promDuration(cfg.win.End.Sub(cfg.win.Start))}
	vals := variables(d, builtins, cfg.vars)
	// Every query is checked before the first is sent: bad input sends nothing.
	for _, p := range panels {
		for _, tg := range p.Targets {
			if _, err := substitute(tg.Expr, vals); err != nil {
				fmt.Fprintf(stderr, "dashshot: panel %q: %v\n", p.Title, err)
				return 2
			}
		}
	}
	prom := &prometheus{base: cfg.prometheus, client: httpx.DefaultClient(), tries: 5}
	ds, err := evaluate(ctx, prom, panels, vals, cfg.win)
	if err != nil {
		fmt.Fprintln(stderr, "dashshot:", err)
		return 75
	}
	return finish(ctx, cfg, d.Title, ds, stdout, stderr)
}

// evaluate runs every panel's visible queries over win. A refused query
// marks its panel; a Prometheus still unreachable after the retries ends
// the run.
func evaluate(ctx context.Context, prom *prometheus, panels []panel, vals map[string]string, win window) ([]drawn, error) {
	ds := make([]drawn, len(panels))
	for i, p := range panels {
		ds[i].Panel = p
		for _, tg := range p.Targets {
			if tg.Hide || strings.TrimSpace(tg.Expr) == "" {
				continue
			}
			expr, _ := substitute(tg.Expr, vals)
			ss, err := prom.queryRange(ctx, expr, win)
			if errors.Is(err, errRefused) {
				ds[i].Failed = err.Error()
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, s := range ss {
				ds[i].Lines = append(ds[i].Lines, line{legendName(tg.LegendFormat, s.Labels), s.Points})
			}
		}
	}
	return ds, nil
}

// finish writes the page and its screenshot and prints the summary.
func finish(ctx context.Context, cfg config, title string, ds []drawn, stdout, stderr io.Writer) int {
	f, err := os.Create(cfg.html)
	if err != nil {
		fmt.Fprintln(stderr, "dashshot: -html:", err)
		return 1
	}
	height := writePage(f, title, cfg.win, ds, cfg.width)
	if err := f.Close(); err != nil {
		fmt.Fprintln(stderr, "dashshot: -html:", err)
		return 1
	}
	sum := summary{Panels: len(ds), NoData: []string{}, Errors: []string{}, HTML: cfg.html, PNG: cfg.png, Width: cfg.width, Height: height}
	code := 0
	for _, d := range ds {
		switch {
		case d.Failed != "":
			sum.Errors = append(sum.Errors, d.Panel.Title+": "+d.Failed)
			code = 1
		case d.hasData():
			sum.WithData++
		default:
			sum.NoData = append(sum.NoData, d.Panel.Title)
		}
	}
	if cfg.png != "" {
		if err := screenshot(ctx, cfg.chromium, cfg.html, cfg.png, cfg.width, height, cfg.shotTimeout); err != nil {
			fmt.Fprintln(stderr, "dashshot:", err)
			sum.PNG, code = "", 1
		}
	}
	b, _ := json.Marshal(sum)
	fmt.Fprintln(stdout, string(b))
	return code
}

// varFlag is -var NAME=VALUE, repeatable.
type varFlag map[string]string

func (v varFlag) String() string { return "" }
func (v varFlag) Set(s string) error {
	k, val, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want NAME=VALUE, as -var job=bridge-runner-operator")
	}
	v[strings.TrimPrefix(k, "$")] = val
	return nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{vars: map[string]string{}}
	fs := flag.NewFlagSet("dashshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.prometheus, "prometheus", "", "base URL of the Prometheus to query (http://HOST:PORT)")
	fs.StringVar(&cfg.dashboard, "dashboard", "deploy/grafana/bridge-runner-operator.json", "the Grafana dashboard JSON")
	from := fs.String("from", "", "window start, RFC 3339 (default: -window before -to)")
	to := fs.String("to", "", "window end, RFC 3339 (default: now)")
	span := fs.Duration("window", time.Hour, "window length when -from is not given")
	fs.DurationVar(&cfg.win.Step, "step", 0, "evaluation step (default: the window / 300, at least 1s)")
	fs.StringVar(&cfg.rateInterval, "rate-interval", "1m", "what $__rate_interval stands for (4 scrape intervals at least)")
	fs.Var(varFlag(cfg.vars), "var", "NAME=VALUE for a dashboard variable (repeatable; default: each variable's All)")
	fs.StringVar(&cfg.html, "html", "", "where to write the HTML page (required)")
	fs.StringVar(&cfg.png, "png", "", "where to write the PNG screenshot (none when empty)")
	fs.IntVar(&cfg.width, "width", 1600, "page width in pixels (the height follows the panels)")
	fs.StringVar(&cfg.chromium, "chromium", "chromium", "the chromium binary for the screenshot")
	fs.DurationVar(&cfg.shotTimeout, "shot-timeout", 2*time.Minute, "ceiling for chromium's screenshot")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q: every input is a flag (-h lists them)", fs.Arg(0))
	}
	if err := checkURL(cfg.prometheus); err != nil {
		return cfg, err
	}
	if cfg.html == "" {
		return cfg, fmt.Errorf("-html is required: the path of the page to write")
	}
	if cfg.width < 400 || cfg.width > 8000 {
		return cfg, fmt.Errorf("-width %d: want 400 to 8000 pixels", cfg.width)
	}
	var err error
	cfg.win, err = parseWindow(*from, *to, *span, cfg.win.Step)
	return cfg, err
}

// checkURL accepts http(s)://host[:port][/path] without user info or
// query; the URL is not repeated in the message (it may carry a secret).
func checkURL(s string) error {
	u, err := url.Parse(s)
	if s == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return backends.Invalid("-prometheus", "want the base URL of a Prometheus, http://HOST:PORT (no user info, no query)")
	}
	return nil
}

func parseWindow(from, to string, span, step time.Duration) (window, error) {
	w := window{End: time.Now().UTC(), Step: step}
	var err error
	if to != "" {
		if w.End, err = time.Parse(time.RFC3339, to); err != nil {
			return w, fmt.Errorf("-to %q: want an RFC 3339 time, as 2026-11-29T14:00:00Z", to)
		}
	}
	w.Start = w.End.Add(-span)
	if from != "" {
		if w.Start, err = time.Parse(time.RFC3339, from); err != nil {
			return w, fmt.Errorf("-from %q: want an RFC 3339 time, as 2026-11-29T13:00:00Z", from)
		}
	}
	if !w.Start.Before(w.End) {
		return w, fmt.Errorf("-from must be before -to (and -window positive)")
	}
	if w.Step == 0 {
		w.Step = max(time.Second, (w.End.Sub(w.Start) / 300).Truncate(time.Second))
	}
	if w.Step < 0 || w.End.Sub(w.Start)/w.Step > 11000 {
		return w, fmt.Errorf("-step %s: want a positive step with at most 11000 points in the window (Prometheus's limit)", w.Step)
	}
	return w, nil
}

// promDuration writes d as a Prometheus duration ("90s").
func promDuration(d time.Duration) string {
	return fmt.Sprintf("%ds", max(1, int64(d/time.Second)))
}
