package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// slurmArraysByComment returns, for the jobs slurmctld knows whose comment
// is key, how many records each array id has (a task that started has a
// record of its own; a job not in an array counts under its own id).
func slurmArraysByComment(t *testing.T, c slurmCluster, key string) map[string]int {
	t.Helper()
	var jr struct {
		Jobs []struct {
			ID      json.Number     `json:"job_id"`
			Comment string          `json:"comment"`
			Array   json.RawMessage `json:"array_job_id"` // a number (v0.0.38), {"number": n} later
		} `json:"jobs"`
	}
	getSlurmREST(t, c, "jobs/", &jr)
	out := map[string]int{}
	for _, j := range jr.Jobs {
		if j.Comment != key {
			continue
		}
		var n json.Number
		if json.Unmarshal(j.Array, &n) != nil {
			var set struct {
				Number json.Number `json:"number"`
			}
			_ = json.Unmarshal(j.Array, &set)
			n = set.Number
		}
		id := n.String()
		if id == "" || id == "0" {
			id = j.ID.String()
		}
		out[id]++
	}
	return out
}

// TestSlurmArrayCrashesSubmitOnce kills invoke with SIGKILL at each named
// point of the exactly-once protocol while it runs an array of 3 tasks on
// the real Slurm (22.05 and 24.11), then restarts it: the restart adopts
// the array (after-submit: found by its key, the tasks carry it too) and
// ends DONE=3, and slurmctld knows exactly one array with the run's key,
// of 3 tasks.
func TestSlurmArrayCrashesSubmitOnce(t *testing.T) {
	t.Parallel() // waits on real jobs; every run has its own --state-dir and key
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) {
			t.Parallel()
			for _, point := range runner.CrashPoints {
				state := t.TempDir()
				args := []string{"--state-dir", state, "--job-name", "array-crash", "--backend", "slurm", "--resource-url", c.url,
					"--credentials-dir", c.creds, "--script", "#!/bin/sh\nsleep 3\n", "--array", "0-2",
					"--update-interval", "1", "--submit-lease", "3s"}
				cmd, out := startInvoke(t, []string{"BRIDGE_CRASH_AT=" + point}, args...)
				err := cmd.Wait()
				var ee *exec.ExitError
				require.True(t, errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL,
					"invoke must die at %s: %s", point, out)
				again := exec.Command(binary, append([]string{"invoke"}, args...)...)
				var out2 bytes.Buffer
				again.Stdout, again.Stderr = &out2, &out2
				require.Equal(t, 0, exitOf(again.Run()), "after a crash at %s: %s", point, out2.String())
				assert.Equal(t, "DONE=3", summary(t, out2.String())["arrayCounts"], out2.String())
				rec, err := record.NewFileStore(state, "array-crash").Get(context.Background())
				require.NoError(t, err)
				arrays := slurmArraysByComment(t, c, rec.Data[record.KeyKey])
				assert.Equal(t, map[string]int{rec.Data[record.KeyID]: 3}, arrays,
					"crash at %s: one array of 3 tasks for the run, the one recorded", point)
			}
		})
	}
}
