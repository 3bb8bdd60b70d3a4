package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// probeJob is a job for the probe and for the jobs that load the
// partition: props are its jobproperties.
func probeJob(script, props string) backends.Job {
	return backends.Job{Name: "probe", Key: newKey(), Script: script, Properties: json.RawMessage(props)}
}

// checkCounts: counts are known and consistent.
func checkCounts(t *testing.T, l backends.Load) {
	t.Helper()
	assert.Greater(t, l.TotalCPUs, 0, "%+v", l)
	assert.Greater(t, l.TotalNodes, 0, "%+v", l)
	assert.True(t, l.FreeCPUs >= 0 && l.FreeCPUs <= l.TotalCPUs, "%+v", l)
	assert.True(t, l.FreeNodes >= 0 && l.FreeNodes <= l.TotalNodes, "%+v", l)
	assert.True(t, l.PendingJobs >= 0 && l.RunningJobs >= 0 && l.PendingCPUs >= 0, "%+v", l)
}

// TestRealProbeLoad: on each real cluster and API, a probe of the debug
// partition costs three GETs and reads it as it is: idle (when other tests
// leave it so), then with a running 2-CPU job and a held one; a job one
// CPU over the partition does not fit, and Slurm agrees (it refuses the
// job; one of exactly the partition's CPUs it takes); an unknown partition
// is invalid; a slurmrestd that is not there is transient.
func TestRealProbeLoad(t *testing.T) {
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) { realProbeLoad(t, rs) })
	}
}

func realProbeLoad(t *testing.T, rs *realSlurm) {
	b, ct := rs.backend(t, nil)
	ctx := context.Background()
	_, err := b.version(ctx)
	require.NoError(t, err)
	probe := func(j backends.Job) (backends.Load, error) {
		before := ct.total()
		start := time.Now()
		l, err := b.ProbeLoad(ctx, j, nil)
		if n := ct.total() - before; err == nil {
			assert.Equal(t, 3, n, "requests per probe")
			t.Logf("probe: %d requests in %s: %+v", n, time.Since(start).Round(time.Millisecond), l)
		}
		return l, err
	}
	sleeper := "#!/bin/sh\nsleep 120\n"
	// The partition as it is: other lanes' jobs share it (see waitSettled).
	now, _, ok := waitSettled(t, func() backends.Load {
		l, err := probe(probeJob(sleeper, `{"partition":"debug"}`))
		require.NoError(t, err)
		return l
	}, func() queueView { return restQueue(ctx, t, b, "debug") }, 90*time.Second)
	require.True(t, now.Fits, now.Why)
	assert.Equal(t, "debug", now.Queue)
	assert.Equal(t, 1, now.JobCPUs)
	checkCounts(t, now)
	if !ok {
		t.Logf("the queue never held still between two readings: the probe not checked against it")
	}
	total := now.TotalCPUs

	// A running 2-CPU job and a held one.
	run, err := b.Submit(ctx, probeJob(sleeper, `{"partition":"debug","cpus_per_task":2,"time_limit":3}`))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Cancel(context.Background(), run) })
	held, err := b.Submit(ctx, probeJob(sleeper, `{"partition":"debug","cpus_per_task":3,"hold":true}`))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Cancel(context.Background(), held) })
	waitFor(t, b, run, time.Minute, func(st backends.Status) bool { return st.State == backends.Running || st.State.Final() })
	busy, err := probe(probeJob(sleeper, `{"partition":"debug"}`))
	require.NoError(t, err)
	checkCounts(t, busy)
	assert.LessOrEqual(t, busy.FreeCPUs, total-2, "our running job holds 2 CPUs")
	assert.GreaterOrEqual(t, busy.RunningJobs, 1)
	assert.GreaterOrEqual(t, busy.PendingJobs, 1, "our held job")
	assert.GreaterOrEqual(t, busy.PendingCPUs, 3, "our held job asks for 3 CPUs")
	require.NoError(t, b.Cancel(ctx, run))
	require.NoError(t, b.Cancel(ctx, held))

	// Too big by one CPU; all of the partition's CPUs fit, and Slurm takes
	// such a job. (24.11 takes the one too big as well, held, and leaves it
	// pending: it is not submitted.)
	l, err := probe(probeJob(sleeper, fmt.Sprintf(`{"partition":"debug","cpus_per_task":%d,"hold":true}`, total+1)))
	require.NoError(t, err)
	assert.False(t, l.Fits)
	assert.Contains(t, l.Why, fmt.Sprintf("asks for %d CPUs", total+1))
	exact := probeJob(sleeper, fmt.Sprintf(`{"partition":"debug","cpus_per_task":%d,"hold":true}`, total))
	l, err = probe(exact)
	require.NoError(t, err)
	assert.True(t, l.Fits, l.Why)
	id, err := b.Submit(ctx, exact)
	require.NoError(t, err, "Slurm refuses a job the probe says fits")
	require.NoError(t, b.Cancel(ctx, id))

	realProbeEdges(t, rs, b, probe)
}

