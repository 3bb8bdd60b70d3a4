package lsf

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// redirectHarness is a backend whose Application Center sits behind a
// Redirector.
func redirectHarness(t *testing.T, tls bool) (*fakelsf.Server, *testutil.Redirector, *Backend) {
	f := fakelsf.New(t, false)
	rd := testutil.NewRedirector(t, f.URL, tls)
	be, err := New(backends.Config{URL: rd.Front.URL, HTTPClient: rd.Front.Client(),
		Credentials: testutil.NewCreds(map[string]string{"username": f.User, "password": f.Pass})})
	require.NoError(t, err)
	return f, rd, be.(*Backend)
}

// TestRedirectNeverCarriesThePassword: a redirect of the logon (whose body
// is the password), of a submit or of a status read (with the session
// cookie) to another origin is refused, named, exit 2; the other origin
// sees no request. Before, a 307/308 re-sent the logon body, password
// included, and every code re-sent the Cookie to another port.
func TestRedirectNeverCarriesThePassword(t *testing.T) {
	ops := map[string]string{"logon": "POST /platform/ws/logon", "submit": "POST /platform/ws/jobs/submit", "status": "GET /platform/ws/jobs/1234",
		"statusMany": "GET /platform/ws/jobs/1234,1235"}
	for _, c := range testutil.RedirectCases {
		for _, code := range testutil.RedirectCodes {
			for op, path := range ops {
				t.Run(fmt.Sprintf("%s/%d/%s", c.Name, code, op), func(t *testing.T) {
					t.Parallel()
					f, rd, be := redirectHarness(t, c.TLS)
					rd.Set(code, func(r *http.Request) bool { return r.Method+" "+r.URL.Path == path }, testutil.To(c.Dest(rd)))
					var err error
					switch op {
					case "submit":
						_, err = be.Submit(ctx, testJob("#!/bin/sh\necho hi\n"))
					case "statusMany":
						_, err = be.StatusMany(ctx, []string{"1234", "1235"})
					default:
						_, err = be.Status(ctx, "1234")
					}
					testutil.RequireRefusedRedirect(t, err, rd, c, "Application Center", path, "resourceURL")
					f.Mu.Lock()
					assert.Empty(t, f.Submits, "nothing was submitted")
					f.Mu.Unlock()
				})
			}
		}
	}
}

func TestRedirectLoopIsBoundedAndNamed(t *testing.T) {
	_, rd, be := redirectHarness(t, true)
	rd.Set(http.StatusTemporaryRedirect, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/logon") }, testutil.Loop)
	_, err := be.Status(ctx, "1234")
	testutil.RequireFieldError(t, err, "resourceURL")
	assert.Contains(t, err.Error(), "Application Center redirected POST /platform/ws/logon more than 5 times (a redirect loop?)")
	assert.Equal(t, 6, rd.Redirected())
}

// TestRedirectWithinTheOriginIsFollowed: a slash added on the same origin
// keeps working, the logon body and the cookie included.
func TestRedirectWithinTheOriginIsFollowed(t *testing.T) {
	f, rd, be := redirectHarness(t, true)
	rd.Set(http.StatusPermanentRedirect, func(r *http.Request) bool { return r.Method == http.MethodPost }, testutil.Slash)
	id, err := be.Submit(ctx, testJob("#!/bin/sh\necho hi\n"))
	require.NoError(t, err)
	rd.Set(http.StatusFound, nil, testutil.Slash)
	_, err = be.Status(ctx, id)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rd.Redirected(), 3, "logon, submit and status were redirected")
	f.Mu.Lock()
	assert.Len(t, f.Submits, 1)
	f.Mu.Unlock()
}
