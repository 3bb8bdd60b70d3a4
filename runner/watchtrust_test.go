package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// Tests of the trust in the group's shared state (issue 38): a writer of
// the namespace's ConfigMaps who cannot read the credentials' Secret
// forges the watcher's lease, the observations in the records and the
// shared load entries in the real kube-apiserver. Nothing it writes may
// make an invoke report a wrong state, stop following its job for longer
// than one lease TTL, or exit without asking its cluster.

// forgeWatch writes, until ctx ends, a watch lease for every group of the
// namespace's records, held by "forger" and renewed every 200 ms (for an
// hour, by its own timestamps); and into every record with a job id, once
// each, an observation of it RUNNING (to keep its invoke from looking),
// then, 2 s later, DONE (to make it report an end it did not see).
//
// At its end it deletes its leases (the group's check that no lease
// outlives it is of the invokes' own).
func forgeWatch(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, forged *atomic.Int32) {
	running, done := map[string]time.Time{}, map[string]bool{}
	leases := map[string]bool{}
	defer func() {
		for name := range leases {
			_ = c.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	}()
	for ctx.Err() == nil {
		cms, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, cm := range cms.Items {
			id, group := cm.Data[record.KeyID], cm.Data[record.KeyWatchGroup]
			if id == "" || group == "" {
				continue
			}
			now := time.Now().UTC().Format(time.RFC3339Nano)
			lease := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bridge-watch-" + group,
				Labels: map[string]string{watcher.LabelWatchGroup: group}},
				Data: map[string]string{"holder": "forger", "renewed": now, "taken": now, "ttlSeconds": "3600", "okAgeMs": "0", "tag": "forged"}}
			leases[lease.Name] = true
			if _, err := c.CoreV1().ConfigMaps(ns).Update(ctx, lease, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
				_, _ = c.CoreV1().ConfigMaps(ns).Create(ctx, lease, metav1.CreateOptions{})
			}
			obs := ""
			switch at, ok := running[cm.Name]; {
			case !ok:
				running[cm.Name], obs = time.Now(), id+" RUNNING RUNNING "+now+" forged"
			case !done[cm.Name] && time.Since(at) > 2*time.Second:
				done[cm.Name], obs = true, id+" DONE COMPLETED "+now+" forged"
			}
			if obs != "" {
				patch, _ := json.Marshal(map[string]any{"data": map[string]string{record.KeyWatchObserved: obs}})
				if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, cm.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
					forged.Add(1)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Every forgery of the watcher's state is ignored: each job ends in its
// true state (FAILED, not the forged DONE), asked of the backend, and
// seen within its interval and a TTL of its end, while the forger renews
// a lease of its own and writes observations of its own throughout. Before
// the tags, the forged lease and RUNNING kept every invoke from looking
// until its context's ceiling (then KILLED).
func TestForgedWatcherStateIsIgnored(t *testing.T) {
	h := newHarness(t, nil)
	const n = 3
	const run = 6 * time.Second
	admin := testkube.Client(t)
	var forged atomic.Int32
	start := time.Now()
	res := groupRunWith(t, h, n, fmt.Sprintf(`{"run":"%s","final":"FAILED","exitCode":3}`, run), runner.WatchConfig{},
		func(ctx context.Context, base *record.ConfigMapStore) {
			forgeWatch(ctx, t, admin, base.Namespace, &forged)
		})
	took := time.Since(start)
	for _, r := range res {
		assert.Equal(t, "FAILED", r.Status, "the true state, from the backend: %s", r.Message)
	}
	require.Positive(t, forged.Load(), "the forger wrote observations")
	assert.GreaterOrEqual(t, h.fake.Count("status"), 2*n, "each invoke asked the backend itself")
	// The jobs' run, the update interval (5 s) and a TTL, twice over.
	assert.Less(t, took, 2*(run+5*time.Second+10*time.Second), "the ends were seen within a TTL and an interval")
	logs := h.logs.String()
	assert.Contains(t, logs, "does not carry the watch group's tag")
	assert.LessOrEqual(t, strings.Count(logs, "does not carry the watch group's tag"), n, "said once per invoke")
	assert.NotContains(t, logs, "forger", "the forged text is not repeated")
}

// A watcher whose batched query works and then stops answering (hangs,
// or answers 503) is trusted one TTL after its last answer at most: the
// invokes poll for themselves and see their jobs end. Before, a query
// under way counted as working, and a hanging one was re-sent at once
// when it timed out: the group never looked again.
func TestWatcherThatStopsAnsweringIsNotTrusted(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault error
		hold  bool
	}{
		{"hangs", nil, true},
		{"answers 503", backends.Transient(fmt.Errorf("GET jobs/state/: 503 Service Unavailable")), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			const n = 3
			const run = 10 * time.Second
			start := time.Now()
			res := groupRunWith(t, h, n, fmt.Sprintf(`{"run":"%s","final":"FAILED","exitCode":3}`, run), runner.WatchConfig{},
				func(ctx context.Context, _ *record.ConfigMapStore) {
					// The watcher answers for a while (the group trusts it),
					// then stops answering, well before the jobs end.
					for ctx.Err() == nil && h.fake.Count("statusmany") < 2 {
						time.Sleep(50 * time.Millisecond)
					}
					h.fake.SetBatch(c.fault, c.hold)
					<-ctx.Done()
					h.fake.SetBatch(nil, false)
				})
			took := time.Since(start)
			for _, r := range res {
				assert.Equal(t, "FAILED", r.Status, "the true state, from the backend: %s", r.Message)
			}
			assert.Positive(t, h.fake.Count("statusmany"), "the watcher asked")
			assert.Less(t, took, 2*(run+5*time.Second+10*time.Second), "the ends were seen within a TTL and an interval")
		})
	}
}

// withCredentials gives both targets a credentials file: shared load
// entries are keyed on it (a target without credentials shares nothing).
func (tc *twoClusters) withCredentials(t *testing.T) {
	for _, dir := range []string{tc.creds, filepath.Join(tc.creds, "b")} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("fake-token-"+filepath.Base(dir)), 0o600))
	}
}