// realProbeEdges: the default partition (flagged by v0.0.38 and again by
// v0.0.45, the only one in between), an unknown partition, a slurmrestd
// that is not there.
func realProbeEdges(t *testing.T, rs *realSlurm, b *Backend, probe func(backends.Job) (backends.Load, error)) {
	ctx := context.Background()
	sleeper := "#!/bin/sh\nsleep 120\n"
	all, err := b.partitions(ctx)
	require.NoError(t, err)
	l, err := probe(probeJob(sleeper, `{}`))
	require.NoError(t, err)
	if v, _ := b.version(ctx); v <= 38 || v >= 45 || len(all) == 1 {
		assert.Equal(t, "debug", l.Queue)
	} else {
		want := backends.UnknownLoad("") // no default marked: unknown, but what the job asks is known
		want.JobCPUs = 1
		assert.Equal(t, want, l)
	}

	_, err = b.ProbeLoad(ctx, probeJob(sleeper, `{"partition":"debug,no-such-partition"}`), nil)
	testutil.RequireFieldError(t, err, "jobproperties.partition")

	down, err := New(backends.Config{URL: "http://127.0.0.1:1/slurm/v0.0.42", Credentials: rs.creds})
	require.NoError(t, err)
	_, err = down.(*Backend).ProbeLoad(ctx, probeJob(sleeper, `{}`), nil)
	assert.ErrorIs(t, err, backends.ErrTransient)
}

// needTwoPartitions returns two partitions of the running cluster, or
// skips (fails under CI) when it has one: hack/slurm-up.sh and
// hack/slurm2411-up.sh define a second one, which a running cluster has
// only once its services are restarted.
func needTwoPartitions(t *testing.T, names []string, cluster string) (string, string) {
	t.Helper()
	if len(names) >= 2 {
		return names[0], names[1]
	}
	msg := fmt.Sprintf("%s has the partitions %v, not two: a partition list cannot be tested; hack/slurm-up.sh and hack/slurm2411-up.sh define a second partition (short), which the cluster has once its services are restarted", cluster, names)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return "", ""
}

// TestRealPartitionList: a job whose partition is a list of two runs on
// each real cluster, and the probe reads both in its three requests.
func TestRealPartitionList(t *testing.T) {
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			b, ct := rs.backend(t, nil)
			ctx := context.Background()
			_, err := b.version(ctx)
			require.NoError(t, err)
			all, err := b.partitions(ctx)
			require.NoError(t, err)
			var names []string
			for _, p := range all {
				names = append(names, p.name)
			}
			p1, p2 := needTwoPartitions(t, names, "Slurm "+rs.name)
			list := fmt.Sprintf(`{"partition":"%s,%s","time_limit":5}`, p1, p2)
			before := ct.total()
			l, err := b.ProbeLoad(ctx, probeJob("#!/bin/sh\ntrue\n", list), nil)
			require.NoError(t, err)
			assert.Equal(t, 3, ct.total()-before)
			assert.True(t, l.Fits, l.Why)
			assert.Equal(t, p1+","+p2, l.Queue)
			id, err := b.Submit(ctx, probeJob("#!/bin/sh\ntrue\n", list))
			require.NoError(t, err)
			st, _ := waitFor(t, b, id, time.Minute, final)
			assert.Equal(t, backends.Done, st.State, st.Message)
		})
	}
}

