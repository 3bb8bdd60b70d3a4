package slurm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// partitionsMetrics is /metrics/partitions as the real 26.05.5 writes it
// (abridged: the other metrics of each partition read alike), for debug
// with a running 2-CPU job and a held one, short with nothing.
const partitionsMetrics = `# HELP slurm_partitions Total number of partitions
# TYPE slurm_partitions gauge
slurm_partitions 2
# HELP slurm_partition_jobs Number of jobs in this partition
# TYPE slurm_partition_jobs gauge
slurm_partition_jobs{partition="debug"} 2
slurm_partition_jobs{partition="short"} 0
# HELP slurm_partition_jobs_cpus_alloc Total number of Cpus allocated by jobs
# TYPE slurm_partition_jobs_cpus_alloc gauge
slurm_partition_jobs_cpus_alloc{partition="debug"} 2
slurm_partition_jobs_cpus_alloc{partition="short"} 0
# HELP slurm_partition_jobs_pending Number of jobs in Pending state
# TYPE slurm_partition_jobs_pending gauge
slurm_partition_jobs_pending{partition="debug"} 1
slurm_partition_jobs_pending{partition="short"} 0
# HELP slurm_partition_jobs_running Number of jobs in Running state
# TYPE slurm_partition_jobs_running gauge
slurm_partition_jobs_running{partition="debug"} 1
slurm_partition_jobs_running{partition="short"} 0
slurm_partition_jobs_running{partition="other",node="x"} 7
slurm_partition_jobs_running{partition="bad"} many
slurm_partition_jobs_running{partition=unquoted} 3
`

// TestParsePartMetrics: the three counts per partition, other lines left
// out.
func TestParsePartMetrics(t *testing.T) {
	got := parsePartMetrics([]byte(partitionsMetrics))
	assert.Equal(t, map[string]partQueue{"debug": {pending: 1, running: 1, runCPUs: 2}, "short": {}}, got)
	assert.Empty(t, parsePartMetrics(nil), "a slurmctld without MetricsType answers an empty 200")
	assert.Empty(t, parsePartMetrics([]byte("<html>slurm_partition_jobs_pending{partition=\"a\"} 1")))
}

// metricsServer is a slurmctld's metrics port on loopback: it answers
// /metrics/partitions with body (and status), and counts the requests and
// the tokens it was sent.
type metricsServer struct {
	*httptest.Server
	status atomic.Int32
	body   atomic.Value
	n      atomic.Int32
	token  atomic.Value
}

func newMetricsServer(t *testing.T, body string) *metricsServer {
	m := &metricsServer{}
	m.status.Store(http.StatusOK)
	m.body.Store(body)
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.n.Add(1)
		m.token.Store(r.Header.Get("X-SLURM-USER-TOKEN"))
		if r.URL.Path != "/metrics/partitions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(int(m.status.Load()))
		_, _ = w.Write([]byte(m.body.Load().(string)))
	}))
	t.Cleanup(m.Close)
	return m
}

// metricsHarness is a 26.05 fake slurmrestd whose credentials name the
// metrics server.
func metricsHarness(t *testing.T, metricsURL string) *harness {
	h := newHarness(t, "26.05.0", "/")
	h.creds.Set("metricsURL", metricsURL)
	return h
}

