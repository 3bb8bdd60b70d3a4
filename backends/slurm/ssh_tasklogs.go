package slurm

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// An array's tasks each write their own output file on the cluster. The
// invoke reads any of them over the SSH session it holds (ReadTaskLogs):
// the runner follows one task live and uploads every task's output at the
// end, so no S3 credential or presigned form has to reach the cluster and
// the compute nodes need not reach S3.

// ReadTaskLogs implements backends.TaskLogReader: the output of array id's
// task (its index in that array) from offset on, over SFTP.
func (b *SSHBackend) ReadTaskLogs(ctx context.Context, id string, task int, offset int64, w io.Writer) (int64, error) {
	p, err := b.taskOutputPath(ctx, id, task)
	if err != nil {
		return offset, err
	}
	return b.ssh.ReadFrom(ctx, p, offset, w)
}

// taskOutputPath is where array id's task writes its output: slurmctld's
// StdOut of the task (Slurm expands its patterns), read with one scontrol
// for all the array's started tasks and kept; once slurmctld has forgotten
// the task, the output pattern this backend submitted it with, if any.
func (b *SSHBackend) taskOutputPath(ctx context.Context, id string, task int) (string, error) {
	b.mu.Lock()
	p, ok := b.taskOut[id][task]
	b.mu.Unlock()
	if ok {
		return p, nil
	}
	if err := b.readTaskOutputs(ctx, id); err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok = b.taskOut[id][task]; ok {
		return p, nil
	}
	if pattern := b.files[id].taskOut; pattern != "" {
		return strings.ReplaceAll(pattern, "%a", strconv.Itoa(task)), nil
	}
	return "", fmt.Errorf("Slurm array %s: the output of its task %d is not known (not started, or forgotten by slurmctld): %w", id, task, backends.ErrNotFound)
}

// readTaskOutputs keeps the output paths of array id's started tasks, as
// one scontrol show job lists them. Once it listed every task ended (or
// slurmctld no longer knows the array) there is nothing more to learn:
// the tasks it does not list (never started, or forgotten) cost no more
// scontrols, one each, at the end of a large array.
func (b *SSHBackend) readTaskOutputs(ctx context.Context, id string) error {
	if !slurmID().MatchString(id) {
		return fmt.Errorf("%q is not a Slurm job id: %w", id, backends.ErrNotFound)
	}
	b.mu.Lock()
	done := b.taskOutDone[id]
	b.mu.Unlock()
	if done {
		return nil
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"scontrol", "show", "job", "--oneliner", id}})
	if err != nil {
		return err
	}
	paths, ended := map[int]string{}, true
	switch {
	case res.ExitCode == 0:
		for _, line := range strings.Split(string(res.Stdout), "\n") {
			f := parseScontrol(line)
			if f["ArrayJobId"] != id {
				continue
			}
			ended = ended && scontrolStatus(f["JobId"], f).State.Final()
			if idx, ok := scontrolTask(f, id); ok && f["StdOut"] != "" {
				paths[idx] = f["StdOut"]
			}
		}
	case !res.Says("Invalid job id"):
		return backends.Transient(fmt.Errorf("scontrol show job %s (exit %d): %s", id, res.ExitCode, slurmCLI.Said("scontrol", res)))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.taskOut == nil {
		b.taskOut, b.taskOutDone = map[string]map[int]string{}, map[string]bool{}
	}
	if b.taskOut[id] == nil {
		b.taskOut[id] = map[int]string{}
	}
	for idx, p := range paths {
		b.taskOut[id][idx] = p
	}
	b.taskOutDone[id] = ended
	return nil
}

var _ backends.TaskLogReader = (*SSHBackend)(nil)
