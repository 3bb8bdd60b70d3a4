package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExitZero: with --exit-zero (or BRIDGE_EXIT_ZERO) a job that ends in
// any final state exits 0 with its outcome in the status output; without it
// the outcome is the exit code; a value that is not a Boolean is invalid
// input (exit 2) and runs nothing.
func TestExitZero(t *testing.T) {
	clearEnv(t)
	cases := []struct {
		script, status string
		code           int // without --exit-zero
	}{
		{"exit 0", "DONE", ExitDone},
		{"exit 7", "FAILED", ExitFailed},
		{"kill -TERM $$", "KILLED", ExitKilled},
	}
	for _, c := range cases {
		t.Run(c.status, func(t *testing.T) {
			for _, how := range []string{"off", "flag", "env"} {
				out := filepath.Join(t.TempDir(), "status")
				args := []string{"invoke", "--state-dir", t.TempDir(), "--job-name", "j", "--backend", "local",
					"--script", c.script, "--output-status", out}
				want := c.code
				switch how {
				case "flag":
					args, want = append(args, "--exit-zero", "true"), ExitDone
				case "env":
					t.Setenv("BRIDGE_EXIT_ZERO", "true")
					want = ExitDone
				}
				r := run(t, args...)
				assert.Equal(t, want, r.code, "%s: %s", how, r.stderr)
				b, err := os.ReadFile(out)
				require.NoError(t, err)
				assert.Equal(t, c.status, string(b), how)
				assert.Equal(t, float64(want), r.summary["exit"], "the summary's exit is the process's")
			}
		})
	}
	clearEnv(t)
	dir := t.TempDir()
	r := run(t, "invoke", "--state-dir", dir, "--job-name", "j", "--backend", "local", "--script", "exit 0", "--exit-zero", "yes please")
	assert.Equal(t, ExitInvalid, r.code)
	assert.Contains(t, r.stderr, "exit-zero")
	_, err := os.Stat(filepath.Join(dir, "j-bridge-cm.json"))
	assert.True(t, os.IsNotExist(err), "nothing is recorded: %v", err)
}
