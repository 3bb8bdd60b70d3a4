package lsf

import (
	"encoding/xml"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

const hostileSecret = "pw-Hostile-9f3a"

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// lsfShapes are Application Center's documented error shapes.
var lsfShapes = map[string]func(string) (string, string){
	"xml": func(r string) (string, string) {
		return "application/xml", "<error><message>" + xmlText(r) + "</message></error>"
	},
	"json": func(r string) (string, string) {
		return "application/json", `{"message":` + testutil.JSONString(r) + `}`
	},
	"not the shape": func(r string) (string, string) {
		return "application/xml", "<fault><" + r[len(r)-8:] + ">" + xmlText(r) + "</fault>"
	},
}

// TestHostileBodiesStayOutOfMessages: answers that echo the password (at
// logon) or anything else, in any encoding, put none of it into the error.
// Before, a text body was copied (clipped at 300 bytes) and the XML
// decoder's error quoted the server's element names.
func TestHostileBodiesStayOutOfMessages(t *testing.T) {
	f := fakelsf.New(t, false)
	rd := testutil.NewRedirector(t, f.URL, false)
	creds := testutil.NewCreds(map[string]string{"username": f.User, "password": hostileSecret})
	f.Pass = hostileSecret
	newBE := func() *Backend {
		be, err := New(backends.Config{URL: rd.Front.URL, HTTPClient: rd.Front.Client(), Credentials: creds})
		require.NoError(t, err)
		return be.(*Backend)
	}
	id, err := newBE().Submit(ctx, testJob("#!/bin/sh\n"))
	require.NoError(t, err)
	paths := map[string]string{"logon": "/ws/logon", "submit": "/ws/jobs/submit", "status": "/ws/jobs/" + id,
		"statusMany": "/ws/jobs/" + id + ",999999"}
	seen := 0
	for _, hb := range testutil.HostileBodies(hostileSecret, lsfShapes) {
		for _, status := range []int{200, 400, 403, 404, 500, 502} {
			for name, path := range paths {
				if status == 200 && name == "status" {
					continue
				}
				rd.Answer(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, path) }, status, hb.ContentType, hb.Body)
				be := newBE()
				_, err := be.Submit(ctx, testJob("#!/bin/sh\n"))
				switch name {
				case "status":
					_, err = be.Status(ctx, id)
				case "statusMany":
					_, err = be.StatusMany(ctx, []string{id, "999999"})
				}
				if err == nil { // a 404 of the job list falls back to the history, or means none is listed
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
	f := fakelsf.New(t, false)
	rd := testutil.NewRedirector(t, f.URL, false)
	be, err := New(backends.Config{URL: rd.Front.URL, HTTPClient: rd.Front.Client(),
		Credentials: testutil.NewCreds(map[string]string{"username": f.User, "password": f.Pass})})
	require.NoError(t, err)
	rd.Answer(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/submit") }, http.StatusBadGateway, "text/plain", "upstream down")
	_, err = be.Submit(ctx, testJob("#!/bin/sh\n"))
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Contains(t, err.Error(), "POST /ws/jobs/submit: HTTP 502 from Application Center (body not in the documented error shape, not shown)")
	_, body := lsfShapes["xml"]("Queue normal is closed")
	rd.Answer(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/submit") }, http.StatusBadRequest, "application/xml", body)
	_, err = be.Submit(ctx, testJob("#!/bin/sh\n"))
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "Application Center refused the job: Queue normal is closed")
	// A 5xx that mentions a token is the server's trouble, not a refused
	// session: transient, not ErrAuth after a second logon.
	_, body = lsfShapes["json"]("token store unavailable")
	rd.Answer(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/submit") }, http.StatusInternalServerError, "application/json", body)
	_, err = be.Submit(ctx, testJob("#!/bin/sh\n"))
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.NotErrorIs(t, err, backends.ErrAuth)
}
