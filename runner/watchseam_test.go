package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// Cleanup, deleting a record of a watch group, collects the group's lease
// once it has lapsed, through the watcher's seam (watcher.CollectLease):
// a group whose last watcher died leaves no ConfigMap behind for good.
// (The lease's own cases are the watcher's TestCleanupCollectsALapsedLease.)
func TestCleanupCollectsTheGroupsLapsedLease(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	group := cluster.New(cluster.Spec{Backend: "slurm", URL: "https://cluster.example", CredentialText: []byte("token")}).Group()
	long := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	lease := &kube.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bridge-watch-" + group, Namespace: s.Namespace, Labels: map[string]string{watcher.LabelWatchGroup: group}},
		Data: map[string]string{"holder": "handed-to rec-gone", "renewed": long, "taken": long}}
	require.NoError(t, s.Client.Create(ctx, kube.ConfigMaps, s.Namespace, lease, &kube.ConfigMap{}))

	st := &record.ConfigMapStore{Client: s.Client, Namespace: s.Namespace, Name: "rec-1"}
	_, err := st.Create(ctx, map[string]string{record.KeyWatchGroup: group, record.KeyJobStatus: string(backends.Done)})
	require.NoError(t, err)
	// A budget longer than the lease's TTL: a held lease is collected once
	// nobody wrote it for a TTL by the cleanup's clock.
	res, err := (&runner.Cleaner{Store: st, Registry: backends.NewRegistry(), RetryBudget: time.Minute}).Run(ctx)
	require.NoError(t, err)
	require.True(t, res.Deleted)
	err = s.Client.Get(ctx, kube.ConfigMaps, s.Namespace, lease.Name, &kube.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "the lapsed lease was collected: %v", err)
}
