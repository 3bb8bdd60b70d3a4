package backends_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestReadLocalFile: only a regular file is read, and only up to the cap;
// a FIFO is refused without blocking (before, os.ReadFile waited for a
// writer forever) and /dev/zero without reading (before, it ate memory).
func TestReadLocalFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	link := filepath.Join(dir, "zero")
	require.NoError(t, os.Symlink("/dev/zero", link))
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, make([]byte, 1025), 0o600))
	exact := filepath.Join(dir, "exact")
	require.NoError(t, os.WriteFile(exact, make([]byte, 1024), 0o600))

	for path, problem := range map[string]string{fifo: "named pipe", link: "character device", dir: "directory", big: "larger than 1 KiB"} {
		done := make(chan error, 1)
		go func() {
			_, _, err := backends.ReadLocalFile(path, 1024)
			done <- err
		}()
		select {
		case err := <-done:
			var le *backends.LocalFileError
			require.ErrorAs(t, err, &le, path)
			assert.Contains(t, err.Error(), problem)
			assert.Contains(t, err.Error(), path)
		case <-time.After(10 * time.Second):
			t.Fatalf("reading %s blocked", path)
		}
		var le *backends.LocalFileError
		assert.ErrorAs(t, backends.CheckLocalFile(path, 1024), &le, path)
	}
	b, fi, err := backends.ReadLocalFile(exact, 1024)
	require.NoError(t, err)
	assert.Len(t, b, 1024)
	assert.True(t, fi.Mode().IsRegular())
	assert.NoError(t, backends.CheckLocalFile(exact, 1024))
	_, _, err = backends.ReadLocalFile(filepath.Join(dir, "absent"), 1024)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.NoError(t, backends.CheckLocalFile(filepath.Join(dir, "absent"), 1024), "a missing file is the reader's to report")
}
