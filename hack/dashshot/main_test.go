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
