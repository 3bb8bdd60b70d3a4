package quantum

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// redirectHarness is a backend whose service and IAM sit behind a
// Redirector.
func redirectHarness(t *testing.T, tls bool) (*fakequantum.Server, *testutil.Redirector, *Backend) {
	f := fakequantum.New(t)
	rd := testutil.NewRedirector(t, f.URL, tls)
	be, err := New(backends.Config{URL: rd.Front.URL + "/api/v1", HTTPClient: rd.Front.Client(),
		Credentials: testutil.NewCreds(map[string]string{"crn": f.CRN, "apikey": f.APIKey, "iam_url": rd.Front.URL + "/identity/token"})})
	require.NoError(t, err)
	return f, rd, be.(*Backend)
}

// TestRedirectNeverCarriesTheAPIKey: IAM redirecting the token request
// (whose body is the API key), or the service redirecting a submit or a
// status read (bearer token, Service-CRN), to another origin is refused,
// named, exit 2; the other origin sees no request. Before, a 307/308 re-sent
// the API key in the IAM body and every code re-sent Service-CRN (and, to
// another port of the host, the bearer token).
func TestRedirectNeverCarriesTheAPIKey(t *testing.T) {
	type op struct{ server, path, field string }
	ops := map[string]op{"iam": {"IBM Cloud IAM", "POST /identity/token", "iam_url"},
		"submit": {"IBM Quantum", "POST /api/v1/jobs", "resourceURL"}, "status": {"IBM Quantum", "GET /api/v1/jobs/j1", "resourceURL"},
		"statusMany": {"IBM Quantum", "GET /api/v1/jobs", "resourceURL"}}
	for _, c := range testutil.RedirectCases {
		for _, code := range testutil.RedirectCodes {
			for name, o := range ops {
				t.Run(fmt.Sprintf("%s/%d/%s", c.Name, code, name), func(t *testing.T) {
					t.Parallel()
					f, rd, be := redirectHarness(t, c.TLS)
					rd.Set(code, func(r *http.Request) bool { return r.Method+" "+r.URL.Path == o.path }, testutil.To(c.Dest(rd)))
					var err error
					switch name {
					case "submit":
						_, err = be.Submit(ctx, samplerJob())
					case "statusMany":
						_, err = be.StatusMany(ctx, []string{"j1", "j2"})
					default:
						_, err = be.Status(ctx, "j1")
					}
					testutil.RequireRefusedRedirect(t, err, rd, c, o.server, o.path, o.field)
					assert.Zero(t, f.Count("POST /api/v1/jobs"), "nothing was submitted")
				})
			}
		}
	}
}

func TestRedirectLoopIsBoundedAndNamed(t *testing.T) {
	_, rd, be := redirectHarness(t, true)
	rd.Set(http.StatusSeeOther, func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/v1/jobs") }, testutil.Loop)
	_, err := be.Status(ctx, "j1")
	testutil.RequireFieldError(t, err, "resourceURL")
	assert.Contains(t, err.Error(), "IBM Quantum redirected GET /api/v1/jobs/j1 more than 5 times (a redirect loop?)")
	assert.Equal(t, 6, rd.Redirected())
}

// TestRedirectWithinTheOriginIsFollowed: a slash added on the same origin
// keeps working, the IAM body and the bearer token included.
func TestRedirectWithinTheOriginIsFollowed(t *testing.T) {
	f, rd, be := redirectHarness(t, true)
	rd.Set(http.StatusTemporaryRedirect, nil, testutil.Slash)
	id, err := be.Submit(ctx, samplerJob())
	require.NoError(t, err)
	_, err = be.Status(ctx, id)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rd.Redirected(), 3, "IAM, submit and status were redirected")
	assert.Equal(t, 1, f.Count("POST /api/v1/jobs"))
}
