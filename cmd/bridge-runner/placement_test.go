package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/slurm"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestPlacementOnTwoRealSlurms: one job with two targets, the suite's real
// Slurm 22.05 and 24.11 (each with its own credentials directory), in
// their small partition short (two CPUs), which is filled on 22.05 by
// sleeping jobs and one waiting behind them. The job goes to 24.11, where
// it starts now; the record says why; exactly one job carries its key on
// the two clusters together. Then a target whose slurmrestd does not
// answer is skipped (ordered policy, the dead one first) and the job runs
// on the other, once.
func TestPlacementOnTwoRealSlurms(t *testing.T) {
	clearEnv(t)
	old, young := twoSlurms(t)
	fill(t, old, 3) // two running on its two CPUs, one waiting
	targets := twoTargets(old, young)

	state := t.TempDir()
	res := run(t, "invoke", "--state-dir", state, "--job-name", "placed", "--backend", "slurm",
		"--targets", targets, "--job-properties", `{"partition":"short","time_limit":5}`,
		"--script", "#!/bin/sh\necho placed on $SLURM_CLUSTER_NAME\n", "--update-interval", "1", "--watcher=false")
	require.Equal(t, 0, res.code, "%s\n%s", res.stdout, res.stderr)
	rec, err := record.NewFileStore(state, "placed").Get(context.Background())
	require.NoError(t, err)
	p, err := record.ParsePlaced(rec.Data[record.KeyPlacement])
	require.NoError(t, err)
	require.NotNil(t, p)
	t.Logf("placement: %s", rec.Data[record.KeyPlacement])
	assert.Equal(t, "young", p.Target, "the job starts now on 24.11, not behind the queue on 22.05")
	assert.Equal(t, "young", res.summary["target"])
	require.Len(t, p.Probes, 2)
	require.NotNil(t, p.Probes[0].FreeCPUs, "22.05's probe answered")
	assert.Zero(t, *p.Probes[0].FreeCPUs, "22.05's short partition is full")
	assert.Empty(t, jobWithKey(t, old, rec), "nothing was submitted to 22.05")
	assert.Equal(t, rec.Data[record.KeyID], jobWithKey(t, young, rec), "the recorded job is 24.11's")

	st := run(t, "status", "--state-dir", state, "-o", "wide")
	assert.Contains(t, st.stdout, "young="+strings.TrimPrefix(young.url, "http://"), st.stdout)

	// A dead first target (nothing listens there) under the ordered policy.
	dead := fmt.Sprintf(`[{"name":"dead","resourceURL":"http://%s","credentials":%q},{"name":"young","resourceURL":%q,"credentials":%q}]`,
		closedPort(t), old.creds, young.url, young.creds)
	state = t.TempDir()
	res = run(t, "invoke", "--state-dir", state, "--job-name", "spilled", "--backend", "slurm", "--placement", "ordered",
		"--targets", dead, "--job-properties", `{"time_limit":5}`, "--script", "#!/bin/sh\ntrue\n", "--update-interval", "1", "--watcher=false")
	require.Equal(t, 0, res.code, "%s\n%s", res.stdout, res.stderr)
	rec, err = record.NewFileStore(state, "spilled").Get(context.Background())
	require.NoError(t, err)
	p, _ = record.ParsePlaced(rec.Data[record.KeyPlacement])
	require.NotNil(t, p)
	assert.Equal(t, "young", p.Target)
	assert.Equal(t, "did not answer", p.Probes[0].Skipped)
	assert.Equal(t, rec.Data[record.KeyID], jobWithKey(t, young, rec))
}

// fill submits n sleeping one-CPU jobs to c's partition short and cancels
// them when the test ends.
func fill(t *testing.T, c slurmCluster, n int) {
	be, err := slurm.New(backends.Config{URL: c.url, Credentials: runner.DirCredentials{Dir: c.creds, Secrets: &runner.Secrets{}}})
	require.NoError(t, err)
	var ids []string
	t.Cleanup(func() {
		for _, id := range ids {
			_ = be.Cancel(context.Background(), id)
		}
	})
	for i := range n {
		id, err := be.Submit(context.Background(), backends.Job{Name: fmt.Sprintf("filler-%d", i), Key: fmt.Sprintf("filler-%d-%d", i, time.Now().UnixNano()),
			Script: "#!/bin/sh\nsleep 120\n", Properties: json.RawMessage(`{"partition":"short","time_limit":3,"cpus_per_task":1}`)})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	require.Eventually(t, func() bool { // the first two run, the third waits
		running := 0
		for _, id := range ids[:min(2, n)] {
			if st, err := be.Status(context.Background(), id); err == nil && st.State == backends.Running {
				running++
			}
		}
		return running == min(2, n)
	}, time.Minute, 500*time.Millisecond)
}

// jobWithKey is the job on c that carries the record's idempotency key
// ("" for none).
func jobWithKey(t *testing.T, c slurmCluster, rec *record.Record) string {
	be, err := slurm.New(backends.Config{URL: c.url, Credentials: runner.DirCredentials{Dir: c.creds, Secrets: &runner.Secrets{}}})
	require.NoError(t, err)
	id, err := be.(backends.Finder).FindByKey(context.Background(), rec.Data[record.KeyKey])
	require.NoError(t, err)
	return id
}

// twoSlurms is the suite's two real Slurms, 22.05 ("old") and 24.11
// ("young"), for the placement tests.
func twoSlurms(t *testing.T) (old, young slurmCluster) {
	t.Helper()
	cs := slurmClusters(t)
	if len(cs) < 2 {
		t.Fatalf("this test needs both real Slurms (22.05 and 24.11), found %d", len(cs))
	}
	return cs[0], cs[1]
}

// twoTargets is --targets naming both, each with its own credentials.
func twoTargets(old, young slurmCluster) string {
	return fmt.Sprintf(`[{"name":"old","resourceURL":%q,"credentials":%q},{"name":"young","resourceURL":%q,"credentials":%q}]`,
		old.url, old.creds, young.url, young.creds)
}
