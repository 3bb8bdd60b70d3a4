package record_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
)

// Tests against the real kube-apiserver started by hack/kube-up.sh.

func TestConfigMapStoreContract(t *testing.T) {
	storeContract(t, func(t *testing.T) record.Store { return testkube.RecordStore(t) })
}

// The REST client knows only the ConfigMap fields; an update must still keep
// everything others wrote into the ConfigMap (binaryData, annotations, other
// labels), as the typed clientset did.
func TestConfigMapUpdateKeepsOthersFields(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	admin := testkube.Client(t)
	rec, err := s.Create(ctx, map[string]string{"backend": "local"})
	require.NoError(t, err)

	cm, err := admin.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	require.NoError(t, err)
	cm.BinaryData = map[string][]byte{"blob": {0, 1, 2, 255}}
	cm.Annotations = map[string]string{"example.org/note": "kept"}
	cm.Labels["example.org/team"] = "hpc"
	_, err = admin.CoreV1().ConfigMaps(s.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)

	// A stale write is refused, then a write from a fresh read succeeds.
	rec.Data["id"] = "1"
	_, err = s.Update(ctx, rec)
	require.ErrorIs(t, err, record.ErrConflict)
	fresh, err := s.Get(ctx)
	require.NoError(t, err)
	fresh.Data["id"] = "1"
	_, err = s.Update(ctx, fresh)
	require.NoError(t, err)

	got, err := admin.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "1", got.Data["id"])
	assert.Equal(t, []byte{0, 1, 2, 255}, got.BinaryData["blob"])
	assert.Equal(t, "kept", got.Annotations["example.org/note"])
	assert.Equal(t, "hpc", got.Labels["example.org/team"])
	assert.Equal(t, "bridge-runner", got.Labels[record.LabelManagedBy])
}

// Every request reaches the transport's counter, and API errors keep
// client-go's types (what the runner classifies on).
func TestKubeClientCountsRequestsAndKeepsErrorTypes(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	before := s.Client.Requests()
	_, err := s.Get(ctx)
	require.ErrorIs(t, err, record.ErrNoRecord)
	_, err = s.Create(ctx, map[string]string{"backend": "local"})
	require.NoError(t, err)
	_, err = s.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx))
	assert.Equal(t, int64(4), s.Client.Requests()-before, "get, create, get, delete")
	assert.Equal(t, int64(4), record.KubeRequests(s))
	assert.Equal(t, "get=2 create=1 delete=1", record.KubeRequestsByVerb(s))
	assert.Equal(t, int64(4), record.KubeRequests(record.WithStatusKeys(s, record.StatusKeysIBM, nil)), "an IBM-mode record is counted too")

	user := &record.ConfigMapStore{Client: testkube.KubeClient(t, testkube.UserConfig(t)), Namespace: s.Namespace, Name: s.Name}
	_, err = user.Get(ctx)
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "a missing grant is Forbidden: %v", err)
}

// PatchData writes the keys it names at the record's version in one
// request, keeps everything else (other keys, labels), and refuses a
// record changed since, as Update does.
func TestConfigMapPatchData(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	rec, err := s.Create(ctx, map[string]string{"backend": "local", "id": "1"})
	require.NoError(t, err)
	writer := &record.ConfigMapStore{Client: testkube.KubeClient(t, testkube.Config(t)), Namespace: s.Namespace, Name: s.Name}
	before := writer.Client.Requests()
	got, err := writer.PatchData(ctx, rec, map[string]string{record.KeyWatchObserved: "1 RUNNING RUNNING now"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), writer.Client.Requests()-before, "one request, no read first")
	assert.Equal(t, map[string]string{"backend": "local", "id": "1", record.KeyWatchObserved: "1 RUNNING RUNNING now"}, got.Data)

	_, err = writer.PatchData(ctx, rec, map[string]string{record.KeyWatchObserved: "1 DONE COMPLETED now"})
	require.ErrorIs(t, err, record.ErrConflict, "the record changed since rec was read")
	fresh, err := s.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, "1 RUNNING RUNNING now", fresh.Data[record.KeyWatchObserved])
	cm, err := testkube.Client(t).CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bridge-runner", cm.Labels[record.LabelManagedBy], "the labels are kept")
}
