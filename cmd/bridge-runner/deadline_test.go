package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestSlurmSubmitWithItsAnswerLost: issue 37. slurmrestd takes the job,
// but its answer never comes back (a proxy delivers the submit and drops
// the answer; the request times out). Before giving up, invoke looks for
// the job by its idempotency key, finds it and follows it to its end. The
// old code gave up with 75 at the submit's deadline and left the job
// running with no id in any record. The look gets a fifth of the submit's
// time (20 s less a fifth here): at 10 s, on a loaded machine, a look of
// 1.6 s did not get 26.05's answer, and invoke rightly kept the intent and
// exited 75 for the retry to look again.
func TestSlurmSubmitWithItsAnswerLost(t *testing.T) {
	clearEnv(t)
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(c.url)
			require.NoError(t, err)
			forward := httputil.NewSingleHostReverseProxy(u)
			var lost atomic.Int32
			lost.Store(1)
			px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/job/submit") && lost.Add(-1) >= 0 {
					forward.ServeHTTP(httptest.NewRecorder(), r) // delivered: slurmrestd takes the job
					<-r.Context().Done()                         // and its answer is lost
					return
				}
				forward.ServeHTTP(w, r)
			}))
			t.Cleanup(px.Close)
			state, job := t.TempDir(), "answer-lost"
			start := time.Now()
			r := run(t, "invoke", "--state-dir", state, "--job-name", job, "--backend", "slurm",
				"--resource-url", px.URL, "--credentials-dir", c.creds, "--script", "#!/bin/sh\ntrue\n",
				"--update-interval", "1", "--submit-lease", "20s", "--retry-budget", "20s", "--termination-log", "")
			t.Logf("submit with its answer lost: exit %d after %s", r.code, time.Since(start).Round(time.Millisecond))
			assert.Equal(t, ExitDone, r.code, r.stderr)
			assert.Contains(t, r.stderr, "found by its idempotency key")
			rec, err := record.NewFileStore(state, job).Get(context.Background())
			require.NoError(t, err)
			jobs := slurmJobsByComment(t, c, rec.Data[record.KeyKey])
			assert.Len(t, jobs, 1, "one job, and the record follows it: %v", jobs)
			assert.Contains(t, jobs, rec.Data[record.KeyID])
		})
	}
}

// TestCleanupRetryBudgetIsACeiling: issue 37. With slurmrestd blackholed,
// cleanup --retry-budget 5s ends (75, the record kept) within a few seconds
// of 5 s: every call it makes is bounded by what is left of one budget.
// The old code retried the cancel for the budget and then asked for the
// job's state under the request's own 30 s timeout (2 min became 150 s).
func TestCleanupRetryBudgetIsACeiling(t *testing.T) {
	clearEnv(t)
	slurmURL, creds := slurmEnv(t)
	u, err := url.Parse(slurmURL)
	require.NoError(t, err)
	px := testutil.NewProxy(t, u.Host)
	state, job := t.TempDir(), "cleanup-budget"
	cmd, out := startInvoke(t, nil, "--state-dir", state, "--job-name", job, "--backend", "slurm", "--resource-url", "http://"+px.Addr,
		"--credentials-dir", creds, "--script", "#!/bin/sh\nsleep 300\n", "--update-interval", "1")
	waitForStatus(t, state, job, "RUNNING")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL), out.String())
	_ = cmd.Wait()
	px.Set(t, testutil.Blackhole)
	const budget = 5 * time.Second
	start := time.Now()
	r := run(t, "cleanup", "--state-dir", state, "--job-name", job, "--credentials-dir", creds, "--wait", "0s", "--retry-budget", budget.String())
	took := time.Since(start)
	t.Logf("cleanup --retry-budget %s with slurmrestd blackholed: exit %d after %s", budget, r.code, took.Round(time.Millisecond))
	assert.Equal(t, ExitTempFail, r.code, r.stderr)
	assert.Less(t, took, budget+3*time.Second, "the budget is a ceiling")
	px.Set(t, testutil.Pass)
	r = run(t, "cleanup", "--state-dir", state, "--job-name", job, "--credentials-dir", creds, "--wait", "0s")
	assert.Equal(t, 0, r.code, r.stderr)
}
