package htcondor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

const hostileSecret = "pw-Hostile-9f3a"

// TestCommandOutputStaysOutOfMessages: what the submit host's commands
// print reaches no error but the reason of a line in HTCondor's documented
// error shape, as words; anything else is named by its size. Before, up to
// 2,000 bytes of condor_submit's, condor_q's or condor_rm's output were
// quoted.
func TestCommandOutputStaysOutOfMessages(t *testing.T) {
	target, err := sshexec.ParseURL("ssh://alice@submit.example")
	require.NoError(t, err)
	c := sshexec.New(target, testutil.MapCreds{}, nil, sshexec.Options{})
	const noise = "motd-banner-words"
	for _, f := range testutil.HostileForms(hostileSecret) {
		for _, cmd := range []string{"condor_submit", "condor_q", "condor_history", "condor_rm"} {
			for _, res := range []sshexec.Result{
				{ExitCode: 1, Stderr: []byte(noise + " " + f.Text + "\nERROR: on Line 3 of submit file: " + f.Text + "\n"), Stdout: []byte(noise + f.Text)},
				{ExitCode: 1, Stdout: []byte("-- Failed to fetch ads from: <127.0.0.1:9618> : " + f.Text + "\n" + noise)},
				{ExitCode: 1, Stderr: []byte(noise + " " + f.Text), Stdout: []byte(f.Text + " " + noise)},
			} {
				for _, msg := range []string{condor.Said(cmd, res), c.CommandError(condor, cmd, res, "jobproperties").Error()} {
					assert.NotContains(t, msg, noise)
					assert.Empty(t, testutil.Leaks(msg, hostileSecret), "%s %s: %s", f.Name, cmd, msg)
				}
			}
		}
	}
	assert.Equal(t, "on Line 3 of submit file: …", condor.Said("condor_submit", sshexec.Result{Stderr: []byte("\nERROR: on Line 3 of submit file: " + hostileSecret + "\n")}))
	assert.Equal(t, "Job 12.0 not found", condor.Said("condor_rm", sshexec.Result{Stderr: []byte("Job 12.0 not found\n")}))
	assert.Equal(t, "condor_q wrote 5 bytes to stdout that are not a documented error, not shown", condor.Said("condor_q", sshexec.Result{Stdout: []byte("hello")}))
}
