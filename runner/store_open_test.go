package runner_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/runner"
)

func TestOpenStoreChoosesAndNames(t *testing.T) {
	dir := t.TempDir()
	s, err := (&runner.StoreOptions{JobName: "sim-1", StateDir: dir, Kind: "auto"}).Open()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "sim-1-bridge-cm.json"), s.(*runner.FileStore).Path, "a state dir means a file record")

	o := &runner.StoreOptions{ConfigMap: "sim-2-slurm-cm", StateDir: dir}
	s, err = o.Open()
	require.NoError(t, err)
	assert.Equal(t, "sim-2-slurm-cm", o.JobName, "the job name defaults to the named record")
	assert.Equal(t, filepath.Join(dir, "sim-2-slurm-cm.json"), s.(*runner.FileStore).Path)

	for _, bad := range []struct {
		o     runner.StoreOptions
		field string
	}{
		{runner.StoreOptions{StateDir: dir}, "job-name"},
		{runner.StoreOptions{JobName: "Sim_1", StateDir: dir}, "job-name"},
		{runner.StoreOptions{ConfigMap: "-x", StateDir: dir}, "configmap"},
		{runner.StoreOptions{JobName: "sim", Kind: "etcd"}, "store"},
		{runner.StoreOptions{JobName: "sim", Kind: "configmap", Kubeconfig: filepath.Join(dir, "missing")}, "kubeconfig"},
	} {
		_, err := bad.o.Open()
		var inv *backends.FieldError
		require.True(t, errors.As(err, &inv), "%+v: %v", bad.o, err)
		assert.Equal(t, bad.field, inv.Field, "%v", err)
	}
}
