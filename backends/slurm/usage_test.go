package slurm

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestSacctUsageFoldsAnArray: an array's tasks are folded (CPU time and
// core-seconds summed, the largest task's memory and elapsed), other jobs'
// lines are ignored, and a task sacct has not fully recorded (ReqMem "16?",
// as seen under load) or not ended makes the whole answer "not yet".
func TestSacctUsageFoldsAnArray(t *testing.T) {
	out := "7_0|COMPLETED|2|10|5|00:08.500||1G|2026-11-29T10:00:00|2026-11-29T10:00:03\n" +
		"7_0.batch|COMPLETED|2|10||00:08.500|1024K||2026-11-29T10:00:03|2026-11-29T10:00:03\n" +
		"7_1|FAILED|2|20|5|1-01:00:01||1000Mc|2026-11-29T10:00:00|2026-11-29T10:00:01\n" +
		"7_1.batch|FAILED|2|20||00:01.000|3M||2026-11-29T10:00:01|2026-11-29T10:00:01\n" +
		"70|COMPLETED|2|20|5|00:01.000||1G|2026-11-29T10:00:00|2026-11-29T10:00:01\n"
	u, err := parseSacctUsage("7", out)
	require.NoError(t, err)
	assert.Equal(t, 2, u.Tasks)
	assert.InDelta(t, 8.5+86400+3600+1, u.CPUSeconds, 1e-9)
	assert.InDelta(t, 2*10+2*20, u.CoreSeconds, 1e-9)
	assert.Equal(t, 20*time.Second, u.Elapsed)
	assert.Equal(t, 5*time.Minute, u.TimeLimit)
	assert.Equal(t, int64(3<<20), u.MaxRSSBytes)
	assert.Equal(t, int64(2000<<20), u.ReqMemBytes, "1000Mc on 2 CPUs")
	assert.Equal(t, slurmTime("2026-11-29T10:00:01"), u.Start, "the earliest start")

	for name, lines := range map[string]string{
		"not recorded yet": "7|COMPLETED|1|3|5|00:00.002||16?|2026-11-29T10:00:00|2026-11-29T10:00:01\n",
		// slurmdbd 22.05 beside CI's lanes: the job's line before its request (sacct --noconvert).
		"no limit yet":  "7|COMPLETED|1|3||00:00.008||64M|2026-11-29T10:00:00|2026-11-29T10:00:01\n",
		"no memory yet": "7|COMPLETED|1|3|2|00:00.008||18446744073709551616.00M|2026-11-29T10:00:00|2026-11-29T10:00:01\n",
		"still running": "7|RUNNING|1|3|5|00:00.002||1G|2026-11-29T10:00:00|2026-11-29T10:00:01\n",
		"unknown":       "",
	} {
		_, err := parseSacctUsage("7", lines)
		assert.True(t, errors.Is(err, backends.ErrNotFound), "%s: %v", name, err)
	}
}
