package slurm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// siteGateway is a site's gateway in front of slurmrestd at target: it
// serves under /site/hpc/, takes the token from X-Site-Token and the user
// from X-Site-User, refuses anything else with 401, and passes the request on
// with slurmrestd's own headers.
func siteGateway(t *testing.T, target string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, user := r.Header.Get("X-Site-Token"), r.Header.Get("X-Site-User")
		if !strings.HasPrefix(r.URL.Path, "/site/hpc/") || tok == "" || user == "" || r.Header.Get("X-SLURM-USER-TOKEN") != "" {
			http.Error(w, "gateway: no site credentials", http.StatusUnauthorized)
			return
		}
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/site/hpc")
		r.Header.Del("X-Site-Token")
		r.Header.Del("X-Site-User")
		r.Header.Set("X-SLURM-USER-TOKEN", tok)
		r.Header.Set("X-SLURM-USER-NAME", user)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(gw.Close)
	return gw
}

// gatewayCreds adds the gateway's header names to creds' user and token.
func gatewayCreds(t *testing.T, creds backends.Credentials, extra map[string]string) *testutil.Creds {
	t.Helper()
	user, err := creds.Get("username", "user")
	require.NoError(t, err)
	tok, err := creds.Get("token", "jwt", "password")
	require.NoError(t, err)
	m := map[string]string{"username": user, "token": tok}
	for k, v := range extra {
		m[k] = v
	}
	return testutil.NewCreds(m)
}

func TestSiteGateway(t *testing.T) {
	h := newHarness(t, "24.11.7", "/")
	gw := siteGateway(t, h.f.URL)
	ctx := context.Background()

	plain, err := New(backends.Config{URL: gw.URL + "/site/hpc/", Credentials: h.creds})
	require.NoError(t, err)
	_, err = plain.Submit(ctx, testJob(hello))
	assert.ErrorIs(t, err, backends.ErrAuth, "slurmrestd's header names do not pass the gateway")

	creds := gatewayCreds(t, h.creds, map[string]string{"tokenHeader": "X-Site-Token", "userHeader": "X-Site-User"})
	be, err := New(backends.Config{URL: gw.URL + "/site/hpc/", Credentials: creds})
	require.NoError(t, err)
	id, err := be.Submit(ctx, testJob(hello))
	require.NoError(t, err)
	_, err = be.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "POST /slurm/v0.0.42/job/submit", h.f.reqs()[1], "the gateway's prefix is not sent on")

	for _, bad := range []map[string]string{{"tokenHeader": "X Site Token"}, {"userHeader": "X-User:"}, {"tokenHeader": "none"}} {
		be, err := New(backends.Config{URL: gw.URL, Credentials: gatewayCreds(t, h.creds, bad)})
		require.NoError(t, err)
		err = be.(backends.Validator).Validate(testJob(hello))
		require.ErrorIs(t, err, backends.ErrInvalid, bad)
		assert.Contains(t, err.Error(), "credentials")
	}
}
