package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The shipped HTCondor examples (issue 40), run as a user submits them
// against the HTCondor pool of hack/e2e.sh: its login node's sshd listens
// on the node's own address (the pool itself stays on loopback in its
// root). What is put in is the user's site: the submit host's URL and the
// Secret's values (the login key and known_hosts of that sshd).

// TestExamplesHTCondor: examples/htcondor/{workflow,bridgejob,job}.yaml as
// shipped: the Workflow Succeeds with its step DONE, the BridgeJob DONE,
// the plain Job succeeds once with its record DONE, each with a job id
// that the pool's condor_history shows completed with exit code 0 and the
// example's +ProjectName.
func TestExamplesHTCondor(t *testing.T) {
	e := setup(t)
	// BRIDGE_E2E_HTCONDOR_URL and _CREDS_DIR, as for the fakes.
	f := e.needFake(t, "htcondor")
	root := os.Getenv("BRIDGE_E2E_HTCONDOR_ROOT")
	if _, err := os.Stat(root + "/etc/condor"); root == "" || err != nil {
		t.Fatalf("BRIDGE_E2E_HTCONDOR_ROOT=%q is not the e2e pool's root (hack/e2e.sh sets it)", root)
	}
	t.Parallel()
	e.applyFakeSecrets(t, "htcondor", f)
	e.runFakeExamples(t, fakeExample{which: "htcondor", site: map[string]string{"ssh://alice@submit.example.org:22": f.url},
		check: func(t *testing.T, id, _ string) { checkCondorHistory(t, root, id) }})
}

// checkCondorHistory wants the job id in the pool's history: completed
// (JobStatus 4) with exit code 0, with the examples' +ProjectName. A job
// just done may take a moment to leave the queue for the history.
func checkCondorHistory(t *testing.T, root, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got string
	if err := poll(ctx, time.Second, func() (bool, error) {
		out, err := exec.CommandContext(ctx, "chroot", root, "condor_history", id, "-af", "JobStatus", "ExitCode", "ProjectName").CombinedOutput()
		got = strings.TrimSpace(string(out))
		return err == nil && got != "", nil
	}); err != nil {
		t.Fatalf("job %s: not in the pool's condor_history within a minute (last: %q): %v", id, got, err)
	}
	if got != "4 0 bridge" {
		t.Errorf("job %s in the pool's history: JobStatus ExitCode ProjectName = %q, want \"4 0 bridge\"", id, got)
	}
	t.Logf("job %s in the pool's history: %s", id, got)
}
