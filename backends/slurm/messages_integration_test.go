package slurm

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestRealMissingWorkingDirectory: a job whose working directory does not
// exist ends FAILED with a message that says so and what to do, not
// "killed by signal 53", over REST (22.05, 24.11). (The same job submitted
// with sbatch over SSH ran to COMPLETED on 22.05: nothing to explain there.)
func TestRealMissingWorkingDirectory(t *testing.T) {
	props := json.RawMessage(`{"current_working_directory":"/nonexistent/bridge-runner-dir"}`)
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			b, _ := rs.backend(t, nil)
			id, err := b.Submit(context.Background(), backends.Job{Name: "nodir", Key: newKey(), Script: "#!/bin/sh\ntrue\n", Properties: props})
			require.NoError(t, err)
			st, _ := waitFor(t, b, id, time.Minute, final)
			require.Equal(t, backends.Failed, st.State, "%+v", st)
			require.Contains(t, st.Message, "working directory does not exist", st.Message)
			require.NotContains(t, st.Message, "killed by signal")
		})
	}
}
