package slurm

import (
	"context"
	"errors"
	"fmt"
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
		"probe": func(be *Backend) error {
			_, err := be.ProbeLoad(context.Background(), testJob(hello), nil)
			return err
		},
		"statusMany": func(be *Backend) error {
			m, err := be.StatusMany(context.Background(), []string{id, "999999"})
			if err == nil { // Slurm's documented "no such job" leaves them out: what it kept is checked
				return fmt.Errorf("%w: %+v", errBatchAnswered, m)
			}
			return err
		},
		"submitArray": func(be *Backend) error {
			_, err := be.SubmitArray(context.Background(), testJob(hello), backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 3}}})
			return err
		},
		"arrayStatus": func(be *Backend) error { _, err := be.ArrayStatus(context.Background(), id); return err },
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

// errBatchAnswered marks a batched status that took a failed answer as
// "none of these jobs is known" (Slurm's documented error shape for it):
// no error, so the statuses it kept are what is checked for leaks.
var errBatchAnswered = errors.New("answered")

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

// TestHostileProbeAnswers: each of the probe's three GETs answering with a
// hostile or unreadable body (a 200 that is not slurmrestd's JSON, a large
// one, an error shape at 500) fails the probe with an error that names the
// request and quotes none of it; a 5xx is transient (unless its error
// number says the credentials were refused), and for the queue (jobs/)
// leaves only the job counts unknown.
func TestHostileProbeAnswers(t *testing.T) {
	f := newFake(t, "24.11.7")
	rd := testutil.NewRedirector(t, f.URL, false)
	creds := testutil.NewCreds(map[string]string{"username": "bridge", "token": f.goodToken()})
	be := newHostile(t, rd, creds, "/slurm/v0.0.42/")
	l, err := be.ProbeLoad(context.Background(), testJob(hello), nil)
	require.NoError(t, err)
	require.True(t, l.Fits)
	require.Equal(t, [3]int{8, 8, 0}, [3]int{l.TotalCPUs, l.FreeCPUs, l.PendingJobs})
	large := strings.Repeat("garbage "+hostileSecret+" ", 200000) // 3.2 MB
	bodies := append(testutil.HostileBodies(hostileSecret, slurmShapes), testutil.HostileBody{Name: "large", ContentType: "application/json", Body: large})
	seen := 0
	for _, ep := range []string{"/partitions/", "/nodes/", "/jobs/"} {
		match := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ep) }
		for _, hb := range bodies {
			for _, status := range []int{200, 500, 503} {
				rd.Answer(match, status, hb.ContentType, hb.Body)
				l, err := be.ProbeLoad(context.Background(), testJob(hello), nil)
				if ep == "/jobs/" && err == nil {
					// A queue that does not come leaves its counts unknown.
					assert.Equal(t, [3]int{-1, -1, -1}, [3]int{l.PendingJobs, l.RunningJobs, l.PendingCPUs}, "%s %d", hb.Name, status)
					assert.Equal(t, 8, l.FreeCPUs)
					assert.GreaterOrEqual(t, status, 500, hb.Name)
					seen++
					continue
				}
				require.Error(t, err, "%s %s %d", ep, hb.Name, status)
				assert.Contains(t, err.Error(), ep, "%s %s %d", ep, hb.Name, status)
				assert.Empty(t, testutil.Leaks(err.Error(), hostileSecret), "%s %s %d: %s", ep, hb.Name, status, err)
				if status >= 500 { // or refused credentials, where the shape says so (error 1007)
					assert.True(t, errors.Is(err, backends.ErrTransient) || errors.Is(err, backends.ErrAuth), "%s %s %d: %s", ep, hb.Name, status, err)
				}
				seen++
			}
		}
	}
	rd.Answer(nil, 0, "", "")
	t.Logf("%d hostile answers to the probe, no leak", seen)
}
