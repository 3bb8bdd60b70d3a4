package slurm

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// redirectHarness is a backend whose slurmrestd sits behind a Redirector.
func redirectHarness(t *testing.T, tls bool) (*fakeSlurm, *testutil.Redirector, *Backend) {
	f := newFake(t, "24.11.7")
	rd := testutil.NewRedirector(t, f.URL, tls)
	be, err := New(backends.Config{URL: rd.Front.URL, HTTPClient: rd.Front.Client(),
		Credentials: testutil.NewCreds(map[string]string{"username": "bridge", "token": f.goodToken()})})
	require.NoError(t, err)
	return f, rd, be.(*Backend)
}

// TestRedirectNeverCarriesTheToken: slurmrestd (or a proxy before it)
// redirecting a submit or a status read to another origin gets a refusal
// naming the redirect, exit 2; the other origin sees no request at all, so
// neither X-SLURM-USER-TOKEN nor the script. Before, Go's client re-sent
// the custom token header on every code and the body on 307/308.
func TestRedirectNeverCarriesTheToken(t *testing.T) {
	for _, c := range testutil.RedirectCases {
		for _, code := range testutil.RedirectCodes {
			for _, op := range []string{"submit", "status"} {
				t.Run(fmt.Sprintf("%s/%d/%s", c.Name, code, op), func(t *testing.T) {
					t.Parallel()
					f, rd, be := redirectHarness(t, c.TLS)
					rd.Set(code, func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/job/") },
						testutil.To(c.Dest(rd)))
					var err error
					if op == "submit" {
						_, err = be.Submit(context.Background(), testJob(hello))
					} else {
						_, err = be.Status(context.Background(), "100")
					}
					method := map[string]string{"submit": "POST", "status": "GET"}[op]
					testutil.RequireRefusedRedirect(t, err, rd, c, "slurmrestd", method+" /slurm/v0.0.42/job/", "resourceURL")
					f.mu.Lock()
					assert.Empty(t, f.jobs, "nothing was submitted")
					f.mu.Unlock()
				})
			}
		}
	}
}

// TestRedirectLoopIsBoundedAndNamed: a redirect to itself stops after
// httpx.MaxRedirects, and says so.
func TestRedirectLoopIsBoundedAndNamed(t *testing.T) {
	_, rd, be := redirectHarness(t, false)
	rd.Set(http.StatusFound, func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/job/") }, testutil.Loop)
	_, err := be.Status(context.Background(), "100")
	require.Error(t, err)
	assert.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "slurmrestd redirected GET /slurm/")
	assert.Contains(t, err.Error(), "more than 5 times (a redirect loop?)")
	assert.Equal(t, 6, rd.Redirected(), "the request and 5 redirects, then it stops")
}

// TestRedirectWithinTheOriginIsFollowed: a slash added on the same origin
// (what slurmrestd and proxies do) keeps working, body and token included.
func TestRedirectWithinTheOriginIsFollowed(t *testing.T) {
	for _, tls := range []bool{false, true} {
		f, rd, be := redirectHarness(t, tls)
		rd.Set(http.StatusPermanentRedirect, func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/job/") }, testutil.Slash)
		id, err := be.Submit(context.Background(), testJob(hello))
		require.NoError(t, err)
		assert.Equal(t, hello, f.job(id).script, "the body followed the 308")
		rd.Set(http.StatusMovedPermanently, func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/job/") }, testutil.Slash)
		_, err = be.Status(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, 2, rd.Redirected())
	}
}
