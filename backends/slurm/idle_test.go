package slurm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestWaitIdleWantsOneConsistentProbe: issue 37. On a shared partition a
// probe can count no job while another test's job, started between its
// commands, holds a CPU. waitIdle takes only a probe idle in every figure;
// the old one took the first whose counts were idle, and TestSSHProbeLoad
// then expected 8 free CPUs and saw 7.
func TestWaitIdleWantsOneConsistentProbe(t *testing.T) {
	probes := []backends.Load{
		{TotalCPUs: 8, FreeCPUs: 7, TotalNodes: 1, FreeNodes: 1}, // counts idle, a CPU taken
		{TotalCPUs: 8, FreeCPUs: 8, TotalNodes: 1, FreeNodes: 1},
	}
	n := 0
	l, ok := waitIdle(t, func() backends.Load {
		n++
		return probes[min(n, len(probes))-1]
	}, time.Minute)
	assert.True(t, ok)
	assert.Equal(t, l.TotalCPUs, l.FreeCPUs, "the idle probe is idle in every figure")
	assert.Equal(t, 2, n)
}
