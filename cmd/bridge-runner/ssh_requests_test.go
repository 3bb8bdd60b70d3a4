package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

// TestSSHBackendsCountCommands: invoke over SSH (HTCondor's and Slurm's
// login nodes) counts its commands in the record's request counts, by
// kind, as it counts HTTP requests by class (before, an SSH job's record
// said nothing), and records the job's efficiency from the system's
// accounting, or why there is none.
func TestSSHBackendsCountCommands(t *testing.T) {
	for _, sys := range sshSystems {
		t.Run(sys.name, func(t *testing.T) {
			clearEnv(t)
			srv := sys.srv(t)
			state := t.TempDir()
			props := `{"request_cpus":1}`
			if sys.backend == "slurm" {
				props = `{"ntasks":1}`
			}
			code, text := runBinary(t, "invoke", "--state-dir", state, "--job-name", "ssh-count", "--backend", sys.backend,
				"--resource-url", srv.URL, "--credentials-dir", srv.CredsDir, "--script", "#!/bin/sh\necho counted\n",
				"--job-properties", props, "--update-interval", "1")
			require.Equal(t, 0, code, text)
			rec, err := record.NewFileStore(state, "ssh-count").Get(context.Background())
			require.NoError(t, err)
			counts := record.ParseRequests(rec.Data[record.KeyBackendRequests])
			t.Logf("%s: %s", record.KeyBackendRequests, rec.Data[record.KeyBackendRequests])
			assert.EqualValues(t, 1, counts["ssh-submit"], "one submit command")
			assert.GreaterOrEqual(t, counts["ssh-status"], int64(1), "status commands")
			assert.Zero(t, counts["2xx"], "no HTTP")
			e, err := record.ParseEfficiency(rec.Data[record.KeyEfficiency])
			require.NoError(t, err)
			require.NotNil(t, e, "the record has status.efficiency")
			t.Logf("%s: %s", record.KeyEfficiency, rec.Data[record.KeyEfficiency])
			assert.True(t, e.Unavailable != "" || e.Tasks == 1, "figures or why there are none")
			assert.Equal(t, rec.Data[record.KeyEfficiency], summary(t, text)["efficiency"], "the output is the record's")
		})
	}
}