// A forger's shared load entries, fresh and saying that every target
// refused the job, do not make placement exit 2 without asking either
// cluster, nor put the forger's text into a message: they do not carry
// the cluster's tag and are ignored. Before, the step exited 2 with the
// forger's words.
func TestForgedLoadEntriesAreIgnored(t *testing.T) {
	tc := newTwoClusters(t)
	tc.withCredentials(t)
	tc.a.SetLoad(loadOf(2, 4, 0), nil)
	tc.b.SetLoad(loadOf(4, 4, 0), nil)
	base := testkube.RecordStore(t)
	admin := testkube.Client(t)
	ctx := context.Background()
	place := func(job string) (*runner.Invoker, error) {
		iv := tc.invoker("")
		iv.JobName, iv.Holder = job, job
		iv.Store = &record.ConfigMapStore{Client: base.Client, Namespace: base.Namespace, Name: record.ConfigMapName(job)}
		iv.Watch.Off = true
		return iv, iv.Run(ctx)
	}
	_, err := place("first")
	require.NoError(t, err)
	cms, err := admin.CoreV1().ConfigMaps(base.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runner.LabelLoadGroup})
	require.NoError(t, err)
	require.Len(t, cms.Items, 2, "one shared-load ConfigMap per cluster")
	probes := tc.a.Count("probe") + tc.b.Count("probe")
	for _, cm := range cms.Items {
		for k := range cm.Data {
			cm.Data[k] = fmt.Sprintf(`{"at":%q,"load":{"queue":"batch"},"skip":"FORGED-TEXT refused the job"}`, time.Now().UTC().Format(time.RFC3339Nano))
		}
		_, err := admin.CoreV1().ConfigMaps(base.Namespace).Update(ctx, &cm, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	iv, err := place("second")
	require.NoError(t, err, "placement never exits 2 on shared load alone")
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.NotEmpty(t, iv.Result().Target)
	assert.Greater(t, tc.a.Count("probe")+tc.b.Count("probe"), probes, "it asked the clusters itself")
	assert.NotContains(t, iv.Result().Message, "FORGED")
	assert.NotContains(t, tc.logs.String(), "FORGED", "the forger's text is in no log either")
	said := strings.Count(tc.logs.String(), "shared load entry does not carry the cluster's tag")
	assert.True(t, said >= 1 && said <= 2, "said once per target, not per entry or read: %d", said)
}
