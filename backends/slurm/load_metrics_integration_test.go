package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// withKey is the cluster's credentials plus one more key, as a site adds
// metricsURL to the Secret.
type withKey struct {
	backends.Credentials
	key, value string
}

func (c withKey) Get(names ...string) (string, error) {
	for _, n := range names {
		if n == c.key {
			return c.value, nil
		}
	}
	return c.Credentials.Get(names...)
}

// real2605 reads the 26.05 variables of hack/services.sh with the given
// infix ("" or "_NOMETRICS"); nil (the test skipped, or failed under CI)
// when they are not set.
func real2605(t *testing.T, infix string, also ...string) *realSlurm {
	t.Helper()
	env := "BRIDGE_TEST_SLURM2605" + infix
	rs := realSlurmEnv(t, env)
	missing := rs == nil
	for _, v := range also {
		missing = missing || os.Getenv(env+v) == ""
	}
	if missing {
		msg := "no real Slurm 26.05" + strings.ToLower(strings.ReplaceAll(infix, "_", " ")) + ": hack/services.sh starts it (" + env + "_URL, _CREDS, " + strings.Join(also, ", ") + ")"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	rs.name = "26.05" + infix
	return rs
}

// TestRealProbeLoadMetrics: on the real 26.05 with metrics, a probe whose
// credentials name slurmctld's metrics reads the queue from
// /metrics/partitions (partitions/ and nodes/ from slurmrestd, no jobs/)
// and counts our running 2-CPU job and our held one in the partition
// "held" as jobs/ counts them, pending CPUs unknown; on the 26.05 without
// metrics the same setting is refused, naming metricsURL and the fix, and
// without it the probe counts from jobs/ there as before.
func TestRealProbeLoadMetrics(t *testing.T) {
	rs := real2605(t, "", "_METRICS_URL")
	metrics := withKey{rs.creds, "metricsURL", os.Getenv("BRIDGE_TEST_SLURM2605_METRICS_URL")}
	b, ct := rs.backend(t, metrics)
	plain, _ := rs.backend(t, nil)
	ctx := context.Background()
	sleeper := "#!/bin/sh\nsleep 120\n"
	run, err := b.Submit(ctx, probeJob(sleeper, `{"partition":"held","cpus_per_task":2,"time_limit":3}`))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Cancel(context.Background(), run) })
	held, err := b.Submit(ctx, probeJob(sleeper, `{"partition":"held","cpus_per_task":3,"hold":true}`))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Cancel(context.Background(), held) })
	waitFor(t, b, run, time.Minute, func(st backends.Status) bool { return st.State == backends.Running || st.State.Final() })

	job := probeJob(sleeper, `{"partition":"held"}`)
	before := ct.snapshot()
	l, err := b.ProbeLoad(ctx, job, nil)
	require.NoError(t, err)
	asked := map[string]int{}
	for k, v := range ct.snapshot() {
		if d := v - before[k]; d > 0 {
			asked[k] = d
		}
	}
	t.Logf("with metrics: %v: %+v", asked, l)
	assert.Equal(t, 3, len(asked), "partitions/, nodes/ and the metrics: %v", asked)
	assert.Equal(t, 1, asked["GET /metrics/partitions"], "%v", asked)
	for k := range asked {
		assert.NotContains(t, k, "/jobs", "the queue comes from the metrics")
	}
	assert.GreaterOrEqual(t, l.RunningJobs, 1)
	assert.GreaterOrEqual(t, l.PendingJobs, 1)
	assert.Equal(t, -1, l.PendingCPUs, "the metrics do not say what pending jobs ask for")
	assert.LessOrEqual(t, l.FreeCPUs, l.TotalCPUs-2, "our running job holds 2 CPUs")

	fromJobs, err := plain.ProbeLoad(ctx, job, nil)
	require.NoError(t, err)
	t.Logf("from jobs/: %+v", fromJobs)
	assert.Equal(t, [2]int{fromJobs.RunningJobs, fromJobs.PendingJobs}, [2]int{l.RunningJobs, l.PendingJobs}, "both count the same jobs")
	assert.GreaterOrEqual(t, fromJobs.PendingCPUs, 3)

	none := real2605(t, "_NOMETRICS", "_CTLD_URL")
	nb, _ := none.backend(t, withKey{none.creds, "metricsURL", os.Getenv("BRIDGE_TEST_SLURM2605_NOMETRICS_CTLD_URL")})
	_, err = nb.ProbeLoad(ctx, job, nil)
	testutil.RequireFieldError(t, err, "credentials")
	assert.Contains(t, err.Error(), "MetricsType=metrics/openmetrics")
	nplain, _ := none.backend(t, nil)
	nl, err := nplain.ProbeLoad(ctx, job, nil)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, nl.PendingJobs, 0, "counted from jobs/: %+v", nl)
}

