package ray

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

var _ backends.LoadProber = (*Backend)(nil)

// countedBackend is a backend for url whose requests are counted.
func countedBackend(t *testing.T, url string, creds backends.Credentials) (*Backend, *countingTransport) {
	t.Helper()
	ct := &countingTransport{next: http.DefaultTransport}
	be, err := New(backends.Config{URL: url, Credentials: creds, HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: ct}})
	require.NoError(t, err)
	return be.(*Backend), ct
}

// probeCounted runs ProbeLoad and checks it sent ProbeRequests requests.
func probeCounted(t *testing.T, b *Backend, ct *countingTransport, j backends.Job) backends.Load {
	t.Helper()
	before := ct.n.Load()
	load, err := b.ProbeLoad(context.Background(), j, nil)
	require.NoError(t, err)
	require.EqualValues(t, ProbeRequests, ct.n.Load()-before, "requests of one probe")
	return load
}

// TestRealProbeLoadCountsMove: on the real Ray cluster, the quiet cluster
// shows its CPUs; with a job holding every CPU and one more waiting for a
// CPU, the probe sees none free, a job running and one pending; a job
// asking for more CPUs than the cluster has does not fit.
func TestRealProbeLoadCountsMove(t *testing.T) {
	rr := needRay(t)
	var creds backends.Credentials
	if rr.creds != "" {
		creds = rr.creds
	}
	b, ct := countedBackend(t, rr.url, creds)
	one := withProps(backends.Job{Name: "probe", Key: newKey(t), Script: "import time\ntime.sleep(120)\n"}, `{"entrypoint_num_cpus":1}`)
	base := probeCounted(t, b, ct, one)
	t.Logf("quiet cluster: %+v", base)
	require.True(t, base.Fits, "%+v", base)
	require.GreaterOrEqual(t, base.TotalCPUs, 1)
	require.GreaterOrEqual(t, base.TotalNodes, 1)
	require.Equal(t, 1, base.JobCPUs)
	require.True(t, base.FreeCPUs >= 0 && base.FreeCPUs <= base.TotalCPUs, "%+v", base)

	big := withProps(one, `{"entrypoint_num_cpus":4096}`)
	if load := probeCounted(t, b, ct, big); load.Fits || load.Why == "" {
		t.Fatalf("4096 CPUs: %+v, want Fits=false with a reason", load)
	}
	if load := probeCounted(t, b, ct, withProps(one, `{"entrypoint_resources":{"no_such_thing":1}}`)); load.Fits {
		t.Fatalf("a resource the cluster lacks: %+v, want Fits=false", load)
	}

	ctx := context.Background()
	var ids []string
	for i := 0; i < base.TotalCPUs+1; i++ {
		j := one
		j.Key = newKey(t)
		id, err := b.Submit(ctx, j)
		require.NoError(t, err)
		ids = append(ids, id)
		t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		load := probeCounted(t, b, ct, one)
		// Not against the quiet counts: other packages' tests may use the
		// cluster at the same time (go test runs packages in parallel).
		if load.FreeCPUs == 0 && load.RunningJobs >= 1 && load.PendingJobs >= 1 {
			t.Logf("loaded cluster: %+v", load)
			require.Equal(t, base.TotalCPUs, load.TotalCPUs)
			require.Equal(t, 0, load.FreeNodes)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the probe never saw the cluster full: %+v (quiet %+v)", load, base)
		}
		time.Sleep(time.Second)
	}
}

// TestProbeLoadUnreachable: a dashboard nobody listens on is transient.
func TestProbeLoadUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	b, _ := countedBackend(t, "http://"+addr, nil)
	_, err = b.ProbeLoad(context.Background(), pyJob("print(1)"), nil)
	require.True(t, errors.Is(err, backends.ErrTransient), "%v", err)
}

// TestRealProbeLoadWithToken: on the real Ray with token authentication,
// the probe sends the token (its two requests answer) and without one it
// is an authentication error naming the credential, not a transient one.
func TestRealProbeLoadWithToken(t *testing.T) {
	rr := needRayAt(t, "BRIDGE_TEST_RAY_AUTH")
	b, ct := countedBackend(t, rr.url, rr.creds)
	load := probeCounted(t, b, ct, pyJob("print(1)"))
	require.GreaterOrEqual(t, load.TotalCPUs, 1, "%+v", load)
	anon, _ := countedBackend(t, rr.url, nil)
	_, err := anon.ProbeLoad(context.Background(), pyJob("print(1)"), nil)
	require.ErrorIs(t, err, backends.ErrAuth)
	require.Contains(t, err.Error(), "token")
}
