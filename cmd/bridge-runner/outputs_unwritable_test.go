package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

// TestUnwritableOutputsFailTheStep: a job that ends DONE but whose step
// outputs cannot be written (kfp.local's pipeline root the image's user
// may not write, a path under a file) exits 75, not 0, so the workflow
// does not go on to tasks that read outputs that are not there; the
// record keeps DONE, and a second invoke (a retry) re-attaches and writes
// them. A job that FAILED keeps its own code. Before, invoke exited 0 with
// no outputs (kfp.local showed the task SUCCESS).
func TestUnwritableOutputsFailTheStep(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	bad := filepath.Join(file, "status") // under a regular file: no one, root included, can make it

	r := run(t, "invoke", "--job-name", "no-outputs", "--state-dir", dir, "--backend", "local", "--script", "echo hi",
		"--output-status", bad)
	assert.Equal(t, record.ExitTempFail, r.code, r.stderr)
	assert.Contains(t, r.stderr, "writing step outputs")
	rec, err := record.NewFileStore(dir, "no-outputs").Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "DONE", rec.Data[record.KeyJobStatus], "the job's own state is kept")

	good := filepath.Join(dir, "out", "status")
	r = run(t, "invoke", "--job-name", "no-outputs", "--state-dir", dir, "--backend", "local", "--script", "echo hi",
		"--output-status", good)
	require.Equal(t, ExitDone, r.code, r.stderr)
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	assert.Equal(t, "DONE", string(b), "the retry wrote them")

	r = run(t, "invoke", "--job-name", "failed-no-outputs", "--state-dir", dir, "--backend", "local", "--script", "exit 7",
		"--output-status", bad)
	assert.Equal(t, ExitFailed, r.code, "a failure keeps its code: %s", r.stderr)
}