// BenchmarkRealProbeScale: the load probe's cost by the jobs slurmctld
// knows, on the real 26.05: held jobs are submitted to its partition
// "held" until slurmctld knows about N (BRIDGE_BENCH_PROBE_JOBS, default
// 100,1000), then probes read the queue from jobs/ and from slurmctld's
// metrics, 5 times each; it prints the median time and the bytes of one
// probe, and cancels its jobs at the end. Run with -benchtime=1x.
func BenchmarkRealProbeScale(b *testing.B) {
	rs := realSlurmEnv(b, "BRIDGE_TEST_SLURM2605")
	metricsURL := os.Getenv("BRIDGE_TEST_SLURM2605_METRICS_URL")
	if rs == nil || metricsURL == "" {
		if os.Getenv("CI") != "" {
			b.Fatal("no real Slurm 26.05 with metrics: hack/slurm2605-up.sh")
		}
		b.Skip("no real Slurm 26.05 with metrics: hack/slurm2605-up.sh")
	}
	sizes := []int{100, 1000}
	if s := os.Getenv("BRIDGE_BENCH_PROBE_JOBS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			require.NoError(b, err, "BRIDGE_BENCH_PROBE_JOBS: job counts, e.g. 100,1000")
			sizes = append(sizes, n)
		}
	}
	ctx := context.Background()
	ways := map[string]*probeWay{"jobs/": newProbeWay(b, rs, rs.creds), "metrics": newProbeWay(b, rs, withKey{rs.creds, "metricsURL", metricsURL})}
	submitter := ways["jobs/"].b
	_, err := submitter.version(ctx)
	require.NoError(b, err)
	var ours []string
	b.Cleanup(func() { cancelAll(submitter, ours) })
	for _, n := range sizes {
		for known := knownJobs(b, submitter); known < n; known++ {
			ours = append(ours, submitHeld(b, submitter))
		}
		known := knownJobs(b, submitter)
		for _, name := range []string{"jobs/", "metrics"} {
			d, bytes := ways[name].measure(b, ctx)
			b.Logf("26.05 (%s), %d jobs known: probe with the queue from %s: %s, %d bytes (median of 5)", os.Getenv("BRIDGE_TEST_SLURM2605_VERSION"), known, name, d, bytes)
			b.ReportMetric(float64(bytes), fmt.Sprintf("B/probe-%s-%d", strings.TrimSuffix(name, "/"), n))
			b.ReportMetric(float64(d.Microseconds())/1000, fmt.Sprintf("ms/probe-%s-%d", strings.TrimSuffix(name, "/"), n))
		}
	}
}

// probeWay is a backend whose requests are counted in bytes.
type probeWay struct {
	b  *Backend
	bc *byteCounter
}

func newProbeWay(tb testing.TB, rs *realSlurm, creds backends.Credentials) *probeWay {
	bc := &byteCounter{next: http.DefaultTransport}
	be, err := New(backends.Config{URL: rs.url, Credentials: creds, HTTPClient: &http.Client{Transport: bc}})
	require.NoError(tb, err)
	return &probeWay{be.(*Backend), bc}
}

// measure probes the partition "held" 5 times: the median time, the bytes
// of the last probe.
func (w *probeWay) measure(tb testing.TB, ctx context.Context) (time.Duration, int64) {
	job := probeJob("#!/bin/sh\ntrue\n", `{"partition":"held"}`)
	var ds []time.Duration
	var n int64
	for i := 0; i < 5; i++ {
		b0, start := w.bc.n.Load(), time.Now()
		_, err := w.b.ProbeLoad(ctx, job, nil)
		require.NoError(tb, err)
		ds, n = append(ds, time.Since(start)), w.bc.n.Load()-b0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2].Round(time.Microsecond), n
}

// knownJobs is how many jobs slurmctld knows (jobs/state/ without ids lists
// them all, a few dozen bytes each).
func knownJobs(tb testing.TB, b *Backend) int {
	r, err := b.do(context.Background(), http.MethodGet, b.apiPath("jobs/state/"), nil)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, r.status, "GET jobs/state/")
	var st struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	require.NoError(tb, json.Unmarshal(r.body, &st))
	return len(st.Jobs)
}

func submitHeld(tb testing.TB, b *Backend) string {
	id, err := b.Submit(context.Background(), probeJob("#!/bin/sh\ntrue\n", `{"partition":"held","hold":true}`))
	require.NoError(tb, err)
	return id
}

// cancelAll cancels ids, eight at a time.
func cancelAll(b *Backend, ids []string) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = b.Cancel(context.Background(), id)
		}()
	}
	wg.Wait()
}
