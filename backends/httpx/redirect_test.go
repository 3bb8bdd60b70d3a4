package httpx_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

func TestRedirectPolicy(t *testing.T) {
	for _, c := range []struct {
		from, to string
		hops     int
		ok       bool
	}{
		{"https://slurm:6820/slurm/v0.0.42/ping", "https://slurm:6820/slurm/v0.0.42/ping/", 1, true},
		{"https://slurm/x", "https://SLURM:443/y", 1, true},                  // default port, case
		{"http://ray:8265/api/jobs/x/logs/tail", "ws://ray:8265/y", 1, true}, // ws is http
		{"wss://ray/x", "https://ray:443/y", 1, true},
		{"https://slurm:6820/x", "https://slurm:6820/x", httpx.MaxRedirects, true},
		{"https://slurm:6820/x", "https://slurm:6820/x", httpx.MaxRedirects + 1, false}, // a loop
		{"https://slurm:6820/x", "https://slurm:6821/x", 1, false},                      // another port
		{"https://slurm:6820/x", "https://other:6820/x", 1, false},                      // another host
		{"https://slurm.example.org/x", "https://evil.slurm.example.org/x", 1, false},   // a subdomain is another host
		{"https://slurm:443/x", "http://slurm:443/x", 1, false},                         // down to http
		{"http://slurm:80/x", "https://slurm:443/x", 1, false},                          // up is another origin too
		{"wss://ray/x", "ws://ray:443/x", 1, false},
	} {
		from, _ := url.Parse(c.from)
		to, _ := url.Parse(c.to)
		err := httpx.CheckRedirectURL(from, to, c.hops)
		assert.Equal(t, c.ok, err == nil, "%s -> %s (%d): %v", c.from, c.to, c.hops, err)
	}
}

// TestRedirectNamesOnlyAPlausibleOrigin: the destination the message shows
// is a scheme, a host and a port; a Location whose host could carry
// anything (a server's echo of a token) is not shown.
func TestRedirectNamesOnlyAPlausibleOrigin(t *testing.T) {
	from, _ := url.Parse("https://slurm:6820/x")
	for to, want := range map[string]string{
		"https://Other.Example:8443/p?token=abc": "(https://other.example:8443)",
		"https://other/p":                        "(https://other:443)",
		"https://[::1]:8443/p":                   "(https://[::1]:8443)",
		"https://eyJhbGciOi_Jz.x/p":              "(an address not shown)",
		"https://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/": "(an address not shown)",
	} {
		u, err := url.Parse(to)
		if err != nil {
			continue
		}
		rerr := httpx.RedirectError(httpx.CheckRedirectURL(from, u, 1), "slurmrestd", "GET /x", "resourceURL")
		if assert.Error(t, rerr, to) {
			assert.Contains(t, rerr.Error(), want, to)
			assert.NotContains(t, rerr.Error(), "token=abc")
		}
	}
}
