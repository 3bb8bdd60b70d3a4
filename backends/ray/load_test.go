package ray

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// TestProbeLoadFake: against the fake dashboard, a probe is two requests;
// a RUNNING job holds the one CPU; a dashboard without the route gives
// unknown counts; a 200 that is not the status is transient, quoting
// nothing.
func TestProbeLoadFake(t *testing.T) {
	f := newFakeRay(t)
	b := newBackend(t, f, nil)
	load, err := b.ProbeLoad(context.Background(), pyJob("print(1)"), nil)
	require.NoError(t, err)
	require.Equal(t, backends.Load{Fits: true, FreeCPUs: 1, TotalCPUs: 1, FreeNodes: 1, TotalNodes: 1, RunningJobs: 1, PendingCPUs: -1}, load)
	// RunningJobs: the fake lists a running driver (ray.init) beside submitted jobs.
	require.Equal(t, []string{"GET /api/cluster_status", "GET /api/jobs/"}, f.requests)
	_, err = b.Submit(context.Background(), pyJob("print(1)"))
	require.NoError(t, err)
	f.set(testKey, func(j *fakeJob) { j.status = rayRunning })
	load, err = b.ProbeLoad(context.Background(), withProps(pyJob("print(1)"), `{"entrypoint_num_cpus":2}`), nil)
	require.NoError(t, err)
	require.Equal(t, backends.Load{Fits: false, Why: "the entrypoint asks for 2 CPU and the whole cluster has 1", TotalCPUs: 1, TotalNodes: 1, RunningJobs: 2, PendingCPUs: -1, JobCPUs: 2}, load)

	rd := testutil.NewRedirector(t, f.URL, false)
	b2, _ := countedBackend(t, rd.Front.URL, nil)
	rd.Answer(func(r *http.Request) bool { return r.URL.Path == "/api/cluster_status" }, 404, "text/plain", "404: Not Found")
	load, err = b2.ProbeLoad(context.Background(), pyJob("print(1)"), nil)
	require.NoError(t, err)
	require.Equal(t, -1, load.TotalCPUs)
	require.True(t, load.Fits)
	rd.Answer(func(r *http.Request) bool { return r.URL.Path == "/api/cluster_status" }, 200, "application/json", `{"secret":"pw-Hostile-9f3a"}`)
	_, err = b2.ProbeLoad(context.Background(), pyJob("print(1)"), nil)
	require.ErrorIs(t, err, backends.ErrTransient)
	require.NotContains(t, err.Error(), "Hostile")
}

// TestMeasureKeepsOnlyResourceNames: a cluster status whose resource
// names are text (here a password and a line break) publishes figures
// under plain resource names only.
func TestMeasureKeepsOnlyResourceNames(t *testing.T) {
	f := newFakeRay(t)
	rd := testutil.NewRedirector(t, f.URL, false)
	b, _ := countedBackend(t, rd.Front.URL, nil)
	rd.Answer(func(r *http.Request) bool { return r.URL.Path == "/api/cluster_status" }, 200, "application/json",
		`{"result":true,"data":{"clusterStatus":{"loadMetricsReport":{"usage":{"CPU":[0,4],"password is pw-Hostile-9f3a":[0,1],"a\nb":[0,1]},"usageByNode":{"n1":{"CPU":[0,4]}}}}}}`)
	m, err := b.MeasureLoad(context.Background())
	require.NoError(t, err)
	require.NotContains(t, m, "Hostile")
	require.NotContains(t, m, `\n`)
	load, err := b.LoadFrom(m, pyJob("print(1)"), nil)
	require.NoError(t, err)
	require.Equal(t, 4, load.TotalCPUs)
}
