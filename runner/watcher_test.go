package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// Tests of the cluster's watcher (watchgroup.go) against the real
// kube-apiserver: n invokes of one namespace follow n fake jobs.

// groupRun runs n jobs of the fake backend at once, each with its own
// ConfigMap record in one namespace, and returns their results.
func groupRun(t *testing.T, h *harness, n int, props string, watch runner.WatchConfig) []runner.Result {
	return groupRunWith(t, h, n, props, watch, nil)
}

// groupRunWith is groupRun with during running beside the invokes, on the
// records' namespace, until they end (its context ends then).
func groupRunWith(t *testing.T, h *harness, n int, props string, watch runner.WatchConfig,
	during func(ctx context.Context, base *record.ConfigMapStore)) []runner.Result {
	base := testkube.RecordStore(t)
	// The group's key is derived from its credentials: a group without
	// any shares nothing (see cluster.Cluster.Key).
	creds := fakeCredentials(t)
	dctx, stop := context.WithCancel(context.Background())
	var side sync.WaitGroup
	if during != nil {
		side.Add(1)
		go func() { defer side.Done(); during(dctx, base) }()
	}
	var wg sync.WaitGroup
	res := make([]runner.Result, n)
	start := time.Now()
	defer func() { t.Logf("%d jobs ran in %s", n, time.Since(start).Round(10*time.Millisecond)) }()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := fmt.Sprintf("job-%d", i)
			iv := h.invoker(h.spec(props))
			iv.JobName, iv.Holder = job, fmt.Sprintf("invoker-%d", i)
			iv.Store = &record.ConfigMapStore{Client: base.Client, Namespace: base.Namespace, Name: record.ConfigMapName(job)}
			iv.Backend.Credentials = creds
			iv.Watch = watch
			iv.Spec.UpdateInterval = "5"
			iv.MinPoll = runner.DefaultMinPoll
			// A ceiling, not a figure: an invoke that stops following its
			// job ends here (SIGTERM: the job is cancelled, KILLED).
			ctx, cancel := context.WithTimeout(context.Background(), groupRunCeiling)
			defer cancel()
			assert.NoError(t, iv.Run(ctx), job)
			res[i] = *iv.Result()
		}()
	}
	wg.Wait()
	stop()
	side.Wait()
	// The group's lease is gone with its last job.
	cms, err := testkube.Client(t).CoreV1().ConfigMaps(base.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: watcher.LabelWatchGroup})
	require.NoError(t, err)
	assert.Empty(t, cms.Items, "the watcher's lease outlived its group")
	return res
}

// fakeCredentials is a credentials directory with a token: a watch group
// is keyed on its credentials (a group without any shares nothing).
func fakeCredentials(t *testing.T) runner.DirCredentials {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("fake-token"), 0o600))
	return runner.DirCredentials{Dir: dir, Secrets: &runner.Secrets{}}
}

// groupRunCeiling bounds each invoke of groupRun: jobs of a few seconds,
// a TTL and two update intervals, several times over for a loaded machine.
const groupRunCeiling = 90 * time.Second

func statusPerJob(h *harness, n int) float64 { return float64(h.fake.Count("status")) / float64(n) }

// With the watcher, an invoke asks the backend about its own job only
// at its first poll and once per change the watcher saw; without it, it
// polls on its own backoff. Every job ends in its true state either way.
func TestWatcherBatchesAGroupsStatus(t *testing.T) {
	const n = 12
	props := `{"pending":"1s","run":"3s"}`
	on := newHarness(t, nil)
	for _, r := range groupRun(t, on, n, props, runner.WatchConfig{MaxRequestsPerSecond: 2}) {
		assert.Equal(t, "DONE", r.Status)
	}
	off := newHarness(t, nil)
	for _, r := range groupRun(t, off, n, props, runner.WatchConfig{Off: true}) {
		assert.Equal(t, "DONE", r.Status)
	}
	t.Logf("status requests per job: %.1f with the watcher (+%d batched queries), %.1f without",
		statusPerJob(on, n), on.fake.Count("statusmany"), statusPerJob(off, n))
	assert.Positive(t, on.fake.Count("statusmany"), "the watcher asked in batches")
	assert.Zero(t, off.fake.Count("statusmany"))
	assert.LessOrEqual(t, statusPerJob(on, n), 6.0, "a first poll, a few until the watcher covers the job, one per change")
	assert.Less(t, statusPerJob(on, n), statusPerJob(off, n))
	assert.Equal(t, n, on.fake.Count("submit"))
	// Jobs that end together hand the lease on as they end.
	leads := strings.Count(on.logs.String(), "watching the cluster's jobs of this group")
	t.Logf("%d invokes led the group in turn", leads)
	assert.Positive(t, leads)
}

// A watcher whose queries fail (a wrong token) or hang (a frozen
// process) lets its lease go stale: the invokes poll for themselves, and
// every job still ends in its true state.
func TestWatcherFaultsDegradeToPolling(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault error
		hold  bool
	}{
		{"queries fail", backends.Transient(fmt.Errorf("401 unauthorized")), false},
		{"queries hang", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 4
			h := newHarness(t, nil)
			h.fake.SetBatch(c.fault, c.hold)
			props := `{"run":"1s","final":"FAILED","exitCode":3}`
			for _, r := range groupRun(t, h, n, props, runner.WatchConfig{}) {
				assert.Equal(t, "FAILED", r.Status, "the true state, from the backend")
			}
			assert.Equal(t, n, h.fake.Count("submit"))
			// The watcher never answers, so each job's true end came from
			// its invoke's own polls (an invoke that waited on the watcher
			// would have met groupRun's ceiling instead). An invoke whose
			// first poll came after its 1 s job had ended (a loaded
			// machine: CI's once) needed only that one.
			assert.GreaterOrEqual(t, statusPerJob(h, n), 1.0, "each invoke polled for itself")
		})
	}
}

// An invoke whose Role names only its own record (resourceNames, as the
// operator's per-BridgeJob Role does) may not read the group's lease: it
// says so once and polls its job alone, instead of asking for the lease
// every second at Debug level.
func TestWatcherLeaseForbiddenSaidOnce(t *testing.T) {
	base := testkube.RecordStore(t)
	admin := testkube.Client(t)
	ctx := context.Background()
	cfg := testkube.ServiceAccountWithRules(t, admin, base.Namespace, "own-record",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{base.Name}, Verbs: []string{"get", "watch", "update", "delete"}},
		// create cannot be narrowed to a name; here invoke creates its record.
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	store := &record.ConfigMapStore{Client: testkube.KubeClient(t, cfg),
		Namespace: base.Namespace, Name: base.Name}
	h := newHarness(t, store)
	iv := h.invoker(h.spec(`{"run":"2s"}`))
	iv.Backend.Credentials = fakeCredentials(t)
	iv.Spec.UpdateInterval = "1"
	require.NoError(t, iv.Run(ctx))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, 1, strings.Count(h.logs.String(), "may not read the watcher's lease"), h.logs.String())
	assert.GreaterOrEqual(t, h.fake.Count("status"), 2, "it polled its job itself")
}
