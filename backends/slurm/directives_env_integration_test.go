package slurm

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// envParityScript prints its SLURM_* environment; its directives are the ones
// sbatch turns into variables, and a few that it does not.
const envParityScript = `#!/bin/bash
#SBATCH --job-name=envparity
#SBATCH -p debug
#SBATCH -N 1
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=2
#SBATCH --ntasks-per-node=2
#SBATCH --mem=64M
#SBATCH -t 2
#SBATCH -D /tmp
#SBATCH -o /tmp/envparity-%j.out
env | grep ^SLURM_ | sort
`

// envMayDiffer are the SLURM_* variables whose value (or presence) may
// differ between the same script submitted over REST and with sbatch, each
// for a reason of its own. Every other variable must be the same on both.
var envMayDiffer = map[string]string{
	"SLURM_JOB_ID":         "each job's own id",
	"SLURM_JOBID":          "each job's own id (the old name)",
	"SLURM_TASK_PID":       "the batch shell's process id",
	"SLURM_SUBMIT_DIR":     "sbatch's working directory at submit (the login shell's); a REST submit has none, and the job runs in its --chdir",
	"SLURM_SUBMIT_HOST":    "the host sbatch ran on (the login node); a REST submit has none",
	"SLURM_PRIO_PROCESS":   "sbatch's own scheduling priority (its nice value on the login node); a REST submit has no process to take it from, and slurmd then runs the job at its default",
	"SLURM_JOB_USER":       "the job's user: on this machine the suite's sshd logs in as another user than slurmrestd's token names (on a site both are the user's)",
	"SLURM_JOB_UID":        "the job's user's uid (see SLURM_JOB_USER)",
	"SLURM_JOB_GID":        "the job's user's gid (see SLURM_JOB_USER)",
	"SLURM_JOB_START_TIME": "each job's own start",
	"SLURM_JOB_END_TIME":   "each job's own start plus its time limit",
	"SLURM_JOB_SLUID":      "each job's own unique id (26.05 sets it, over REST and under sbatch alike)",
}

// TestRealSbatchEnvironmentParity: the same script sees the same SLURM_*
// environment over REST as under sbatch (22.05: through the suite's sshd,
// as the SSH flavour submits; 24.11 and 26.05: their own sbatch in their
// chroots), but
// for envMayDiffer. Over REST the job once lacked SLURM_CPUS_PER_TASK,
// SLURM_NTASKS and SLURM_MEM_PER_NODE, which sbatch sets from the script's
// directives.
func TestRealSbatchEnvironmentParity(t *testing.T) {
	for _, rs := range realSlurms(t) {
		if strings.Contains(rs.name, "-v") {
			continue // the environment is the cluster's, not the API version's
		}
		t.Run(rs.name, func(t *testing.T) {
			side := paritySide(t, rs)
			b, _ := rs.backend(t, nil)
			restID, err := b.Submit(context.Background(), backends.Job{Name: "step", Key: newKey(), Script: envParityScript})
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Cancel(context.Background(), restID) })
			sbID := side.submit(t, envParityScript, newKey())
			t.Cleanup(func() { side.cancel(sbID) })

			for _, id := range []string{restID, sbID} {
				waitFor(t, b, id, 2*time.Minute, func(st backends.Status) bool { return st.State.Final() })
			}
			rest, sb := jobEnv(t, rs, restID), jobEnv(t, rs, sbID)
			t.Logf("REST job %s: %v", restID, rest)
			require.Equal(t, "2", rest["SLURM_CPUS_PER_TASK"], "the directive's variable is set over REST")
			for _, k := range unionKeys(rest, sb) {
				r, rok := rest[k]
				s, sok := sb[k]
				if r == s && rok == sok {
					continue
				}
				if why, ok := envMayDiffer[k]; ok {
					t.Logf("%s differs as it may (%s): REST %q, sbatch %q", k, why, r, s)
					continue
				}
				t.Errorf("%s: REST %q (set %v), sbatch %q (set %v)", k, r, rok, s, sok)
			}
		})
	}
}

// jobEnv reads the SLURM_* lines a job of envParityScript wrote (as root: the
// file is the job user's, 0600 under sbatch's umask).
func jobEnv(t *testing.T, rs *realSlurm, id string) map[string]string {
	t.Helper()
	path := filepath.Join(rs.root, "/tmp/envparity-"+id+".out")
	var raw []byte
	require.Eventually(t, func() bool {
		var err error
		raw, err = os.ReadFile(path)
		return err == nil && len(raw) > 0
	}, 30*time.Second, 200*time.Millisecond, "job %s's output %s", id, path)
	t.Cleanup(func() { _ = os.Remove(path) })
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

func unionKeys(a, b map[string]string) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
