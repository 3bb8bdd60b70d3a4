package lsf

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

var _ backends.LoadProber = (*Backend)(nil)

func queueJob(queue string) backends.Job {
	j := testJob("#!/bin/sh\nsleep 1\n")
	if queue != "" {
		j.Properties = json.RawMessage(`{"queue":"` + queue + `"}`)
	}
	return j
}

// TestProbeLoad: against the fake Application Center, a probe is one POST
// ws/queues/getfullinfo (after the logon); the counts move with the jobs
// in the queue, in JSON and in XML; an inactive or closed queue does not
// fit; an unknown queue is invalid; no queue gives unknown counts; a
// server nobody answers is transient.
func TestProbeLoad(t *testing.T) {
	h := newHarness(t)
	load, err := h.b.ProbeLoad(ctx, queueJob("normal"), nil)
	require.NoError(t, err)
	want := backends.UnknownLoad("normal")
	want.PendingJobs, want.RunningJobs = 0, 0
	assert.Equal(t, want, load)
	assert.Equal(t, 1, h.f.Count("POST /platform/ws/logon"))
	assert.Equal(t, ProbeRequests, h.f.Count("POST /platform/ws/queues/getfullinfo"))

	var ids []int
	for range 3 {
		id, _ := h.submit(t, queueJob("normal"))
		ids = append(ids, jobID(t, id))
	}
	h.f.Set(ids[0], func(j *fakelsf.Job) { j.Status = "RUN" })
	h.f.Set(ids[1], func(j *fakelsf.Job) { j.Status = "PEND" })
	h.f.Set(ids[2], func(j *fakelsf.Job) { j.Status = "PEND" })
	before := len(h.f.Requests)
	load, err = h.b.ProbeLoad(ctx, queueJob("normal"), nil)
	require.NoError(t, err)
	assert.Equal(t, ProbeRequests, len(h.f.Requests)-before, "requests of one probe with a session kept")
	assert.Equal(t, 2, load.PendingJobs)
	assert.Equal(t, 1, load.RunningJobs)
	assert.True(t, load.Fits)

	for queue, why := range map[string]string{"night": "the LSF queue night is inactive (it starts no job)",
		"retired": "the LSF queue retired is closed (it accepts no new job)"} {
		load, err = h.b.ProbeLoad(ctx, queueJob(queue), nil)
		require.NoError(t, err)
		assert.False(t, load.Fits, queue)
		assert.Equal(t, why, load.Why)
	}
	_, err = h.b.ProbeLoad(ctx, queueJob("nosuch"), nil)
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), `"nosuch"`)
	load, err = h.b.ProbeLoad(ctx, queueJob(""), nil)
	require.NoError(t, err)
	assert.Equal(t, backends.UnknownLoad(""), load)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	be, err := New(backends.Config{URL: "https://" + addr, Credentials: h.creds, HTTPClient: h.f.Client()})
	require.NoError(t, err)
	_, err = be.(*Backend).ProbeLoad(ctx, queueJob("normal"), nil)
	require.True(t, errors.Is(err, backends.ErrTransient), "%v", err)
}

// TestQueueLoadXMLAndBits: the XML answer reads as the JSON one, a
// numeric status is read as the LSF API's qStatus bits, and a queue the
// answer does not list is invalid.
func TestQueueLoadXMLAndBits(t *testing.T) {
	doc, err := decodeDoc([]byte(`<queues total="2"><atom:link href="self" rel="x"/><queue><queueName>a</queueName><numPend>4</numPend><numRun>2</numRun><status>Open:Active</status></queue>` +
		`<queue><queueName>b</queueName><numPend>0</numPend><numRun>0</numRun><status>1</status></queue></queues>`))
	require.NoError(t, err)
	m := queuesOf(doc)
	load, err := judgeQueue(m, "a")
	require.NoError(t, err)
	assert.Equal(t, 4, load.PendingJobs)
	assert.Equal(t, 2, load.RunningJobs)
	assert.True(t, load.Fits)
	load, err = judgeQueue(m, "b")
	require.NoError(t, err)
	assert.False(t, load.Fits, "qStatus 1: open, not active")
	_, err = judgeQueue(m, "c")
	require.ErrorIs(t, err, backends.ErrInvalid, "every queue is listed: one not among them does not exist")
}

// TestProbeLoadHostile: whatever the queue route answers (an echo of the
// password in any encoding, or a huge body), the probe's error quotes none
// of it.
func TestProbeLoadHostile(t *testing.T) {
	f := fakelsf.New(t, false)
	rd := testutil.NewRedirector(t, f.URL, false)
	f.Pass = hostileSecret
	creds := testutil.NewCreds(map[string]string{"username": f.User, "password": hostileSecret})
	bodies := testutil.HostileBodies(hostileSecret, lsfShapes)
	bodies = append(bodies, testutil.HostileBody{Name: "huge", ContentType: "application/json",
		Body: `{"queue":{"queueName":"normal","pad":"` + strings.Repeat(hostileSecret, 1<<20) + `"}}`})
	seen := 0
	for _, hb := range bodies {
		for _, status := range []int{200, 400, 404, 500} {
			rd.Answer(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/ws/queues/getfullinfo") }, status, hb.ContentType, hb.Body)
			be, err := New(backends.Config{URL: rd.Front.URL, HTTPClient: rd.Front.Client(), Credentials: creds})
			require.NoError(t, err)
			_, err = be.(*Backend).ProbeLoad(ctx, queueJob("normal"), nil)
			if hb.Name == "huge" && status == 200 {
				require.Error(t, err)
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

// TestLoadFromAMeasureIsTheProbe: against the fake Application Center, a
// step judging its job against the measure a cluster's agent published
// (one request) gets the Load its own probe gets, for an open queue with
// jobs, an inactive and a closed one, the default one and one LSF does not
// have (invalid either way), and sends nothing; a measure it cannot read
// is neither invalid nor transient (the step then probes).
func TestLoadFromAMeasureIsTheProbe(t *testing.T) {
	h := newHarness(t)
	id, _ := h.submit(t, queueJob("normal"))
	h.f.Set(jobID(t, id), func(j *fakelsf.Job) { j.Status = "PEND" })
	before := len(h.f.Requests)
	m, err := h.b.MeasureLoad(ctx)
	require.NoError(t, err)
	assert.Equal(t, ProbeRequests, len(h.f.Requests)-before, "requests of one measure")
	assert.NotContains(t, m, "\n", "one line")
	for _, queue := range []string{"normal", "night", "retired", "", "nosuch"} {
		want, werr := h.b.ProbeLoad(ctx, queueJob(queue), nil)
		before := len(h.f.Requests)
		got, gerr := h.b.LoadFrom(m, queueJob(queue), nil)
		assert.Equal(t, before, len(h.f.Requests), "%q: LoadFrom sends nothing", queue)
		assert.Equal(t, want, got, queue)
		assert.Equal(t, werr != nil, gerr != nil, queue)
		if werr != nil {
			assert.ErrorIs(t, gerr, backends.ErrInvalid, queue)
		}
	}
	got, err := h.b.LoadFrom(m, queueJob("normal"), nil)
	require.NoError(t, err)
	assert.Equal(t, 1, got.PendingJobs, "the measure has the queue's jobs")
	for _, bad := range []string{"", "{}", `{"f":2}`, "api=v0.0.45"} {
		_, err := h.b.LoadFrom(bad, queueJob("normal"), nil)
		require.Error(t, err, bad)
		assert.False(t, errors.Is(err, backends.ErrInvalid) || errors.Is(err, backends.ErrTransient), bad)
	}
}
