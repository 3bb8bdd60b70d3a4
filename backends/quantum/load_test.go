package quantum

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

var _ backends.LoadProber = (*Backend)(nil)

// TestProbeLoad: against the fake service, a probe is one GET of the
// backend's status (after IAM's token); the queue moves with the jobs
// queued there; a paused backend does not fit; an unknown one is invalid;
// no backend named is invalid; a service nobody answers is transient.
func TestProbeLoad(t *testing.T) {
	h := newHarness(t)
	h.f.Queued = map[string]int{"ibm_torino": 7}
	job := samplerJob()
	load, err := h.b.ProbeLoad(ctx, job, nil)
	require.NoError(t, err)
	want := backends.UnknownLoad("ibm_torino")
	want.PendingJobs = 7
	assert.Equal(t, want, load)
	assert.Equal(t, 1, h.f.Count("POST /identity/token"))
	assert.Equal(t, ProbeRequests, h.f.Count("GET /api/v1/backends/ibm_torino/status"))

	for range 2 {
		_, err := h.b.Submit(ctx, job)
		require.NoError(t, err)
	}
	before := len(h.f.Requests)
	load, err = h.b.ProbeLoad(ctx, job, nil)
	require.NoError(t, err)
	assert.Equal(t, 9, load.PendingJobs, "two more queued")
	assert.Equal(t, ProbeRequests, len(h.f.Requests)-before, "requests of one probe with a token kept")

	h.f.Paused = map[string]bool{"ibm_torino": true}
	load, err = h.b.ProbeLoad(ctx, job, nil)
	require.NoError(t, err)
	assert.False(t, load.Fits)
	assert.Equal(t, "the quantum backend ibm_torino is paused", load.Why)

	job.Properties = []byte(`{"program_id":"sampler","backend":"ibm_nowhere"}`)
	_, err = h.b.ProbeLoad(ctx, job, nil)
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "ibm_nowhere")
	job.Properties = []byte(`{"program_id":"sampler"}`)
	_, err = h.b.ProbeLoad(ctx, job, nil)
	require.ErrorIs(t, err, backends.ErrInvalid)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	be, err := New(backends.Config{URL: "https://" + addr + "/api/v1", Credentials: h.creds, HTTPClient: h.f.Client()})
	require.NoError(t, err)
	_, err = be.(*Backend).ProbeLoad(ctx, samplerJob(), nil)
	require.True(t, errors.Is(err, backends.ErrTransient), "%v", err)
}

// TestProbeLoadHostile: whatever the status route answers (an echo of the
// API key in any encoding, as text, HTML or the error shapes, or a huge
// body), the probe's error quotes none of it.
func TestProbeLoadHostile(t *testing.T) {
	f := fakequantum.New(t)
	f.APIKey = hostileSecret
	rd := testutil.NewRedirector(t, f.URL, true)
	creds := testutil.NewCreds(map[string]string{"crn": f.CRN, "apikey": hostileSecret, "iam_url": rd.Front.URL + "/identity/token"})
	bodies := testutil.HostileBodies(hostileSecret, quantumShapes)
	bodies = append(bodies, testutil.HostileBody{Name: "huge", ContentType: "application/json", Body: `{"state":true,"pad":"` + strings.Repeat(hostileSecret, 1<<20) + `"}`})
	seen := 0
	for _, hb := range bodies {
		for _, status := range []int{200, 400, 404, 500} {
			rd.Answer(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/status") }, status, hb.ContentType, hb.Body)
			be, err := New(backends.Config{URL: rd.Front.URL + "/api/v1", HTTPClient: rd.Front.Client(), Credentials: creds})
			require.NoError(t, err)
			_, err = be.(*Backend).ProbeLoad(ctx, samplerJob(), nil)
			if hb.Name == "huge" && status == 200 {
				require.Error(t, err, "a status answer larger than any the service sends")
				t.Logf("huge answer: %v", err)
			}
			if err == nil {
				continue
			}
			assert.Empty(t, testutil.Leaks(err.Error(), hostileSecret), "%s %d: %s", hb.Name, status, err)
			seen++
		}
	}
	assert.Greater(t, seen, 0)
	t.Logf("%d failed answers, no leak", seen)
}
