package slurm

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/record"
)

// queueView is the shared cluster's queue as a test reads it itself, apart
// from the probe: the jobs of one partition, and the CPUs every running job
// holds (the test clusters have one node, in every partition).
type queueView struct {
	running, pending int  // jobs of the partition (a pending job's list names it)
	busyCPUs         int  // CPUs of every running job of the node
	moving           bool // a job starting or ending (CONFIGURING, COMPLETING...): counts in flux
	ahead            bool // a job of the partition pending for CPUs (Priority, Resources): a start estimate may be later than now
}

// add counts one squeue or jobs/ line: its state, partition (list),
// CPUs and pending reason.
func (v *queueView) add(state, partitions string, cpus int, reason, partition string) {
	in := slices.Contains(strings.Split(partitions, ","), partition)
	switch state {
	case "RUNNING":
		v.busyCPUs += cpus
		if in {
			v.running++
		}
	case "PENDING":
		if in {
			v.pending++
			v.ahead = v.ahead || reason == "Priority" || reason == "Resources"
		}
	case "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE":
	default:
		v.moving = true
	}
}

// restQueue reads the queue of rs's cluster with one GET jobs/, decoded
// here, not by the probe's reader.
func restQueue(ctx context.Context, t *testing.T, b *Backend, partition string) queueView {
	r, err := b.get(ctx, "jobs/")
	require.NoError(t, err)
	var doc struct {
		Jobs []struct {
			State     json.RawMessage `json:"job_state"`
			Partition string          `json:"partition"`
			CPUs      json.RawMessage `json:"cpus"`
			Reason    string          `json:"state_reason"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(r.body, &doc))
	var v queueView
	for _, j := range doc.Jobs {
		st := states(j.State)
		if len(st) == 0 {
			continue
		}
		cpus, _ := number(j.CPUs)
		v.add(st[0], j.Partition, int(cpus), j.Reason, partition)
	}
	return v
}

// sshQueue reads the queue of the login node's cluster with one squeue.
func sshQueue(ctx context.Context, t *testing.T, b *SSHBackend, partition string) queueView {
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"squeue", "--noheader", "--all", "--format=%T|%P|%C|%r"}})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, "squeue: %s", res.Stderr)
	var v queueView
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 4 {
			continue
		}
		cpus, _ := strconv.Atoi(f[2])
		v.add(f[0], f[1], cpus, f[3], partition)
	}
	return v
}

// waitSettled probes until one probe falls between two equal readings of
// the queue with no job starting or ending (other users' jobs come and go
// on the shared cluster), and checks the probe reads that queue as it is:
// its jobs, and every CPU free but the running jobs'. The partition need
// not be idle: other lanes' and hack/noise.sh's jobs are counted, not
// waited out. ok is false when the queue never held still; a probe that
// disagrees with a still queue is retried (a job can start and end between
// two readings) and fails the test when it never agrees.
func waitSettled(t *testing.T, probe func() backends.Load, queue func() queueView, limit time.Duration) (backends.Load, queueView, bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var l backends.Load
	var before queueView
	disagreed := 0
	// Short: the readings must fall between other users' jobs starting and ending.
	wait := record.Backoff{Initial: 200 * time.Millisecond, Max: time.Second}
	for {
		before = queue()
		l = probe()
		if after := queue(); after == before && !before.moving {
			if readsQueue(l, before) {
				return l, before, true
			}
			disagreed++
			t.Logf("a still queue %+v, read by the probe as %+v", before, l)
		}
		if time.Now().After(deadline) {
			assert.Less(t, disagreed, 5, "the probe never read a still queue as it was: %+v, queue %+v", l, before)
			return l, before, false
		}
		time.Sleep(wait.Next())
	}
}

// readsQueue: the probe counts the queue's jobs, and every CPU is free but
// those of the running jobs (all nodes free when none runs).
func readsQueue(l backends.Load, v queueView) bool {
	return l.RunningJobs == v.running && l.PendingJobs == v.pending && l.FreeCPUs == l.TotalCPUs-v.busyCPUs &&
		(v.busyCPUs > 0 || l.FreeNodes == l.TotalNodes)
}
