package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestBadInputSendsNothing: bad flags or a query with a variable that has
// no value exit 2 with the flag or variable named, before any request.
func TestBadInputSendsNothing(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	defer srv.Close()
	dir := t.TempDir()
	unknownVar := filepath.Join(dir, "d.json")
	_ = os.WriteFile(unknownVar, []byte(`{"panels":[{"title":"p","type":"timeseries","targets":[{"expr":"up{x=\"$site\"}"}]}]}`), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-html", "x.html"}, "-prometheus"},
		{[]string{"-prometheus", "http://user:secret@127.0.0.1:1", "-html", "x.html"}, "-prometheus"},
		{[]string{"-prometheus", srv.URL}, "-html"},
		{[]string{"-prometheus", srv.URL, "-html", "x.html", "-from", "yesterday"}, "-from"},
		{[]string{"-prometheus", srv.URL, "-html", "x.html", "-window", "1h", "-step", "1ms"}, "-step"},
		{[]string{"-prometheus", srv.URL, "-html", "x.html", "-dashboard", filepath.Join(dir, "none.json")}, "-dashboard"},
		{[]string{"-prometheus", srv.URL, "-html", "x.html", "-dashboard", unknownVar}, "-var site="},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) || strings.Contains(stderr.String(), "secret") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s (and no secret)", c.args, code, stderr.String(), c.want)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("bad input sent %d requests to Prometheus, want none", n)
	}
}

// TestFaultsOfPrometheus: a 503 is retried (the panel drawn once it
// answers); a query Prometheus refuses (400 bad_data) is that panel's
// error, not retried, exit 1 with the page written; a Prometheus that
// refuses connections is given up after the bounded retries, exit 75.
func TestFaultsOfPrometheus(t *testing.T) {
	dir := t.TempDir()
	dash := filepath.Join(dir, "d.json")
	_ = os.WriteFile(dash, []byte(`{"title":"t","panels":[
		{"title":"ok","type":"timeseries","gridPos":{"x":0,"y":0,"w":12,"h":8},"targets":[{"expr":"up"}]},
		{"title":"bad","type":"timeseries","gridPos":{"x":12,"y":0,"w":12,"h":8},"targets":[{"expr":"rate(up)"}]}]}`), 0o600)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		switch {
		case n <= 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Query().Get("query") == "rate(up)":
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"ranges only allowed for vector selectors"}`))
		default:
			w.Write([]byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"job":"j"},"values":[[1764420000,"1"],[1764420060,"2"]]}]}}`))
		}
	}))
	defer srv.Close()
	args := []string{"-prometheus", srv.URL, "-dashboard", dash, "-from", "2025-11-29T12:40:00Z", "-to", "2025-11-29T12:42:00Z"}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append(args, "-html", filepath.Join(dir, "p.html")), &stdout, &stderr)
	if code != 1 || requests.Load() != 4 || !strings.Contains(stdout.String(), `"with_data":1`) || !strings.Contains(stdout.String(), "bad_data") {
		t.Errorf("exit %d after %d requests, stdout %s stderr %s; want 1 after 4 (two 503s retried, the refused query not), one panel with data, bad's error",
			code, requests.Load(), stdout.String(), stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "p.html")); err != nil || !strings.Contains(string(b), `data-state="error"`) {
		t.Errorf("the page should be written with the refused panel's error: %v", err)
	}
	srv.Close()
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), append(args, "-html", filepath.Join(dir, "q.html")), &stdout, &stderr); code != 75 {
		t.Errorf("a closed Prometheus: exit %d, want 75 after the retries: %s", code, stderr.String())
	}
}

// TestFormatValue: the axis and legend write values in the panel's
// Grafana unit, as Grafana does.
func TestFormatValue(t *testing.T) {
	for _, c := range []struct {
		unit string
		v    float64
		want string
	}{
		{"short", 0, "0"}, {"short", 1.5, "1.5"}, {"short", 1234, "1.23 K"}, {"short", 1.8e9, "1.8 Bil"},
		{"s", 0.25, "250 ms"}, {"s", 5, "5 s"}, {"s", 90, "1.5 min"}, {"s", 0.0000005, "0.5 µs"},
		{"percentunit", 0.125, "12.5%"}, {"percent", 99, "99%"},
		{"reqps", 1.64, "1.64 req/s"}, {"ops", 2000, "2 K ops/s"}, {"bytes", 1536, "1.5 KiB"},
		{"unknown-unit", 42, "42"},
	} {
		if got := formatValue(c.unit, c.v); got != c.want {
			t.Errorf("formatValue(%q, %g) = %q, want %q", c.unit, c.v, got, c.want)
		}
	}
}
