package slurm

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

const hostileSecret = "pw-Hostile-9f3a"

// slurmShapes is slurmrestd's documented error shape (and 22.05's
// error_code variant), with the reason in every text field.
var slurmShapes = map[string]func(string) (string, string){
	"errors": func(r string) (string, string) {
		q := testutil.JSONString(r)
		return "application/json", `{"meta":{},"errors":[{"description":` + q + `,"error_number":2000,"error":` + q + `,"source":` + q + `}]}`
	},
	"error_code": func(r string) (string, string) {
		return "application/json", `{"errors":[{"error_code":1007,"error":` + testutil.JSONString(r) + `}]}`
	},
	"not the shape": func(r string) (string, string) {
		return "application/json", `{"message":` + testutil.JSONString(r) + `,"detail":` + testutil.JSONString(r) + `}`
	},
}

// TestHostileBodiesStayOutOfMessages: an answer that echoes the token, in
// any encoding the scrubber misses, puts none of it into the error, on
// discovery, submit, status and cancel, whatever the status. Before, a
// non-JSON body was copied (clipped at 300 bytes) and every error's
// description and error were joined in.
func TestHostileBodiesStayOutOfMessages(t *testing.T) {
	f := newFake(t, "24.11.7")
	rd := testutil.NewRedirector(t, f.URL, false)
	creds := testutil.NewCreds(map[string]string{"username": "bridge", "token": f.goodToken()})
	id, err := newHostile(t, rd, creds, "/slurm/v0.0.42/").Submit(context.Background(), testJob(hello))
	require.NoError(t, err)
	ops := map[string]func(be *Backend) error{
		"submit": func(be *Backend) error { _, err := be.Submit(context.Background(), testJob(hello)); return err },
		"status": func(be *Backend) error { _, err := be.Status(context.Background(), id); return err },
		"cancel": func(be *Backend) error { return be.Cancel(context.Background(), id) },
	}
	seen := 0
	for _, hb := range testutil.HostileBodies(hostileSecret, slurmShapes) {
		for _, status := range []int{400, 404, 422, 500, 502} {
			rd.Answer(nil, status, hb.ContentType, hb.Body)
			for name, op := range ops {
				for _, suffix := range []string{"/slurm/v0.0.42/", ""} { // pinned, and discovering
					err := op(newHostile(t, rd, creds, suffix))
					require.Error(t, err, "%s %s %d", hb.Name, name, status)
					assert.Empty(t, testutil.Leaks(err.Error(), hostileSecret), "%s %s %d: %s", hb.Name, name, status, err)
					seen++
				}
			}
		}
	}
	rd.Answer(nil, 0, "", "")
	t.Logf("%d failed answers, no leak", seen)
}

func newHostile(t *testing.T, rd *testutil.Redirector, creds backends.Credentials, suffix string) *Backend {
	be, err := New(backends.Config{URL: rd.Front.URL + suffix, HTTPClient: rd.Front.Client(), Credentials: creds})
	require.NoError(t, err)
	return be.(*Backend)
}

// TestFailedAnswerWording: the documented reason is kept (as words), any
// other body is named as not shown.
func TestFailedAnswerWording(t *testing.T) {
	f := newFake(t, "24.11.7")
	rd := testutil.NewRedirector(t, f.URL, false)
	be := newHostile(t, rd, testutil.NewCreds(map[string]string{"username": "bridge", "token": f.goodToken()}), "/slurm/v0.0.42/")
	rd.Answer(nil, http.StatusBadGateway, "text/html", "<html>proxy error</html>")
	_, err := be.Status(context.Background(), "100")
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Equal(t, "GET /slurm/v0.0.42/job/100: HTTP 502 from slurmrestd (body not in the documented error shape, not shown); slurmctld's log says more", err.Error())
	_, body := slurmShapes["errors"]("Invalid partition name specified")
	rd.Answer(nil, http.StatusInternalServerError, "application/json", body)
	_, err = be.Submit(context.Background(), testJob(hello))
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.True(t, strings.HasSuffix(err.Error(), "HTTP 500 from slurmrestd: Invalid partition name specified (error 2000)"), err.Error())
}
