package slurm

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

// The real-service side of notBacklog: in partition short (two CPUs a
// node) filled by a 2-CPU sleeper of the test's, its jobs that wait for no
// CPU (held, begun an hour from now, waiting on the sleeper's end) leave
// the probe's PendingJobs as the queue is without them, and its job that
// waits for the sleeper's CPUs adds one. Other lanes' jobs share the
// cluster: the queue is read around the probe with the test's pending
// jobs left out (waitSettledBy), so only the difference its own jobs make
// is checked, never an idle partition.

// heldAgrees checks a probe of short against the queue without the test's
// pending jobs, plus the one that waits for CPUs.
func heldAgrees(l backends.Load, v queueView) bool {
	return l.PendingJobs == v.pending+1 && l.RunningJobs == v.running
}

// TestRealHeldJobsAreNoBacklog: the above over REST, on each real cluster
// and API (22.05's v0.0.38 has no hold flag: its state_reason says it).
func TestRealHeldJobsAreNoBacklog(t *testing.T) {
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) { realHeldNoBacklog(t, rs) })
	}
}

func realHeldNoBacklog(t *testing.T, rs *realSlurm) {
	b, _ := rs.backend(t, nil)
	ctx := context.Background()
	v, err := b.version(ctx)
	require.NoError(t, err)
	submit := func(props string) string {
		id, err := b.Submit(ctx, probeJob("#!/bin/sh\nsleep 120\n", props))
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
		return id
	}
	fill := submit(`{"partition":"short","cpus_per_task":2,"time_limit":3}`)
	st, _ := waitFor(t, b, fill, 2*time.Minute, func(st backends.Status) bool { return st.State == backends.Running || st.State.Final() })
	require.Equal(t, backends.Running, st.State, "the sleeper that fills short: %s", st.Message)
	begin := `"now+3600"` // v0.0.38 takes sbatch's words
	if !v.envAsObject() {
		begin = strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	}
	idle := map[string]string{
		submit(`{"partition":"short","time_limit":1,"hold":true}`):                         "JobHeld",
		submit(`{"partition":"short","time_limit":1,"begin_time":` + begin + `}`):          "BeginTime",
		submit(`{"partition":"short","time_limit":1,"dependency":"afterok:` + fill + `"}`): "Dependency",
	}
	waiting := submit(`{"partition":"short","time_limit":1}`)
	reason := func(id string) string {
		st, err := b.Status(ctx, id)
		require.NoError(t, err)
		return st.Reason
	}
	ours := waitReasons(t, idle, waiting, reason)

	l, q, ok := waitSettledBy(t, func() backends.Load {
		l, err := b.ProbeLoad(ctx, probeJob("#!/bin/sh\ntrue\n", `{"partition":"short"}`), nil)
		require.NoError(t, err)
		return l
	}, func() queueView { return restQueue(ctx, t, b, "short", ours...) }, 90*time.Second, heldAgrees)
	t.Logf("probe of short: %+v; the queue without our pending jobs: %+v", l, q)
	require.True(t, ok, "no probe read the queue as it was, held still around it")
	assert.GreaterOrEqual(t, l.PendingJobs, 1, "our job waiting for CPUs")
	assert.GreaterOrEqual(t, l.PendingCPUs, 1)
}

// TestSSHHeldJobsAreNoBacklog: the above over SSH (squeue's %r), on the
// login node's cluster.
func TestSSHHeldJobsAreNoBacklog(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, 5*time.Minute)
	submit := func(props string) string {
		id, err := b.Submit(ctx, probeJob("#!/bin/sh\nsleep 120\n", props))
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
		return id
	}
	fill := submit(`{"partition":"short","cpus-per-task":2,"time":"3:00"}`)
	st := sshFollow(t, b, fill, backends.Running)
	require.Equal(t, backends.Running, st.State, "the sleeper that fills short: %s", st.Message)
	// The backend refuses hold in jobproperties (a step's job would never
	// start): sbatch --hold itself.
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"sbatch", "--parsable", "--hold", "--partition=short", "--time=1:00",
		"--chdir=/tmp", "--job-name=" + newKey() + "-held", "--wrap=sleep 60"}})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, "sbatch --hold: %s", res.Stderr)
	held := strings.TrimSpace(string(res.Stdout))
	t.Cleanup(func() { _ = b.Cancel(context.Background(), held) })
	idle := map[string]string{
		held: "JobHeld",
		submit(`{"partition":"short","time":"1:00","begin":"now+1hour"}`):                 "BeginTime",
		submit(`{"partition":"short","time":"1:00","dependency":"afterok:` + fill + `"}`): "Dependency",
	}
	waiting := submit(`{"partition":"short","time":"1:00"}`)
	reason := func(id string) string {
		res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"squeue", "--noheader", "--jobs=" + id, "--format=%r"}})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, "squeue: %s", res.Stderr)
		return strings.TrimSpace(string(res.Stdout))
	}
	ours := waitReasons(t, idle, waiting, reason)

	l, q, ok := waitSettledBy(t, func() backends.Load {
		l, err := b.ProbeLoad(ctx, probeJob("#!/bin/sh\ntrue\n", `{"partition":"short"}`), nil)
		require.NoError(t, err)
		return l
	}, func() queueView { return sshQueue(ctx, t, b, "short", ours...) }, 90*time.Second, heldAgrees)
	t.Logf("probe of short over SSH: %+v; the queue without our pending jobs: %+v", l, q)
	require.True(t, ok, "no probe read the queue as it was, held still around it")
	assert.GreaterOrEqual(t, l.PendingJobs, 1, "our job waiting for CPUs")
	assert.GreaterOrEqual(t, l.PendingCPUs, 1)
}

// waitReasons waits until each job of idle pends for the reason it is
// given (a prefix: JobHeld is JobHeldUser or JobHeldAdmin, by who
// submits) and waiting for one of CPUs' (None until the scheduler has
// looked, then Resources or Priority), as reason reads them; it returns
// every id.
func waitReasons(t *testing.T, idle map[string]string, waiting string, reason func(string) string) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, all := map[string]string{}, true
		for id, want := range idle {
			got[id] = reason(id)
			all = all && strings.HasPrefix(got[id], want)
		}
		got[waiting] = reason(waiting)
		if w := got[waiting]; all && (w == "None" || w == "Resources" || w == "Priority") {
			t.Logf("our pending jobs' reasons: %v", got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("our pending jobs' reasons: %v, want %v and None, Resources or Priority for %s", got, idle, waiting)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ids := []string{waiting}
	for id := range idle {
		ids = append(ids, id)
	}
	return ids
}
