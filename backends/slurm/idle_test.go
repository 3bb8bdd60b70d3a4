package slurm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestWaitSettledReadsABusyQueue: a partition other users keep busy (a
// sleeper running, a job held for its begin time: hack/noise.sh, or another
// CI lane) is read as it is, at once; the old waitIdle waited 90 s for it
// to go idle and then checked nothing. A probe that falls between two
// different readings (a job started), or that disagrees with a still queue
// (issue 37: counts idle with a CPU taken), is not taken.
func TestWaitSettledReadsABusyQueue(t *testing.T) {
	busy := queueView{running: 1, pending: 1, busyCPUs: 1}
	queues := []queueView{
		{}, busy, // a job started between the readings
		busy, busy, // still, but the probe below misses the running job
		busy, busy, // still, and the probe reads it
	}
	probes := []backends.Load{
		{TotalCPUs: 8, FreeCPUs: 8, TotalNodes: 1, FreeNodes: 1},
		{TotalCPUs: 8, FreeCPUs: 7, TotalNodes: 1, PendingJobs: 1},
		{TotalCPUs: 8, FreeCPUs: 7, TotalNodes: 1, RunningJobs: 1, PendingJobs: 1},
	}
	nq, np := 0, 0
	start := time.Now()
	l, v, ok := waitSettled(t, func() backends.Load {
		np++
		return probes[min(np, len(probes))-1]
	}, func() queueView {
		nq++
		return queues[min(nq, len(queues))-1]
	}, time.Minute)
	assert.True(t, ok)
	assert.Equal(t, busy, v)
	assert.Equal(t, probes[2], l)
	assert.Equal(t, 3, np, "probes")
	assert.Less(t, time.Since(start), 30*time.Second, "a busy queue is not waited out")
}

// TestQueueViewCountsThePartition: a pending job counts in each partition
// of its list; running CPUs count whatever their partition (one node); a
// job starting or ending makes the view move.
func TestQueueViewCountsThePartition(t *testing.T) {
	var v queueView
	v.add("RUNNING", "debug", 1, "None", "debug")
	v.add("RUNNING", "short", 2, "None", "debug")
	v.add("PENDING", "short,debug", 3, "BeginTime", "debug")
	v.add("PENDING", "short", 3, "Priority", "debug")
	v.add("COMPLETED", "debug", 1, "None", "debug")
	assert.Equal(t, queueView{running: 1, pending: 1, busyCPUs: 3}, v)
	v.add("PENDING", "debug", 1, "Resources", "debug")
	assert.True(t, v.ahead)
	v.add("COMPLETING", "debug", 1, "None", "debug")
	assert.True(t, v.moving)
}
