package record_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
)

// A record that names a cluster carries its label: the cluster's agent
// lists its records by it (one watch per namespace).
func TestRecordNamingAClusterCarriesItsLabel(t *testing.T) {
	ctx := context.Background()
	s := testkube.RecordStore(t)
	_, err := s.Create(ctx, map[string]string{"backend": "local", record.KeyCluster: "hpc-1"})
	require.NoError(t, err)
	cm, err := testkube.Client(t).CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "hpc-1", cm.Labels[record.LabelCluster])
	assert.Equal(t, "bridge-runner", cm.Labels[record.LabelManagedBy])
	items, _, err := record.NewSelectedLister(s.Client, s.Namespace, record.LabelCluster+"=hpc-1").List(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	items, _, err = record.NewSelectedLister(s.Client, s.Namespace, record.LabelCluster+"=hpc-2").List(ctx)
	require.NoError(t, err)
	assert.Empty(t, items)
}

// A cluster's name is a label value and part of the agent's ConfigMap's
// name: anything else is bad input naming the key.
func TestParseChecksTheCluster(t *testing.T) {
	base := record.Spec{Backend: "local", JobScript: "true"}
	for _, good := range []string{"", "hpc-1", "a", "site.hpc-1", strings.Repeat("a", 63)} {
		s := base
		s.Cluster = good
		d, err := s.Parse()
		require.NoError(t, err, good)
		assert.Equal(t, good, d.Cluster)
	}
	for _, bad := range []string{"HPC", "-a", "a-", "a_b", "a/b", strings.Repeat("a", 64), "a b"} {
		s := base
		s.Cluster = bad
		_, err := s.Parse()
		require.Error(t, err, bad)
		assert.True(t, errors.Is(err, backends.ErrInvalid), bad)
		assert.Contains(t, err.Error(), "cluster", bad)
	}
}
