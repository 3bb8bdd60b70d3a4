package htcondor

import (
	"context"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// dir is the job's directory (its Iwd), from the submit or from its ad.
func (b *Backend) dir(ctx context.Context, id string) (string, error) {
	b.mu.Lock()
	d := b.iwd[id]
	b.mu.Unlock()
	if d != "" {
		return d, nil
	}
	if _, err := b.Status(ctx, id); err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if d = b.iwd[id]; d == "" {
		return "", fmt.Errorf("HTCondor job %s has no Iwd: %w", id, backends.ErrNotFound)
	}
	return d, nil
}

// ReadLogs copies the job's output (job.out, streamed while it runs) from
// offset on; an array's is its first task's (task-<index>.out, each task
// writing its own, which FetchOutput and ReadTaskLogs read).
func (b *Backend) ReadLogs(ctx context.Context, id string, offset int64, w io.Writer) (int64, error) {
	d, err := b.dir(ctx, id)
	if err != nil {
		return offset, err
	}
	name := outFile
	if clusterID().MatchString(id) {
		a, ok := b.array(id)
		if !ok {
			return offset, fmt.Errorf("HTCondor array %s has no task yet: %w", id, backends.ErrNotFound)
		}
		name = taskOutName(a.first)
	}
	return b.ssh.ReadFrom(ctx, path.Join(d, name), offset, w)
}

// ReadTaskLogs implements backends.TaskLogReader: the output of array id's
// task (task-<index>.out in the cluster's directory, streamed while it
// runs), from offset on. An HTCondor array is one cluster whose procs
// carry the user's indexes (never split), so task is the user's index.
func (b *Backend) ReadTaskLogs(ctx context.Context, id string, task int, offset int64, w io.Writer) (int64, error) {
	return b.readTaskFile(ctx, id, taskOut, task, offset, w)
}

// ReadTaskErrs implements backends.TaskErrReader: the standard error of
// array id's task (task-<index>.err), from offset on.
func (b *Backend) ReadTaskErrs(ctx context.Context, id string, task int, offset int64, w io.Writer) (int64, error) {
	return b.readTaskFile(ctx, id, taskErr, task, offset, w)
}

// readTaskFile reads the file of array id's task named by pattern
// (taskOut or taskErr) from offset on.
func (b *Backend) readTaskFile(ctx context.Context, id, pattern string, task int, offset int64, w io.Writer) (int64, error) {
	if !clusterID().MatchString(id) {
		return offset, fmt.Errorf("%q is not an HTCondor array id (CLUSTER): %w", id, backends.ErrNotFound)
	}
	d, err := b.dir(ctx, id)
	if err != nil {
		return offset, err
	}
	return b.ssh.ReadFrom(ctx, path.Join(d, taskFileName(pattern, task)), offset, w)
}

// taskOutName is the file of the array's task i's standard output.
func taskOutName(i int) string { return taskFileName(taskOut, i) }

// taskFileName is pattern (taskOut or taskErr) for the array's task i.
func taskFileName(pattern string, i int) string {
	return strings.ReplaceAll(pattern, "$("+taskMacro+")", strconv.Itoa(i))
}

var (
	_ backends.TaskLogReader = (*Backend)(nil)
	_ backends.TaskErrReader = (*Backend)(nil)
)

// FetchOutput copies a file the job wrote: a relative path is in the job's
// directory, where HTCondor transfers the job's output files back.
func (b *Backend) FetchOutput(ctx context.Context, id, p string, w io.Writer) error {
	d, err := b.dir(ctx, id)
	if err != nil {
		return err
	}
	if !path.IsAbs(p) {
		p = path.Join(d, p)
	}
	_, err = b.ssh.ReadFrom(ctx, p, 0, w)
	return err
}
