package record_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

func TestOpenStoreChoosesAndNames(t *testing.T) {
	dir := t.TempDir()
	s, err := (&record.StoreOptions{JobName: "sim-1", StateDir: dir, Kind: "auto"}).Open()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "sim-1-bridge-cm.json"), s.(*record.FileStore).Path, "a state dir means a file record")

	o := &record.StoreOptions{ConfigMap: "sim-2-slurm-cm", StateDir: dir}
	s, err = o.Open()
	require.NoError(t, err)
	assert.Equal(t, "sim-2-slurm-cm", o.JobName, "the job name defaults to the named record")
	assert.Equal(t, filepath.Join(dir, "sim-2-slurm-cm.json"), s.(*record.FileStore).Path)

	for _, bad := range []struct {
		o     record.StoreOptions
		field string
	}{
		{record.StoreOptions{StateDir: dir}, "job-name"},
		{record.StoreOptions{JobName: "Sim_1", StateDir: dir}, "job-name"},
		{record.StoreOptions{ConfigMap: "-x", StateDir: dir}, "configmap"},
		{record.StoreOptions{JobName: "sim", Kind: "etcd"}, "store"},
		{record.StoreOptions{JobName: "sim", Kind: "configmap", Kubeconfig: filepath.Join(dir, "missing")}, "kubeconfig"},
	} {
		_, err := bad.o.Open()
		var inv *backends.FieldError
		require.True(t, errors.As(err, &inv), "%+v: %v", bad.o, err)
		assert.Equal(t, bad.field, inv.Field, "%v", err)
	}
}

// TestDefaultStateDirOutsideAPod: the home's ~/.local/state when this user
// may create it, else $TMPDIR (a container run as a user whose home is
// not theirs, e.g. KFP's local DockerRunner(user=...)); $XDG_STATE_HOME
// wins over both.
func TestDefaultStateDirOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("XDG_STATE_HOME", "")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	home := t.TempDir()
	t.Setenv("HOME", home)
	assert.Equal(t, filepath.Join(home, ".local", "state", "bridge-runner"), record.DefaultStateDir())

	// A home that is no directory: nothing can be created beneath it.
	notDir := filepath.Join(home, "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	t.Setenv("HOME", notDir)
	assert.Equal(t, filepath.Join(tmp, "bridge-runner"), record.DefaultStateDir())

	if os.Geteuid() != 0 { // root may write anywhere
		ro := filepath.Join(home, "ro")
		require.NoError(t, os.Mkdir(ro, 0o500))
		t.Setenv("HOME", ro)
		assert.Equal(t, filepath.Join(tmp, "bridge-runner"), record.DefaultStateDir())
	}

	t.Setenv("XDG_STATE_HOME", home)
	assert.Equal(t, filepath.Join(home, "bridge-runner"), record.DefaultStateDir())
}
