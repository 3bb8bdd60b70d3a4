package slurm

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// endFile is the end marker in the job's directory: the wrapper writes the
// script's exit status there as it ends (see wrapping.end).
const endFile = "job.end"

// safeKey is a key bridge-runner stamps (it names the job's directory):
// a comment that is not one names no directory of ours.
var safeKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`) })

// endOf is the end marker's path of the job scontrol described in f, as
// this backend knows it or from the key in its comment (a job this process
// re-attached to); "" for an array (its tasks leave none) or a job that
// carries no key of ours.
func (b *SSHBackend) endOf(ctx context.Context, f map[string]string) string {
	b.mu.Lock()
	known := b.files[f["JobId"]].end
	b.mu.Unlock()
	key := f["Comment"]
	if known != "" || f["ArrayJobId"] != "" || !safeKey().MatchString(key) {
		return known
	}
	dir, err := b.ssh.JobDir(ctx, key)
	if err != nil {
		return ""
	}
	return path.Join(dir, endFile)
}

// WaitEnd returns when the job's end marker exists, with one remote
// command on the backend's connection (sshexec.WaitFor). The marker says
// the script ended, not how the job did: the runner asks slurmctld then.
// A job whose marker place is not known (an array, a job submitted without
// the wrapper) is an error at once: the polls find its end.
func (b *SSHBackend) WaitEnd(ctx context.Context, id string) error {
	b.mu.Lock()
	end := b.files[id].end
	b.mu.Unlock()
	if end == "" {
		return fmt.Errorf("Slurm job %s leaves no end marker this backend knows of", id)
	}
	return b.ssh.WaitFor(ctx, "test", "-e", end)
}

// Forget removes the ended job's end marker (and a temporary one a
// wrapper killed while writing it left). The job's other files (its
// output, what it wrote) stay: they are the user's.
func (b *SSHBackend) Forget(ctx context.Context, id string) error {
	st, err := b.Status(ctx, id)
	if err != nil {
		return err
	}
	if !st.State.Final() {
		return fmt.Errorf("Slurm job %s is %s: its files stay until it ends", id, st.State)
	}
	b.mu.Lock()
	end := b.files[id].end
	b.mu.Unlock()
	if end == "" {
		return nil
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"sh", "-c", `rm -f "$1" "$1".*`, "sh", end}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("removing the end marker of Slurm job %s failed (exit %d): %s", id, res.ExitCode, slurmCLI.Said("rm", res))
	}
	return nil
}

var (
	_ backends.EndWatcher = (*SSHBackend)(nil)
	_ backends.Forgetter  = (*SSHBackend)(nil)
)
