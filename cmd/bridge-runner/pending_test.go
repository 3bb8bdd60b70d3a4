package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/slurm"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestSlurmJobThatCannotStart is IBM's issue #6 as written: 56 CPUs per
// task on the suite's 8-CPU node. Slurm 22.05 keeps it PENDING for ever
// (reason PartitionConfig); the step's log says so with the reason and the
// wait, the record and status keep the reason, and with --pending-limit
// 20s invoke cancels the job and exits 2 naming the reason. Slurm 24.11
// refuses it at submit: exit 2 too, with Slurm's words for why.
func TestSlurmJobThatCannotStart(t *testing.T) {
	clearEnv(t)
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) {
			state := t.TempDir()
			// The record is made first, as a workflow's create-configmap
			// step does: a refused invoke removes only a record it made.
			res := run(t, "create-configmap", "--state-dir", state, "--job-name", "cannot-start", "--backend", "slurm",
				"--resource-url", c.url, "--update-interval", "2",
				"--pending-limit", "20s", "--script", "#!/bin/sh\n#SBATCH --cpus-per-task=56\n#SBATCH -p debug\n#SBATCH -t 5\nhostname\n")
			require.Equal(t, ExitDone, res.code, res.stderr)
			start := time.Now()
			res = run(t, "invoke", "--state-dir", state, "--job-name", "cannot-start", "--credentials-dir", c.creds, "--watcher=false")
			took := time.Since(start)
			require.Equal(t, ExitInvalid, res.code, "%s\n%s", res.stdout, res.stderr)
			assert.Less(t, took, 20*time.Second+60*time.Second, "the limit is a ceiling (within limit + polls + the cancel's wait)")

			rec, err := record.NewFileStore(state, "cannot-start").Get(context.Background())
			require.NoError(t, err)
			if rec.Data[record.KeyID] == "" {
				// 24.11 refuses such a job at submit (22.05 queues it):
				// exit 2 as well, nothing submitted, the field named.
				t.Logf("%s refused the job at submit: %s", c.release, rec.Data[record.KeyMessage])
				assert.Contains(t, rec.Data[record.KeyMessage], "Requested node configuration is not available")
				assert.NotEqual(t, string(backends.Pending), rec.Data[record.KeyJobStatus], "never pending")
				return
			}
			reason := rec.Data[record.KeyReason]
			t.Logf("%s: reason %q, message %q", c.release, reason, rec.Data[record.KeyMessage])
			require.NotEmpty(t, reason, "Slurm's reason is in the record")
			assert.Equal(t, string(backends.Killed), rec.Data[record.KeyJobStatus])
			assert.Contains(t, rec.Data[record.KeyMessage], "still PENDING after")
			assert.Contains(t, rec.Data[record.KeyMessage], reason)
			assert.Contains(t, res.stderr, "job pending: it has not started", "the step's log says the job waits")
			assert.Contains(t, res.stderr, "reason="+reason)
			assert.Contains(t, res.stderr, "pendingLimit")
			assert.Equal(t, "KILLED", res.summary["status"])

			st := run(t, "status", "--state-dir", state, "-o", "wide")
			assert.Contains(t, st.stdout, reason, "status shows the reason")

			be, err := slurm.New(backends.Config{URL: c.url, Credentials: runner.DirCredentials{Dir: c.creds, Secrets: &runner.Secrets{}}})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				s, err := be.Status(context.Background(), rec.Data[record.KeyID])
				return err == nil && s.State == backends.Killed
			}, 30*time.Second, time.Second, "the job was cancelled on the cluster")
		})
	}
}
