package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestSlurmRetryIsANewAttempt: on the real Slurm, a job that fails on its
// first run and succeeds on its second (a marker file tells them apart).
// With the default resubmit a retry of its step re-attaches to the failed
// job (exit 1 again, nothing submitted); with resubmit=failed the retry
// submits attempt 2 under the same record, dying right after that submit
// (crash point after-submit); the next invoke adopts attempt 2's job by its
// key, and it ends DONE. slurmctld knows exactly one job per attempt key,
// and a further invoke re-attaches.
func TestSlurmRetryIsANewAttempt(t *testing.T) {
	clearEnv(t)
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) {
			state, outs := t.TempDir(), t.TempDir()
			b := make([]byte, 6)
			_, _ = rand.Read(b)
			marker := "/tmp/bridge-attempt-" + hex.EncodeToString(b)
			script := "#!/bin/sh\nif [ -e " + marker + " ]; then rm -f " + marker + "; echo second; exit 0; fi\ntouch " + marker + "\nexit 3\n"
			args := []string{"--state-dir", state, "--job-name", "attempts", "--backend", "slurm", "--resource-url", c.url,
				"--credentials-dir", c.creds, "--script", script, "--update-interval", "1", "--submit-lease", "3s",
				"--output-attempt", filepath.Join(outs, "attempt"), "--output-failure-category", filepath.Join(outs, "category"),
				"--output-job-id", filepath.Join(outs, "id")}
			invoke := func(env []string, extra ...string) (int, string) {
				cmd, out := startInvoke(t, env, append(append([]string{}, args...), extra...)...)
				err := cmd.Wait()
				var ee *exec.ExitError
				if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
					return -int(ee.Sys().(syscall.WaitStatus).Signal()), out.String()
				}
				return exitOf(err), out.String()
			}
			output := func(name string) string {
				b, err := os.ReadFile(filepath.Join(outs, name))
				require.NoError(t, err)
				return string(b)
			}
			recOf := func() *record.Record {
				rec, err := record.NewFileStore(state, "attempts").Get(context.Background())
				require.NoError(t, err)
				return rec
			}

			code, out := invoke(nil)
			require.Equal(t, ExitFailed, code, out)
			assert.Equal(t, "1", output("attempt"))
			assert.Equal(t, "job", output("category"))
			first := output("id")

			code, out = invoke(nil) // resubmit=infrastructure: a job failure is re-attached to
			require.Equal(t, ExitFailed, code, out)
			assert.Equal(t, first, output("id"))
			assert.Empty(t, recOf().Data[record.KeyAttempts])

			code, out = invoke([]string{"BRIDGE_CRASH_AT=after-submit"}, "--resubmit", "failed")
			require.Equal(t, -int(syscall.SIGKILL), code, "invoke dies right after submitting attempt 2: %s", out)
			rec := recOf()
			assert.Equal(t, "2", rec.Data[record.KeyAttempt])
			assert.Empty(t, rec.Data[record.KeyID], "attempt 2's id was never recorded")

			code, out = invoke(nil, "--resubmit", "failed")
			require.Equal(t, ExitDone, code, out)
			assert.Equal(t, "2", output("attempt"))
			assert.Empty(t, output("category"))
			second := output("id")
			assert.NotEqual(t, first, second)
			rec = recOf()
			assert.True(t, strings.HasPrefix(rec.Data[record.KeyAttempts], "1 "+first+" FAILED job FAILED"), rec.Data[record.KeyAttempts])
			key2 := rec.Data[record.KeyKey]
			assert.Equal(t, runner.AttemptKey(rec.UID, 2), key2)
			assert.Equal(t, 1, slurmJobsWithComment(t, c, key2), "attempt 2 was submitted once, and adopted after the crash")
			assert.Equal(t, 1, slurmJobsWithComment(t, c, runner.AttemptKey(rec.UID, 1)), "attempt 1 was submitted once")

			t.Logf("attempt 1: Slurm job %s FAILED (exit 3); attempt 2: job %s, adopted after a SIGKILL right after its submit, DONE; history %q",
				first, second, rec.Data[record.KeyAttempts])

			code, out = invoke(nil, "--resubmit", "failed")
			require.Equal(t, ExitDone, code, out)
			assert.Equal(t, second, output("id"), "a DONE attempt is re-attached to")
			assert.Equal(t, 1, slurmJobsWithComment(t, c, key2))
		})
	}
}