// TestSSHProbeLoad: over SSH, the probe reads the debug partition as REST
// does, with the scheduler's start estimate; a running 2-CPU job and a
// pending one show; too big a job does not fit; an unknown partition is
// invalid; a login node that is not there is transient.
func TestSSHProbeLoad(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, 5*time.Minute)
	sleeper := "#!/bin/sh\nsleep 120\n"
	probe := func(j backends.Job) (backends.Load, error) {
		start, cmds, dials := time.Now(), b.ssh.Commands(), b.ssh.Dials()
		l, err := b.ProbeLoad(ctx, j, nil)
		n := b.ssh.Commands() - cmds
		t.Logf("probe over SSH: %d commands in %s: %+v", n, time.Since(start).Round(time.Millisecond), l)
		if err == nil {
			assert.Equal(t, 3, n, "commands per probe")
			assert.LessOrEqual(t, b.ssh.Dials()-dials, 1, "one connection")
		}
		return l, err
	}
	// The partition as it is: other lanes' jobs share it (see waitSettled).
	now, queue, ok := waitSettled(t, func() backends.Load {
		l, err := probe(probeJob(sleeper, `{}`))
		require.NoError(t, err)
		return l
	}, func() queueView { return sshQueue(ctx, t, b, "debug") }, 90*time.Second)
	require.True(t, now.Fits, now.Why)
	assert.Equal(t, "debug", now.Queue, "the default partition")
	checkCounts(t, now)
	if ok && now.FreeCPUs >= 1 && !queue.ahead {
		checkStartsNow(t, now, func() (backends.Load, error) { return probe(probeJob(sleeper, `{}`)) }, func() bool { return beginTimeHeld(ctx, t, b) })
	}
	total := now.TotalCPUs

	run, err := b.Submit(ctx, probeJob(sleeper, `{"cpus-per-task":2,"time":"3:00"}`))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Cancel(context.Background(), run) })
	later, err := b.Submit(ctx, probeJob(sleeper, `{"begin":"now+1hour","cpus_per_task":3}`))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Cancel(context.Background(), later) })
	sshFollow(t, b, run, backends.Running)
	busy, err := probe(probeJob(sleeper, `{"partition":"debug"}`))
	require.NoError(t, err)
	checkCounts(t, busy)
	assert.LessOrEqual(t, busy.FreeCPUs, total-2)
	assert.GreaterOrEqual(t, busy.RunningJobs, 1)
	assert.GreaterOrEqual(t, busy.PendingJobs, 1)
	assert.GreaterOrEqual(t, busy.PendingCPUs, 3)
	// 22.05's sbatch --test-only answers the year 3047 while a job waits
	// for its begin time: that is no estimate.
	assert.True(t, busy.EstimatedStart.IsZero() || busy.EstimatedStart.Before(time.Now().Add(24*time.Hour)), "%s", busy.EstimatedStart)
	require.NoError(t, b.Cancel(ctx, run))
	require.NoError(t, b.Cancel(ctx, later))

	l, err := probe(probeJob(sleeper, fmt.Sprintf(`{"ntasks":%d}`, total+1)))
	require.NoError(t, err)
	assert.False(t, l.Fits)
	assert.Contains(t, l.Why, fmt.Sprintf("asks for %d CPUs", total+1))
	assert.True(t, l.EstimatedStart.IsZero())

	_, err = b.ProbeLoad(ctx, probeJob(sleeper, `{"partition":"no-such-partition"}`), nil)
	testutil.RequireFieldError(t, err, "jobproperties.partition")

	srv := testssh.Default(t)
	down, err := New(backends.Config{URL: "ssh://" + srv.User + "@127.0.0.1:1", Credentials: testssh.Creds(t, srv.CredsDir)})
	require.NoError(t, err)
	defer down.(*SSHBackend).Close()
	_, err = down.(*SSHBackend).ProbeLoad(ctx, probeJob(sleeper, `{}`), nil)
	assert.ErrorIs(t, err, backends.ErrTransient)
}

// checkStartsNow: with a CPU of the partition free and no job waiting for
// CPUs before ours, the scheduler starts a job now (l's estimate, or the
// next probe's). But a job of another user waiting for its begin time, in
// any partition of this shared cluster, turns 22.05's estimate into the
// year 3047, which the probe reads as none: then only that is checked.
// Such a job may also come and go between the probe and the look for it
// (another lane's test submits one and cancels it when it ends, and squeue
// shows it with no reason until the scheduler's next pass): a missing
// estimate is asked again for a while, until it is there or such a job
// shows.
func checkStartsNow(t *testing.T, l backends.Load, probe func() (backends.Load, error), heldForBeginTime func() bool) {
	t.Helper()
	est, held := l.EstimatedStart, false
	for deadline := time.Now().Add(20 * time.Second); est.IsZero(); {
		if held = heldForBeginTime(); held || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
		if again, err := probe(); err == nil && again.FreeCPUs >= 1 {
			est = again.EstimatedStart
		}
	}
	if !held {
		assert.False(t, est.IsZero(), "sbatch --test-only's estimate")
		assert.WithinDuration(t, time.Now(), est, time.Minute, "a partition with a CPU free starts a job now")
	}
}

// beginTimeHeld says whether any job of the cluster is pending for its
// begin time (squeue's reason BeginTime), whoever submitted it.
func beginTimeHeld(ctx context.Context, t *testing.T, b *SSHBackend) bool {
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"squeue", "--noheader", "--states=PENDING", "--format=%i %P %r"}})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, "squeue: %s", res.Stderr)
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), " BeginTime") {
			t.Logf("pending for its begin time: %s", line)
			return true
		}
	}
	return false
}

// TestSSHPartitionList: over SSH a job whose partition is a list of two
// runs, and the probe reads both.
func TestSSHPartitionList(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, 2*time.Minute)
	all, err := b.sinfo(ctx)
	require.NoError(t, err)
	var names []string
	for _, p := range all {
		names = append(names, p.name)
	}
	p1, p2 := needTwoPartitions(t, names, "the Slurm of the SSH login node")
	list := fmt.Sprintf(`{"partition":"%s,%s","time":"5:00"}`, p1, p2)
	l, err := b.ProbeLoad(ctx, probeJob("#!/bin/sh\ntrue\n", list), nil)
	require.NoError(t, err)
	assert.True(t, l.Fits, l.Why)
	assert.Equal(t, p1+","+p2, l.Queue)
	id, err := b.Submit(ctx, probeJob("#!/bin/sh\ntrue\n", list))
	require.NoError(t, err)
	st := sshFollow(t, b, id, backends.Done)
	assert.Equal(t, backends.Done, st.State, st.Message)
	assert.True(t, strings.Contains(p1+p2, "debug"))
}
