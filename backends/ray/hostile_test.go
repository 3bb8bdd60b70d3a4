package ray

import (
	"bytes"
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

// rayShapes: Ray answers errors in plain text (a traceback, or one line),
// and some routes in JSON with "detail".
var rayShapes = map[string]func(string) (string, string){
	"traceback": func(r string) (string, string) {
		return "text/plain", "Traceback (most recent call last):\n  File \"job_head.py\", line 1\nValueError: " + r + "\n"
	},
	"detail": func(r string) (string, string) {
		return "application/json", `{"detail":` + testutil.JSONString(r) + `}`
	},
}

// TestHostileBodiesStayOutOfMessages: the dashboard echoing the token, in
// any encoding, on a REST call or the log stream's handshake, puts none
// of it into the error. Before, the body was copied whole (clipped at
// 2,000 bytes), and an unreadable 200 at 200.
func TestHostileBodiesStayOutOfMessages(t *testing.T) {
	f := newFakeRay(t)
	f.token = hostileSecret
	rd := testutil.NewRedirector(t, f.URL, false)
	be, err := New(backends.Config{URL: rd.Front.URL, HTTPClient: rd.Front.Client(),
		Credentials: &memCreds{m: map[string]string{"token": hostileSecret}}})
	require.NoError(t, err)
	b := be.(*Backend)
	_, err = b.Submit(context.Background(), pyJob("print(1)"))
	require.NoError(t, err)
	ops := map[string]func() error{
		"submit": func() error { _, err := b.Submit(context.Background(), pyJob("print(1)")); return err },
		"status": func() error { _, err := b.Status(context.Background(), testKey); return err },
		"list":   func() error { _, err := b.StatusMany(context.Background(), []string{testKey}); return err },
		"cancel": func() error { return b.Cancel(context.Background(), testKey) },
		"probe":  func() error { _, err := b.ProbeLoad(context.Background(), pyJob("print(1)"), nil); return err },
		"logs": func() error {
			b.tails = nil
			_, err := b.ReadLogs(context.Background(), testKey, 0, &bytes.Buffer{})
			return err
		},
	}
	seen := 0
	for _, hb := range testutil.HostileBodies(hostileSecret, rayShapes) {
		for _, status := range []int{200, 400, 403, 404, 500, 503} {
			rd.Answer(nil, status, hb.ContentType, hb.Body)
			for name, op := range ops {
				err := op()
				if err == nil {
					continue
				}
				assert.Empty(t, testutil.Leaks(err.Error(), hostileSecret), "%s %s %d: %s", hb.Name, name, status, err)
				seen++
			}
		}
	}
	rd.Answer(nil, 0, "", "")
	t.Logf("%d failed answers, no leak", seen)
}

func TestFailedAnswerWording(t *testing.T) {
	f := newFakeRay(t)
	rd := testutil.NewRedirector(t, f.URL, false)
	be, err := New(backends.Config{URL: rd.Front.URL, HTTPClient: rd.Front.Client()})
	require.NoError(t, err)
	rd.Answer(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/jobs/") }, http.StatusOK, "text/html", "<html>login</html>")
	_, err = be.Status(context.Background(), testKey)
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Equal(t, "reading ray job "+testKey+": HTTP 200 with an answer that is not a job's details (body not in the documented error shape, not shown)", err.Error())
}

// TestHostileAnswerWithoutStatus: a dashboard (or something in its place)
// answering a job's details with 200 and no status is a malformed answer,
// a fault the runner rides out within its retry budget and then exits 75
// on; before, it was taken for a job still RUNNING, and followed forever.
func TestHostileAnswerWithoutStatus(t *testing.T) {
	f := newFakeRay(t)
	rd := testutil.NewRedirector(t, f.URL, false)
	be, err := New(backends.Config{URL: rd.Front.URL, HTTPClient: rd.Front.Client()})
	require.NoError(t, err)
	b := be.(*Backend)
	_, err = b.Submit(context.Background(), pyJob("print(1)"))
	require.NoError(t, err)
	for _, body := range []string{`{}`, `{"job_id":"raysubmit_1","submission_id":"` + testKey + `","entrypoint":"python x.py"}`, `{"status":""}`} {
		rd.Answer(nil, http.StatusOK, "application/json", body)
		st, err := b.Status(context.Background(), testKey)
		require.Error(t, err, "%s: taken as %s", body, st.State)
		assert.ErrorIs(t, err, backends.ErrTransient)
		assert.NotErrorIs(t, err, backends.ErrInvalid, "something was submitted: never exit 2")
		assert.Contains(t, err.Error(), "no job status")
	}
}

// TestHostileStatusFields: a job's status, error_type and message that
// echo a credential (in any encoding) or are no documented value reach the
// status, its raw state and reason only as words or by their size. Before,
// an unknown status was quoted whole and the message's first line (up to
// 500 bytes of the log's last) as it came.
func TestHostileStatusFields(t *testing.T) {
	for _, f := range testutil.HostileForms(hostileSecret) {
		for _, d := range []jobDetails{
			{Status: "HIBERNATING " + f.Text, Message: ptr("node lost; " + f.Text)},
			{Status: f.Text, ErrorType: ptr(f.Text)},
			{Status: rayFailed, Message: ptr("Job failed, last available logs (truncated to 20,000 chars):\nline\nValueError: " + f.Text)},
		} {
			st := d.status()
			text := st.Raw + " " + st.Reason + " " + st.Message
			assert.Empty(t, testutil.Leaks(text, hostileSecret), "%s: %+v", f.Name, st)
		}
	}
	st := (&jobDetails{Status: "HIBERNATING"}).status()
	assert.Equal(t, "HIBERNATING", st.Raw)
	assert.Equal(t, `unrecognized Ray job state "HIBERNATING".`, st.Message)
	st = (&jobDetails{Status: "hibernating because " + hostileSecret}).status()
	assert.Equal(t, "", st.Raw)
	assert.Equal(t, "unrecognized Ray job state (35 bytes, not a state name, not shown).", st.Message)
}

func ptr(s string) *string { return &s }