// TestProbeLoadFromMetrics: with metricsURL the queue comes from
// slurmctld's /metrics/partitions, sent the token, and GET jobs/ is not
// asked at all; pending CPUs, which the metrics do not give, are unknown.
// Without metricsURL the probe reads jobs/ as before.
func TestProbeLoadFromMetrics(t *testing.T) {
	m := newMetricsServer(t, partitionsMetrics)
	h := metricsHarness(t, m.URL+"/metrics/")
	job := testJob(hello)
	job.Properties = []byte(`{"partition":"debug"}`)
	l, err := h.b.ProbeLoad(context.Background(), job, nil)
	require.NoError(t, err)
	assert.Equal(t, [4]int{1, 1, -1, 8}, [4]int{l.PendingJobs, l.RunningJobs, l.PendingCPUs, l.TotalCPUs}, "%+v", l)
	assert.EqualValues(t, 1, m.n.Load())
	tok, _ := h.creds.Get("token")
	assert.Equal(t, tok, m.token.Load())
	for _, r := range h.f.reqs() {
		assert.NotContains(t, r, "/jobs", "the queue comes from the metrics")
	}

	// A partition the metrics do not list: its counts are unknown.
	m.body.Store(strings.ReplaceAll(partitionsMetrics, `"debug"`, `"gone"`))
	l, err = h.b.ProbeLoad(context.Background(), job, nil)
	require.NoError(t, err)
	assert.Equal(t, [3]int{-1, -1, -1}, [3]int{l.PendingJobs, l.RunningJobs, l.PendingCPUs})

	h.creds.Delete("metricsURL")
	_, err = h.b.ProbeLoad(context.Background(), job, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 2, m.n.Load(), "no metricsURL: no metrics request")
}

// TestMetricsAnswers: what each answer of slurmctld's metrics makes of the
// probe. A refused token is an auth error that says what slurmctld needs;
// an empty 200 (MetricsType unset) and a 404 are the setting's fault,
// naming it; a 5xx leaves the counts unknown. None quotes the answer.
func TestMetricsAnswers(t *testing.T) {
	m := newMetricsServer(t, "")
	h := metricsHarness(t, m.URL)
	for _, c := range []struct {
		status int
		body   string
		want   error
		says   string
	}{
		{http.StatusUnauthorized, "Failed: Invalid authentication credential " + hostileSecret, backends.ErrAuth, "MetricsAuthUsers"},
		{http.StatusForbidden, hostileSecret, backends.ErrAuth, "SlurmctldHttpAuthParameters"},
		{http.StatusOK, "", backends.ErrInvalid, "MetricsType=metrics/openmetrics"},
		{http.StatusOK, "<html>" + hostileSecret + "</html>", backends.ErrInvalid, "metricsURL"},
		{http.StatusNotFound, hostileSecret, backends.ErrInvalid, "metricsURL"},
		{http.StatusInternalServerError, hostileSecret, nil, ""},
		{http.StatusServiceUnavailable, hostileSecret, nil, ""},
	} {
		m.status.Store(int32(c.status))
		m.body.Store(c.body)
		l, err := h.b.ProbeLoad(context.Background(), testJob(hello), nil)
		if c.want == nil {
			require.NoError(t, err, c.status)
			assert.Equal(t, [3]int{-1, -1, -1}, [3]int{l.PendingJobs, l.RunningJobs, l.PendingCPUs}, c.status)
			assert.Equal(t, 8, l.FreeCPUs, "the partitions still say what is free")
			continue
		}
		require.Error(t, err, c.status)
		assert.True(t, errors.Is(err, c.want), "%d: %v", c.status, err)
		assert.Contains(t, err.Error(), c.says, c.status)
		assert.Contains(t, err.Error(), "/metrics/partitions", c.status)
		assert.Empty(t, testutil.Leaks(err.Error(), hostileSecret), "%d: %s", c.status, err)
	}
}

// TestMetricsURLSetting: a metricsURL that cannot be slurmctld's is
// refused before anything is sent, naming the credentials key and never
// quoting the value (it could carry a password).
func TestMetricsURLSetting(t *testing.T) {
	m := newMetricsServer(t, partitionsMetrics)
	for _, bad := range []string{"ftp://host:6817", "http://user:" + hostileSecret + "@" + strings.TrimPrefix(m.URL, "http://"),
		m.URL + "?k=" + hostileSecret, "slurmctld:6817", "http://"} {
		h := metricsHarness(t, bad)
		_, err := h.b.ProbeLoad(context.Background(), testJob(hello), nil)
		testutil.RequireFieldError(t, err, "credentials")
		assert.Contains(t, err.Error(), "metricsURL", bad)
		assert.Empty(t, testutil.Leaks(err.Error(), hostileSecret), err.Error())
		assert.Empty(t, h.f.reqs(), "nothing sent for %q", bad)
	}
	assert.Zero(t, m.n.Load())
}
