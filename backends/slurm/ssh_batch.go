package slurm

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// batchID is a job id squeue and sacct take in a list: a number, or an
// array task's ARRAYID_TASK. Nothing else reaches their command line.
var batchID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d{1,10}(_\d{1,10})?$`) })

// StatusMany implements backends.StatusBatcher with one squeue for all ids
// (base state or flag and reason, as scontrol's JobState and Reason that
// Status reads) and, for those squeue no longer lists (slurmctld forgot
// them), one sacct; without accounting they are left out. Two commands
// at most, whatever len(ids).
func (b *SSHBackend) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	want := batchIDs(ids, batchID().MatchString)
	out := map[string]backends.Status{}
	if len(want) == 0 {
		return out, nil
	}
	// --states=all: squeue -j lists ended jobs too, but say so rather than
	// rely on it.
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"squeue", "--noheader", "--states=all",
		"--jobs=" + strings.Join(want, ","), "--format=%i|%T|%r"}})
	if err != nil {
		return nil, err
	}
	switch {
	case res.ExitCode == 0:
		parseBatchLines(string(res.Stdout), want, out)
	case res.Says("Invalid job id"):
		// squeue -j with one id slurmctld does not know fails; with
		// several it leaves the unknown ones out.
	case res.Says(slurmCLI.Unreachable...):
		return nil, backends.Transient(fmt.Errorf("squeue: %s", slurmCLI.Said("squeue", res)))
	default:
		return nil, backends.Transient(fmt.Errorf("squeue (exit %d): %s", res.ExitCode, slurmCLI.Said("squeue", res)))
	}
	var missing []string
	for _, id := range want {
		if _, ok := out[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	res, err = b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"sacct", "--noheader", "--allocations", "--parsable2",
		"--jobs=" + strings.Join(missing, ","), "--format=JobID,State,Reason"}})
	if err != nil {
		return nil, err
	}
	if res.ExitCode == 0 { // else no accounting: Status says the same of them
		parseBatchLines(string(res.Stdout), missing, out)
	}
	return out, nil
}

// parseBatchLines reads "ID|STATE|REASON" lines (squeue's format above,
// sacct's --parsable2) into out, for the ids asked for. sacct writes
// "CANCELLED by 1001": the state is its first word. squeue prints a flag
// (COMPLETING, REQUEUED, ...) instead of the base state, as scontrol does.
func parseBatchLines(text string, ids []string, out map[string]backends.Status) {
	asked := map[string]bool{}
	for _, id := range ids {
		asked[id] = true
	}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) < 3 || !asked[f[0]] {
			continue
		}
		words := strings.Fields(f[1])
		if len(words) == 0 {
			continue
		}
		out[f[0]] = summaryStatus(f[0], strings.Split(words[0], ","), f[2])
	}
}
