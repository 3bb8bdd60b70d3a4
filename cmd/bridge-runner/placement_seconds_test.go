package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
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
// waits in partition short (2 CPUs × 60 minutes), on 24.11 four short ones
// (1 CPU × 1 minute each), each behind a 2-CPU sleeper of the test's that
// fills short (two CPUs a node) for two minutes: jobs that wait for CPUs,
// since a held one would be no backlog. By job counts 22.05 has less
// waiting (what main chose); by CPU-seconds, which both probes read from
// the jobs' time limits, 24.11 has 30 times less, and both policies that
// weigh the queue place the job there. The record keeps the figures. Once
// the job is placed the test's jobs go, and it runs on 24.11.
func TestPlacementWeighsCPUSeconds(t *testing.T) {
	clearEnv(t)
	old, young := twoSlurms(t)
	targets := twoTargets(old, young)
	for _, policy := range []string{"least-pending", "earliest-start"} {
		t.Run(policy, func(t *testing.T) {
			unfillOld := backlog(t, old, 2, `{"partition":"short","time_limit":60,"cpus_per_task":2}`)
			unfillYoung := backlog(t, young, 2, slices.Repeat([]string{`{"partition":"short","time_limit":1,"cpus_per_task":1}`}, 4)...)
			state := t.TempDir()
			whenPlaced(state, "weighed", func() { unfillOld(); unfillYoung() })
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
			assert.GreaterOrEqual(t, *p.Probes[0].PendingCPUSeconds, int64(7200), "2 CPUs × 3600 s waiting on 22.05")
			assert.GreaterOrEqual(t, *p.Probes[1].PendingCPUSeconds, int64(240), "4 × 1 CPU × 60 s waiting on 24.11")
			assert.Equal(t, rec.Data[record.KeyID], jobWithKey(t, young, rec), "the recorded job is 24.11's")
		})
	}
}

// backlog makes real backlog in c's partition short (two CPUs a node): a
// 2-CPU sleeper of the test's fills it, RUNNING, for at most fillMinutes;
// then one job for each of pending (its jobproperties) waits there for
// CPUs. A held job, or one begun later, would not do: it waits for no CPU,
// and the probe does not count it. The returned function cancels them all,
// the waiting ones first (it is also called when the test ends).
func backlog(t *testing.T, c slurmCluster, fillMinutes int, pending ...string) func() {
	t.Helper()
	be, err := slurm.New(backends.Config{URL: c.url, Credentials: runner.DirCredentials{Dir: c.creds, Secrets: &runner.Secrets{}}})
	require.NoError(t, err)
	ctx := context.Background()
	var ids []string
	submit := func(name, script, props string) string {
		id, err := be.Submit(ctx, backends.Job{Name: name, Key: fmt.Sprintf("%s-%d", name, time.Now().UnixNano()),
			Script: script, Properties: json.RawMessage(props)})
		require.NoError(t, err)
		ids = append(ids, id)
		return id
	}
	var once sync.Once
	unfill := func() {
		once.Do(func() {
			for _, id := range slices.Backward(ids) {
				_ = be.Cancel(ctx, id)
			}
		})
	}
	t.Cleanup(unfill)
	fill := submit("backlog-fill", "#!/bin/sh\nsleep 600\n", fmt.Sprintf(`{"partition":"short","time_limit":%d,"cpus_per_task":2}`, fillMinutes))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := be.Status(ctx, fill)
		require.NoError(t, err)
		if st.State == backends.Running {
			break
		}
		require.False(t, st.State.Final() || time.Now().After(deadline), "%s's sleeper that fills short is %s (%s), not RUNNING", c.release, st.State, st.Message)
		time.Sleep(200 * time.Millisecond)
	}
	for i, props := range pending {
		submit(fmt.Sprintf("backlog-%d", i), "#!/bin/sh\ntrue\n", props)
	}
	return unfill
}

// whenPlaced calls do once the record of job name in the state directory
// state names a placement (within a minute), from a goroutine of its own.
func whenPlaced(state, name string, do func()) {
	go func() {
		store := record.NewFileStore(state, name)
		for range 600 {
			if rec, err := store.Get(context.Background()); err == nil && rec.Data[record.KeyPlacement] != "" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		do()
	}()
}
