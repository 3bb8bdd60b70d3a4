package main

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

// TestSlurmEfficiencyRecorded: invoke on the real Slurm clusters records
// the job's efficiency once it ended: the figures from slurmdbd where the
// cluster keeps accounting (22.05 and 24.11 with slurmdbd, 26.05), and why
// there are none where it does not (22.05 and 24.11 without); the step ends
// DONE either way.
func TestSlurmEfficiencyRecorded(t *testing.T) {
	clearEnv(t)
	clusters := slurmClusters(t)
	for _, d := range []struct{ release, env, up string }{
		{"22.05+slurmdbd", "BRIDGE_TEST_SLURMDBD", "hack/slurmdbd-up.sh"},
		{"24.11+slurmdbd", "BRIDGE_TEST_SLURM2411DBD", "hack/slurm2411dbd-up.sh"},
	} {
		if u, c := os.Getenv(d.env+"_URL"), os.Getenv(d.env+"_CREDS"); u != "" && c != "" {
			clusters = append(clusters, slurmCluster{release: d.release, url: u, creds: c})
		} else if os.Getenv("CI") != "" {
			t.Error("no Slurm " + d.release + ": " + d.up)
		}
	}
	accounting := map[string]bool{"22.05+slurmdbd": true, "24.11+slurmdbd": true, "26.05": true}
	// The twins with slurmdbd also gather what jobs used (jobacct_gather/linux).
	gathers := map[string]bool{"22.05+slurmdbd": true, "24.11+slurmdbd": true}
	for _, c := range clusters {
		t.Run(c.release, func(t *testing.T) {
			state := t.TempDir()
			code, text := runBinary(t, "invoke", "--state-dir", state, "--job-name", "eff", "--backend", "slurm",
				"--resource-url", c.url, "--credentials-dir", c.creds, "--script", "#!/bin/sh\nsleep 2\n",
				"--job-properties", `{"time_limit":2,"memory_per_node":64,"standard_output":"/dev/null"}`, "--update-interval", "1")
			require.Equal(t, 0, code, text)
			rec, err := record.NewFileStore(state, "eff").Get(context.Background())
			require.NoError(t, err)
			t.Logf("%s: %s", record.KeyEfficiency, rec.Data[record.KeyEfficiency])
			e, err := record.ParseEfficiency(rec.Data[record.KeyEfficiency])
			require.NoError(t, err)
			require.NotNil(t, e)
			if !accounting[c.release] {
				assert.Equal(t, "accounting unavailable: the cluster keeps none", e.Unavailable)
				return
			}
			assert.Empty(t, e.Unavailable)
			assert.Equal(t, 1, e.Tasks)
			assert.Equal(t, int64(120), e.TimeLimitSeconds, "time_limit 2 (minutes)")
			assert.Equal(t, int64(64<<20), e.ReqMemBytes, "memory_per_node 64 (MiB)")
			require.NotNil(t, e.Time)
			require.NotNil(t, e.QueueWaitSeconds)
			if gathers[c.release] {
				assert.NotNil(t, e.CPU, "CPU time against CPUs x elapsed")
				assert.NotNil(t, e.Memory, "peak memory against requested")
				assert.Positive(t, e.MaxRSSBytes)
			}
		})
	}
}
