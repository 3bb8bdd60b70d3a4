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
	assert.Contains(t, h.f.reqs(), "POST /slurm/v0.0.42/job/submit", "the gateway's prefix is not sent on")

	for _, bad := range []map[string]string{{"tokenHeader": "X Site Token"}, {"userHeader": "X-User:"}, {"tokenHeader": "none"}} {
		be, err := New(backends.Config{URL: gw.URL, Credentials: gatewayCreds(t, h.creds, bad)})
		require.NoError(t, err)
		err = be.(backends.Validator).Validate(testJob(hello))
		require.ErrorIs(t, err, backends.ErrInvalid, bad)
		assert.Contains(t, err.Error(), "credentials")
	}
}

// bearerGateway is a gateway that forwards only Authorization (and the
// body's Content-Type) to slurmrestd at target, as some sites' gateways do:
// every X-SLURM-* header is dropped on the way.
func bearerGateway(t *testing.T, target string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keep := http.Header{}
		for _, k := range []string{"Authorization", "Content-Type", "Accept"} {
			if v := r.Header.Get(k); v != "" {
				keep.Set(k, v)
			}
		}
		r.Header = keep
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(gw.Close)
	return gw
}

// Authorization: Bearer through a gateway that forwards nothing else: 24.11
// and 26.11 (v0.0.46) take it; 22.05 does not, and the error says what to
// change without repeating the token.
func TestBearerTokenThroughAGateway(t *testing.T) {
	for _, release := range []string{"24.11.7", "26.11.0", "22.05.8"} {
		t.Run(release, func(t *testing.T) {
			h := newHarness(t, release, "/")
			gw := bearerGateway(t, h.f.URL)
			creds := gatewayCreds(t, h.creds, map[string]string{"tokenHeader": "Authorization"})
			be, err := New(backends.Config{URL: gw.URL, Credentials: creds})
			require.NoError(t, err)
			id, err := be.Submit(context.Background(), testJob(hello))
			if release == "22.05.8" {
				require.ErrorIs(t, err, backends.ErrAuth)
				assert.Equal(t, `GET /slurm/v0.0.46/ping: HTTP 401 Unauthorized: slurmrestd did not accept the token as Authorization: Bearer (Slurm 22.05 and older read it only from X-SLURM-USER-TOKEN; 23.02 and later take either): remove tokenHeader, or have the gateway forward X-SLURM-USER-TOKEN; check the key "tokenHeader" in the credentials Secret: credentials refused`, err.Error())
				return
			}
			require.NoError(t, err)
			_, err = be.Status(context.Background(), id)
			require.NoError(t, err)
			want := releases[release][len(releases[release])-1]
			assert.Contains(t, h.f.reqs(), "POST /slurm/"+want.String()+"/job/submit")
		})
	}
	// slurmrestd refuses a token in both headers as ambiguous.
	h := newHarness(t, "26.11.0", "/")
	tok, _ := h.creds.Get("token")
	req, _ := http.NewRequest(http.MethodGet, h.f.URL+"/slurm/v0.0.46/ping/", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-SLURM-USER-TOKEN", tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
