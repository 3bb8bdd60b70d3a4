package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCleanupLocalLeavesNothing: issue 32 item 5. After cleanup of a local
// job, its state dir holds neither the record, nor the record's lock file,
// nor the job's directory; the summary says why the record went.
func TestCleanupLocalLeavesNothing(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	r := run(t, "invoke", "--state-dir", state, "--job-name", "tidy", "--backend", "local", "--script", "echo hi")
	require.Equal(t, ExitDone, r.code, r.stderr)
	require.FileExists(t, filepath.Join(state, "tidy-bridge-cm.json.lock"))
	r = run(t, "cleanup", "--state-dir", state, "--job-name", "tidy")
	require.Equal(t, ExitDone, r.code, r.stderr)
	assert.Equal(t, true, r.summary["deleted"], r.stdout)
	assert.Equal(t, false, r.summary["cancelled"], r.stdout)
	assert.Contains(t, r.summary["reason"], "DONE")
	assert.NoFileExists(t, filepath.Join(state, "tidy-bridge-cm.json"))
	assert.NoFileExists(t, filepath.Join(state, "tidy-bridge-cm.json.lock"))
	jobs, err := os.ReadDir(filepath.Join(state, "local-jobs"))
	require.NoError(t, err)
	assert.Empty(t, jobs, "the job's directory is gone")
}
