package testkube

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// KubeClient is the client bridge-runner itself uses, for cfg.
func KubeClient(t testing.TB, cfg *rest.Config) *kube.Client {
	c, err := kube.New(cfg)
	require.NoError(t, err)
	return c
}

// RecordStore is the ConfigMap record of job "job" in a namespace of its
// own on the test apiserver.
func RecordStore(t *testing.T) *record.ConfigMapStore {
	ns := Namespace(t, Client(t))
	return &record.ConfigMapStore{Client: KubeClient(t, Config(t)), Namespace: ns, Name: record.ConfigMapName("job")}
}
