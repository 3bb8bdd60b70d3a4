package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestHTCondorJobThatCannotStart: on the suite's real HTCondor 23.9 a job
// that can never start says why (issue 40): one asking for far more CPUs
// than any machine has stays IDLE with the negotiator's "no match found",
// and one submitted on hold waits for a condor_release that never comes
// (HoldReasonCode 15). The step's log says the job waits, with the reason;
// --pending-limit cancels it, invoke exits 2 naming the reason, and the
// record and `status -o wide` keep it.
func TestHTCondorJobThatCannotStart(t *testing.T) {
	clearEnv(t)
	srv := testssh.Condor(t)
	for _, c := range []struct {
		name, props, reason string
	}{
		{"unmatched", `{"request_cpus": 500}`, "no match found"},
		{"held", `{"hold": true}`, "HoldReasonCode 15"},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			start := time.Now()
			// 40 s: the negotiator's first cycle must have seen the job.
			res := run(t, "invoke", "--state-dir", state, "--job-name", "cannot-start", "--backend", "htcondor",
				"--resource-url", srv.URL, "--credentials-dir", srv.CredsDir, "--watcher=false", "--update-interval", "2",
				"--pending-limit", "40s", "--job-properties", c.props, "--script", "#!/bin/sh\nhostname\n")
			took := time.Since(start)
			require.Equal(t, ExitInvalid, res.code, "%s\n%s", res.stdout, res.stderr)
			assert.Less(t, took, 40*time.Second+60*time.Second, "the limit is a ceiling (within limit + polls + the cancel's wait)")

			rec, err := record.NewFileStore(state, "cannot-start").Get(context.Background())
			require.NoError(t, err)
			require.NotEmpty(t, rec.Data[record.KeyID], "the job was submitted")
			t.Logf("reason %q, message %q", rec.Data[record.KeyReason], rec.Data[record.KeyMessage])
			assert.Equal(t, c.reason, rec.Data[record.KeyReason], "the record keeps why it waited, not the cancel's word")
			assert.Equal(t, string(backends.Killed), rec.Data[record.KeyJobStatus])
			assert.Contains(t, rec.Data[record.KeyMessage], "still PENDING after")
			assert.Contains(t, rec.Data[record.KeyMessage], c.reason)
			assert.Contains(t, res.stderr, "job pending: it has not started", "the step's log says the job waits")
			assert.Contains(t, res.stderr, c.reason)
			assert.Equal(t, "KILLED", res.summary["status"])

			st := run(t, "status", "--state-dir", state, "-o", "wide")
			assert.Contains(t, st.stdout, c.reason, "status shows the reason")

			be, err := htcondor.New(backends.Config{URL: srv.URL, Credentials: testssh.Creds(t, srv.CredsDir)})
			require.NoError(t, err)
			defer be.(*htcondor.Backend).Close()
			require.Eventually(t, func() bool {
				s, err := be.Status(context.Background(), rec.Data[record.KeyID])
				return err == nil && s.State == backends.Killed
			}, 30*time.Second, time.Second, "the job was removed from the pool")
		})
	}
}
