package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/slurm"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestPlacementWeighsCPUSeconds: on the real Slurm 22.05 one long job
// waits in partition short (held: 2 CPUs × 60 minutes), on 24.11 four
// short ones (held: 1 CPU × 1 minute each). By job counts 22.05 has less
// waiting (what main chose); by CPU-seconds, which both probes read from
// the jobs' time limits, 24.11 has 30 times less, and both policies that
// weigh the queue place the job there. The record keeps the figures.
func TestPlacementWeighsCPUSeconds(t *testing.T) {
	clearEnv(t)
	old, young := twoSlurms(t)
	hold(t, old, 1, `{"partition":"short","time_limit":60,"cpus_per_task":2,"hold":true}`)
	hold(t, young, 4, `{"partition":"short","time_limit":1,"cpus_per_task":1,"hold":true}`)
	targets := twoTargets(old, young)
	for _, policy := range []string{"least-pending", "earliest-start"} {
		t.Run(policy, func(t *testing.T) {
			state := t.TempDir()
			res := run(t, "invoke", "--state-dir", state, "--job-name", "weighed", "--backend", "slurm", "--placement", policy,
				"--targets", targets, "--job-properties", `{"partition":"short","time_limit":1}`,
				"--script", "#!/bin/sh\ntrue\n", "--update-interval", "1", "--watcher=false")
			require.Equal(t, 0, res.code, "%s\n%s", res.stdout, res.stderr)
			rec, err := record.NewFileStore(state, "weighed").Get(context.Background())
			require.NoError(t, err)
			p, err := record.ParsePlaced(rec.Data[record.KeyPlacement])
			require.NoError(t, err)
			require.NotNil(t, p)
			t.Logf("placement: %s", rec.Data[record.KeyPlacement])
			assert.Equal(t, "young", p.Target, "four one-minute jobs are less work than one of an hour on twice the CPUs")
			require.Len(t, p.Probes, 2)
			require.NotNil(t, p.Probes[0].PendingCPUSeconds, "22.05's probe tells CPU-seconds")
			require.NotNil(t, p.Probes[1].PendingCPUSeconds, "24.11's probe tells CPU-seconds")
			assert.GreaterOrEqual(t, *p.Probes[0].PendingCPUSeconds, int64(7200), "2 CPUs × 3600 s held on 22.05")
			assert.GreaterOrEqual(t, *p.Probes[1].PendingCPUSeconds, int64(240), "4 × 1 CPU × 60 s held on 24.11")
			assert.Equal(t, rec.Data[record.KeyID], jobWithKey(t, young, rec), "the recorded job is 24.11's")
		})
	}
}

// hold submits n held jobs with props to c (they wait, never run) and
// cancels them when the test ends.
func hold(t *testing.T, c slurmCluster, n int, props string) {
	be, err := slurm.New(backends.Config{URL: c.url, Credentials: runner.DirCredentials{Dir: c.creds, Secrets: &runner.Secrets{}}})
	require.NoError(t, err)
	for i := range n {
		id, err := be.Submit(context.Background(), backends.Job{Name: fmt.Sprintf("held-%d", i), Key: fmt.Sprintf("held-%d-%d", i, time.Now().UnixNano()),
			Script: "#!/bin/sh\ntrue\n", Properties: json.RawMessage(props)})
		require.NoError(t, err)
		t.Cleanup(func() { _ = be.Cancel(context.Background(), id) })
	}
}
