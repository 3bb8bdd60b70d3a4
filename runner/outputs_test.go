package runner_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/runner"
)

// TestWriteOutputsDirectories: outputs land in directories created on the
// way, 0755, except beneath a directory every user may write without a
// sticky bit (KFP's local pipeline root opened to the image's user), whose
// permissions they take so that its owner can remove them.
func TestWriteOutputsDirectories(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	res := &runner.Result{ID: "42", Status: "DONE", Outputs: []string{"s3://b/a", "s3://b/c"}}
	for _, c := range []struct {
		name   string
		parent os.FileMode
		want   os.FileMode
	}{
		{"private", 0o755, 0o755},
		{"shared", 0o777, 0o777},
		{"sticky", 0o777 | os.ModeSticky, 0o755},
	} {
		root := filepath.Join(t.TempDir(), c.name)
		require.NoError(t, os.Mkdir(root, 0o700))
		require.NoError(t, os.Chmod(root, c.parent))
		paths := map[string]string{
			"job-id":  filepath.Join(root, "run", "task", "job_id"),
			"status":  filepath.Join(root, "run", "task", "status"),
			"outputs": filepath.Join(root, "run", "other", "outputs"),
		}
		require.NoError(t, runner.WriteOutputs(res, paths), c.name)
		for _, d := range []string{"run", "run/task", "run/other"} {
			fi, err := os.Stat(filepath.Join(root, d))
			require.NoError(t, err)
			assert.Equal(t, c.want, fi.Mode().Perm(), "%s: %s", c.name, d)
		}
		b, err := os.ReadFile(paths["status"])
		require.NoError(t, err)
		assert.Equal(t, "DONE", string(b))
		b, err = os.ReadFile(paths["outputs"])
		require.NoError(t, err)
		assert.Equal(t, "s3://b/a\ns3://b/c", string(b))
	}

	// A file where a directory should be is an error naming the output.
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "run"), nil, 0o644))
	err := runner.WriteOutputs(res, map[string]string{"status": filepath.Join(root, "run", "status")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "output status:")

	if os.Geteuid() != 0 { // root may write anywhere
		ro := filepath.Join(t.TempDir(), "ro")
		require.NoError(t, os.Mkdir(ro, 0o555))
		err := runner.WriteOutputs(res, map[string]string{"status": filepath.Join(ro, "run", "status")})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "may not write beneath")
	}
}
