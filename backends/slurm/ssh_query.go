package slurm

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// sacctStatus reads a job slurmctld has forgotten from the accounting
// database. Without accounting (sacct refuses), the job is not found.
func (b *SSHBackend) sacctStatus(ctx context.Context, id string) (backends.Status, error) {
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"sacct", "-n", "-P", "-X", "-j", id,
		"-o", "JobID,State,Reason,ExitCode,Submit,Start,End,WorkDir"}})
	if err != nil {
		return backends.Status{}, err
	}
	line := strings.TrimSpace(string(res.Stdout))
	if res.ExitCode != 0 || line == "" {
		return backends.Status{}, fmt.Errorf("Slurm job %s is unknown to slurmctld and to sacct (%s): %w", id, slurmCLI.Said("sacct", res), backends.ErrNotFound)
	}
	f := strings.Split(strings.SplitN(line, "\n", 2)[0], "|")
	if len(f) < 8 || f[0] != id {
		return backends.Status{}, fmt.Errorf("sacct printed no line of job %s as asked (%d fields; not shown): %w", id, len(f), backends.ErrNotFound)
	}
	b.remember(id, jobFiles{workDir: f[7]})
	// sacct writes "CANCELLED by 1001": the state is the first word.
	return slurmStatus(id, []string{strings.Fields(f[1] + " ")[0]}, f[2], f[3], f[4], f[5], f[6]), nil
}

// FindByKey finds the user's job that carries key (carriesKey) among those
// slurmctld still knows (squeue --states=all). %F is an array task's array
// id (a job's own id otherwise), so an array is found by the id
// SubmitArray returned, whichever of its tasks squeue lists.
func (b *SSHBackend) FindByKey(ctx context.Context, key string) (string, error) {
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"squeue", "--noheader", "--me", "--states=all", "--format=%F|%k|%j"}})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", backends.Transient(fmt.Errorf("squeue (exit %d): %s", res.ExitCode, slurmCLI.Said("squeue", res)))
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.SplitN(strings.TrimSpace(line), "|", 3)
		if len(f) == 3 && carriesKey(f[1], f[2], key) && slurmID().MatchString(f[0]) {
			return f[0], nil
		}
	}
	return "", nil
}

// Cancel runs scancel; a job that has ended is not an error.
func (b *SSHBackend) Cancel(ctx context.Context, id string) error {
	if !slurmID().MatchString(id) {
		return fmt.Errorf("%q is not a Slurm job id", id)
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"scancel", id}})
	if err != nil {
		return err
	}
	if res.ExitCode == 0 || res.Says("already completing or completed", "Invalid job id") {
		return nil
	}
	return backends.Transient(fmt.Errorf("scancel %s (exit %d): %s", id, res.ExitCode, slurmCLI.Said("scancel", res)))
}

// files is where the job's output and working directory are.
func (b *SSHBackend) jobFiles(ctx context.Context, id string) (jobFiles, error) {
	b.mu.Lock()
	f, ok := b.files[id]
	b.mu.Unlock()
	if ok {
		return f, nil
	}
	if _, err := b.Status(ctx, id); err != nil {
		return jobFiles{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if f, ok = b.files[id]; !ok {
		return jobFiles{}, fmt.Errorf("Slurm job %s: its files are not known: %w", id, backends.ErrNotFound)
	}
	return f, nil
}

// ReadLogs copies the job's standard output from offset on.
func (b *SSHBackend) ReadLogs(ctx context.Context, id string, offset int64, w io.Writer) (int64, error) {
	f, err := b.jobFiles(ctx, id)
	if err != nil {
		return offset, err
	}
	if f.stdout == "" {
		return offset, fmt.Errorf("Slurm job %s has no output file: %w", id, backends.ErrNotFound)
	}
	return b.ssh.ReadFrom(ctx, f.stdout, offset, w)
}

// FetchOutput copies a file the job wrote; a relative path is in the job's
// working directory.
func (b *SSHBackend) FetchOutput(ctx context.Context, id, p string, w io.Writer) error {
	if !path.IsAbs(p) {
		f, err := b.jobFiles(ctx, id)
		if err != nil {
			return err
		}
		p = path.Join(f.workDir, p)
	}
	_, err := b.ssh.ReadFrom(ctx, p, 0, w)
	return err
}
