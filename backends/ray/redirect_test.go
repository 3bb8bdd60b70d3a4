package ray

import (
	"bytes"
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

const redirectToken = "s3cr3t-ray-token"

// redirectHarness is a backend, in token mode, whose dashboard sits behind
// a Redirector; the job testKey exists and is running.
func redirectHarness(t *testing.T, tls bool) (*fakeRay, *testutil.Redirector, *Backend) {
	f := newFakeRay(t)
	f.token = redirectToken
	rd := testutil.NewRedirector(t, f.URL, tls)
	be, err := New(backends.Config{URL: rd.Front.URL, HTTPClient: rd.Front.Client(),
		Credentials: &memCreds{m: map[string]string{"token": redirectToken}}})
	require.NoError(t, err)
	return f, rd, be.(*Backend)
}

// TestRedirectNeverCarriesTheToken: the dashboard (or a proxy before it)
// redirecting a submit, a status read or the log stream's WebSocket to
// another origin is refused, named, exit 2; the other origin sees no
// request. Before, Go's client sent the bearer token on to another port of
// the same host and from https down to http, and the log stream's failed
// handshake was reported as the redirect's body.
func TestRedirectNeverCarriesTheToken(t *testing.T) {
	ops := map[string]string{"submit": "POST /api/jobs/", "status": "GET /api/jobs/" + testKey, "logs": "GET /api/jobs/" + testKey + "/logs/tail"}
	for _, c := range testutil.RedirectCases {
		for _, code := range testutil.RedirectCodes {
			for op, path := range ops {
				t.Run(fmt.Sprintf("%s/%d/%s", c.Name, code, op), func(t *testing.T) {
					t.Parallel()
					f, rd, be := redirectHarness(t, c.TLS)
					if op != "submit" {
						_, err := be.Submit(context.Background(), pyJob("print(1)"))
						require.NoError(t, err)
					}
					rd.Set(code, func(r *http.Request) bool { return r.Method+" "+r.URL.Path == path }, testutil.To(c.Dest(rd)))
					var err error
					switch op {
					case "submit":
						_, err = be.Submit(context.Background(), pyJob("print(1)"))
					case "status":
						_, err = be.Status(context.Background(), testKey)
					default:
						_, err = be.ReadLogs(context.Background(), testKey, 0, &bytes.Buffer{})
					}
					testutil.RequireRefusedRedirect(t, err, rd, c, "the Ray dashboard", path, "resourceURL")
					if op == "submit" {
						f.mu.Lock()
						assert.Empty(t, f.jobs, "nothing was submitted")
						f.mu.Unlock()
					}
				})
			}
		}
	}
}

func TestRedirectLoopIsBoundedAndNamed(t *testing.T) {
	for _, op := range []string{"status", "logs"} {
		_, rd, be := redirectHarness(t, false)
		_, err := be.Submit(context.Background(), pyJob("print(1)"))
		require.NoError(t, err)
		rd.Set(http.StatusFound, func(r *http.Request) bool { return r.Method == http.MethodGet }, testutil.Loop)
		if op == "status" {
			_, err = be.Status(context.Background(), testKey)
		} else {
			_, err = be.ReadLogs(context.Background(), testKey, 0, &bytes.Buffer{})
		}
		testutil.RequireFieldError(t, err, "resourceURL")
		assert.Contains(t, err.Error(), "the Ray dashboard redirected GET /api/jobs/"+testKey)
		assert.Contains(t, err.Error(), "more than 5 times (a redirect loop?)")
		assert.Equal(t, 6, rd.Redirected(), op)
	}
}

// TestRedirectWithinTheOriginIsFollowed: a slash added on the same origin
// keeps working for the REST calls and the log stream.
func TestRedirectWithinTheOriginIsFollowed(t *testing.T) {
	for _, tls := range []bool{false, true} {
		f, rd, be := redirectHarness(t, tls)
		rd.Set(http.StatusPermanentRedirect, func(r *http.Request) bool { return !strings.HasSuffix(r.URL.Path, "/") }, testutil.Slash)
		_, err := be.Submit(context.Background(), pyJob("print(1)"))
		require.NoError(t, err)
		f.set(testKey, func(j *fakeJob) { j.status = "RUNNING"; j.logs = "hello\n" })
		_, err = be.Status(context.Background(), testKey)
		require.NoError(t, err)
		var out bytes.Buffer
		readUntil(t, be, 0, &out, len("hello\n"))
		assert.Equal(t, "hello\n", out.String())
		assert.Equal(t, 2, rd.Redirected(), "the status read and the log stream")
	}
}
