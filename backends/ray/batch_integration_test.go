package ray

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// countingTransport counts the requests that reach the network.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// waitFor polls Status until the job is in a final state or cond holds.
func waitFor(t *testing.T, be *Backend, id string, cond func(backends.Status) bool) backends.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		st, err := be.Status(ctx, id)
		if err == nil && (cond(st) || st.State.Final()) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s: %+v %v after 2 min", id, st, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestRealStatusMany: on the real Ray, one StatusMany for a finished, a
// failed and a running job and an unknown id is one request, says of each
// job what Status says, and leaves the unknown id out. It also measures
// one StatusMany against 20 Status calls.
func TestRealStatusMany(t *testing.T) {
	rr := needRay(t)
	ct := &countingTransport{next: http.DefaultTransport}
	var creds backends.Credentials
	if rr.creds != "" {
		creds = rr.creds
	}
	bb, err := New(backends.Config{URL: rr.url, Credentials: creds, HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: ct}})
	require.NoError(t, err)
	be := bb.(*Backend)
	ctx := context.Background()
	scripts := map[string]string{
		"done":    "print('done')\n",
		"failed":  "import sys\nsys.exit(2)\n",
		"running": "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.1)\n",
	}
	ids := map[string]string{}
	for name, script := range scripts {
		key := newKey(t)
		_, err := be.Submit(ctx, backends.Job{Name: "many-" + name, Key: key, Script: script})
		require.NoError(t, err)
		ids[name] = key
		t.Cleanup(func() { _ = be.Cancel(context.Background(), key) })
	}
	waitFor(t, be, ids["done"], func(backends.Status) bool { return false })
	waitFor(t, be, ids["failed"], func(backends.Status) bool { return false })
	waitFor(t, be, ids["running"], func(st backends.Status) bool { return st.State == backends.Running })

	unknown := "br-00000000000000000000"
	asked := []string{ids["done"], ids["failed"], ids["running"], unknown}
	before := ct.n.Load()
	got, err := be.StatusMany(ctx, asked)
	require.NoError(t, err)
	assert.EqualValues(t, 1, ct.n.Load()-before, "one StatusMany is one request")
	assert.NotContains(t, got, unknown)
	assert.Len(t, got, 3)
	want := map[string]backends.State{"done": backends.Done, "failed": backends.Failed, "running": backends.Running}
	for name, id := range ids {
		one, err := be.Status(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, want[name], got[id].State, name)
		assert.Equal(t, one.State, got[id].State, name)
		assert.Equal(t, one.Raw, got[id].Raw, name)
		if one.State.Final() {
			assert.Equal(t, one, got[id], "%s: an ended job's status does not change between the two reads", name)
		}
	}

	// The figure: 20 jobs' states by one StatusMany or by 20 Status calls.
	var twenty []string
	for i := 0; i < 20; i++ {
		twenty = append(twenty, asked[i%3])
	}
	before = ct.n.Load()
	t0 := time.Now()
	for _, id := range twenty {
		_, err := be.Status(ctx, id)
		require.NoError(t, err)
	}
	each := time.Since(t0)
	singles := ct.n.Load() - before
	before = ct.n.Load()
	t0 = time.Now()
	got, err = be.StatusMany(ctx, append(twenty, unknown))
	require.NoError(t, err)
	many := time.Since(t0)
	assert.EqualValues(t, 1, ct.n.Load()-before)
	assert.Len(t, got, 3)
	resp, err := be.do(ctx, http.MethodGet, "/api/jobs/", nil)
	require.NoError(t, err)
	list, err := parseJobList(resp.body)
	require.NoError(t, err)
	t.Logf("20 Status: %d requests, %s; one StatusMany of 20 ids: 1 request, %s (Ray lists %d jobs, %d bytes)",
		singles, each.Round(time.Millisecond), many.Round(time.Millisecond), len(list), len(resp.body))
}

// TestRealStatusManyWithToken: the list request carries the token like
// every other; without it Ray refuses the list as it refuses a job's read.
func TestRealStatusManyWithToken(t *testing.T) {
	rr := needRayAt(t, "BRIDGE_TEST_RAY_AUTH")
	be := rr.backend(t)
	got, err := be.StatusMany(context.Background(), []string{"br-00000000000000000000"})
	require.NoError(t, err)
	assert.Empty(t, got)
	if !rr.token {
		return // TestRealUnknownJobAndAuth fails under CI for this
	}
	noTok, err := New(backends.Config{URL: rr.url})
	require.NoError(t, err)
	_, err = noTok.(*Backend).StatusMany(context.Background(), []string{"br-00000000000000000000"})
	require.ErrorIs(t, err, backends.ErrAuth)
	assert.Contains(t, err.Error(), "listing ray jobs")
}
