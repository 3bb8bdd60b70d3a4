package main

// Mistakes that can be undone: a refused first try leaves nothing that
// stops the corrected one, and a record that never submitted anything goes
// at once.

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stateFiles lists what is in a state dir, but the local backend's job
// folder.
func stateFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if e.Name() != "local-jobs" {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestRefusedInvokeLeavesNothing: every refusal (exit 2, nothing submitted)
// leaves no record and no .lock file, whether the refusal came before the
// record was written or after (the Slurm backend refusing a missing
// credentials directory); the corrected command then runs under the same
// name. Before, the record stayed and the rerun was refused for its
// "different resourceURL" until a cleanup, and every refusal left a .lock.
func TestRefusedInvokeLeavesNothing(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"after the record is written", []string{"--backend", "slurm", "--resource-url", "http://127.0.0.1:9",
			"--credentials-dir", filepath.Join(t.TempDir(), "missing"), "--script", "#!/bin/bash\necho hi"}},
		{"bad job properties", []string{"--backend", "local", "--script", "echo hi", "--job-properties", "garbage"}},
		{"script given as a path", []string{"--backend", "local", "--script", "./job.sh"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := run(t, append([]string{"invoke", "--job-name", "first-try", "--state-dir", dir}, tc.args...)...)
			require.Equal(t, ExitInvalid, r.code, r.stderr)
			assert.Empty(t, stateFiles(t, dir), "a refused invoke leaves no record and no lock")

			r = run(t, "invoke", "--job-name", "first-try", "--state-dir", dir, "--backend", "local", "--script", "echo corrected")
			require.Equal(t, ExitDone, r.code, "the corrected rerun under the same name:\n%s", r.stderr)
			assert.Equal(t, "DONE", r.summary["status"])
		})
	}
}

// TestRefusedInvokeKeepsARecordItDidNotCreate: a record made before (by
// create-configmap, by a person) is not invoke's to remove on a refusal.
func TestRefusedInvokeKeepsARecordItDidNotCreate(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	r := run(t, "create-configmap", "--job-name", "made-before", "--state-dir", dir, "--backend", "slurm",
		"--resource-url", "http://127.0.0.1:9", "--script", "#!/bin/bash\necho hi")
	require.Equal(t, ExitDone, r.code, r.stderr)
	r = run(t, "invoke", "--job-name", "made-before", "--state-dir", dir, "--credentials-dir", filepath.Join(dir, "missing"))
	require.Equal(t, ExitInvalid, r.code, r.stderr)
	assert.FileExists(t, filepath.Join(dir, "made-before-bridge-cm.json"))
}

// TestCleanupOfUnsubmittedRecordIsImmediate: a record from which nothing
// was submitted (no id, no submit intent) is deleted at once, without a
// request to its URL, even when that URL answers nobody.
func TestCleanupOfUnsubmittedRecordIsImmediate(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	r := run(t, "create-configmap", "--job-name", "never-sent", "--state-dir", dir, "--backend", "slurm",
		"--resource-url", "http://127.0.0.1:9", "--script", "#!/bin/bash\necho hi")
	require.Equal(t, ExitDone, r.code, r.stderr)
	r = run(t, "cleanup", "--job-name", "never-sent", "--state-dir", dir, "--retry-budget", "30s")
	require.Equal(t, ExitDone, r.code, r.stderr)
	assert.Equal(t, true, r.summary["deleted"], r.stdout)
	assert.Contains(t, r.stderr, "backend=0", "no request to the record's URL")
	assert.Empty(t, stateFiles(t, dir))
}

// TestScriptThatNamesAFile: --script is the script's text; a value that is
// one word naming a file here, or shaped like a path, would run that word
// as the script where the job runs (exit 127). It is refused, exit 2,
// nothing written, with the way to pass the file and the remote location.
func TestScriptThatNamesAFile(t *testing.T) {
	clearEnv(t)
	file := filepath.Join(t.TempDir(), "myjob.sh")
	require.NoError(t, os.WriteFile(file, []byte("#!/bin/sh\necho hi\n"), 0o600))
	for _, v := range []string{file, "./myjob.sh", "~/jobs/run", "run.py", "/opt/site/run.slurm"} {
		for _, command := range []string{"invoke", "create-configmap"} {
			t.Run(command+" "+v, func(t *testing.T) {
				dir := t.TempDir()
				r := run(t, command, "--job-name", "path", "--state-dir", dir, "--backend", "local", "--script", v)
				require.Equal(t, ExitInvalid, r.code, r.stderr)
				all := r.stdout + r.stderr
				for _, want := range []string{"script", `$(cat ` + v + `)`, "--script-location remote"} {
					assert.Contains(t, all, want)
				}
				assert.Empty(t, stateFiles(t, dir))
			})
		}
	}
	// A script's text, and a path with --script-location remote, are left alone.
	for _, args := range [][]string{
		{"--script", "echo ./myjob.sh; date"},
		{"--script", "true"},
		{"--script", file, "--script-location", "remote"},
	} {
		r := run(t, append([]string{"create-configmap", "--job-name", "text", "--state-dir", t.TempDir(), "--backend", "local"}, args...)...)
		assert.Equal(t, ExitDone, r.code, "%v: %s", args, r.stderr)
	}
}

// TestCleanupAfterASubmitThatNeverConnected: an invoke whose every submit
// attempt failed to connect (a wrong or dead URL) gives up with exit 75 and
// lets go of its submit intent, since provably nothing was submitted; the
// cleanup that follows deletes the record at once instead of looking for a
// job by key on that URL for its whole budget (1 min 51 s, then exit 75
// with the record kept, before).
func TestCleanupAfterASubmitThatNeverConnected(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	creds := filepath.Join(t.TempDir(), "creds")
	require.NoError(t, os.MkdirAll(creds, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(creds, "token"), []byte("a-token-for-nobody"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(creds, "user"), []byte("bridge"), 0o600))
	r := run(t, "create-configmap", "--job-name", "dead-url", "--state-dir", dir, "--backend", "slurm",
		"--resource-url", "http://127.0.0.1:9", "--script", "#!/bin/bash\necho hi")
	require.Equal(t, ExitDone, r.code, r.stderr)
	r = run(t, "invoke", "--job-name", "dead-url", "--state-dir", dir, "--credentials-dir", creds, "--retry-budget", "3s")
	require.Equal(t, ExitTempFail, r.code, r.stderr)
	b, err := os.ReadFile(filepath.Join(dir, "dead-url-bridge-cm.json"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), `status.submitIntent": "`, "no submit intent is left by a submit that never connected")

	start := time.Now()
	r = run(t, "cleanup", "--job-name", "dead-url", "--state-dir", dir, "--credentials-dir", creds, "--retry-budget", "30s")
	require.Equal(t, ExitDone, r.code, r.stderr)
	assert.Equal(t, true, r.summary["deleted"], r.stdout)
	assert.Less(t, time.Since(start), 20*time.Second, "cleanup does not wait out its budget on the dead URL")
	assert.Empty(t, stateFiles(t, dir))
}
