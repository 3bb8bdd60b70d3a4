package slurm

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// SubmitArray submits job with sbatch --array, after checking a against
// the cluster's MaxArraySize. Each task writes its output to job-N.out in
// the job's directory (unless jobproperties chose the output); ReadLogs of
// the array reads the lowest index's, ReadTaskLogs any task's.
func (b *SSHBackend) SubmitArray(ctx context.Context, job backends.Job, a backends.Array) (string, error) {
	if a.Count() == 0 {
		return "", backends.Invalid("array", "no indexes: give them as 0-99 or 1,3,8-15")
	}
	sj, err := buildSbatch(job)
	if err != nil {
		return "", err
	}
	limit, err := b.maxArraySize(ctx)
	if err != nil {
		return "", err
	}
	if limit > 0 && a.Max() >= limit {
		return "", backends.Invalid("array", "%s: index %d is past the cluster's MaxArraySize, %d (Slurm takes indexes 0 to %d); give a smaller chunk in the array key (0-4999/500), or ask the cluster's administrators to raise MaxArraySize", a, a.Max(), limit, limit-1)
	}
	sj.array = a.String()
	sj.args = append(sj.args, "--array="+sj.array)
	sj.script = wrapScript(sj.script, wrapping{taskIndex: true, taskOffset: a.Offset})
	id, dir, err := b.sbatch(ctx, job, sj, "job-%a.out")
	if err != nil {
		return "", err
	}
	f := jobFiles{workDir: dir}
	if sj.chdir {
		f.workDir = ""
	}
	if !sj.output {
		f.stdout = path.Join(dir, "job-"+strconv.Itoa(a.Ranges[0].First)+".out")
		f.taskOut = path.Join(dir, "job-%a.out")
	}
	b.remember(id, f)
	return id, nil
}

// ArrayLimit is the cluster's MaxArraySize (backends.ArrayLimiter).
func (b *SSHBackend) ArrayLimit(ctx context.Context) (int, error) { return b.maxArraySize(ctx) }

// maxArraySize is the cluster's MaxArraySize from scontrol show config,
// read once; 0 when it cannot be read (sbatch then refuses on its own).
func (b *SSHBackend) maxArraySize(ctx context.Context) (int, error) {
	b.mu.Lock()
	n := b.maxArray
	b.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"scontrol", "show", "config"}})
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "MaxArraySize" {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if n <= 0 {
		b.log.Warn("cannot read MaxArraySize from scontrol show config; sbatch will judge the array", "exit", res.ExitCode)
		return 0, nil
	}
	b.mu.Lock()
	b.maxArray = n
	b.mu.Unlock()
	return n, nil
}

// ArrayStatus reads every task of the array with one scontrol show job
// (slurmctld's records: each started task's, and one for the tasks not
// started yet, which are left out), then those slurmctld has forgotten
// with one sacct, where the cluster keeps accounting.
func (b *SSHBackend) ArrayStatus(ctx context.Context, id string) (map[int]backends.Status, error) {
	if !slurmID().MatchString(id) {
		return nil, fmt.Errorf("%q is not a Slurm job id: %w", id, backends.ErrNotFound)
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"scontrol", "show", "job", "--oneliner", id}})
	if err != nil {
		return nil, err
	}
	tasks := map[int]backends.Status{}
	switch {
	case res.ExitCode == 0:
		for _, line := range strings.Split(string(res.Stdout), "\n") {
			f := parseScontrol(line)
			if idx, ok := scontrolTask(f, id); ok {
				tasks[idx] = scontrolStatus(f["JobId"], f)
			} else if f["ArrayJobId"] == id && f["ArrayTaskId"] != "" {
				unstarted(f["ArrayTaskId"], scontrolStatus(f["JobId"], f), tasks)
			}
		}
	case res.Says("Invalid job id"):
	case res.Says(slurmCLI.Unreachable...):
		return nil, backends.Transient(fmt.Errorf("scontrol show job %s: %s", id, slurmCLI.Said("scontrol", res)))
	default:
		return nil, backends.Transient(fmt.Errorf("scontrol show job %s (exit %d): %s", id, res.ExitCode, slurmCLI.Said("scontrol", res)))
	}
	if err := b.sacctTasks(ctx, id, tasks); err != nil {
		return nil, err
	}
	if len(tasks) == 0 && res.ExitCode != 0 {
		return nil, fmt.Errorf("Slurm array %s is unknown to slurmctld and to sacct: %w", id, backends.ErrNotFound)
	}
	return tasks, nil
}

// scontrolTask is the index of array id's task in record f; ok is false
// for the record of the tasks not started yet ("ArrayTaskId=5-999%50").
func scontrolTask(f map[string]string, id string) (int, bool) {
	if f["ArrayJobId"] != id {
		return 0, false
	}
	n, err := strconv.Atoi(f["ArrayTaskId"])
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// sacctTasks adds to tasks the array's tasks that only sacct still knows
// (JobID "123_4"; "123_[5-9]" are tasks not started). A cluster without
// accounting is asked once.
func (b *SSHBackend) sacctTasks(ctx context.Context, id string, tasks map[int]backends.Status) error {
	b.mu.Lock()
	off := b.noSacct
	b.mu.Unlock()
	if off {
		return nil
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"sacct", "-n", "-P", "-X", "-j", id,
		"-o", "JobID,State,Reason,ExitCode,Submit,Start,End"}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		if res.Says("accounting storage is disabled") {
			b.mu.Lock()
			b.noSacct = true
			b.mu.Unlock()
		}
		return nil
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		base, task, ok := strings.Cut(f[0], "_")
		n, err := strconv.Atoi(task)
		if len(f) < 7 || !ok || base != id || err != nil || n < 0 {
			continue
		}
		if _, known := tasks[n]; !known {
			tasks[n] = slurmStatus(f[0], []string{strings.Fields(f[1] + " ")[0]}, f[2], f[3], f[4], f[5], f[6])
		}
	}
	return nil
}

var (
	_ backends.ArraySubmitter = (*SSHBackend)(nil)
	_ backends.ArrayLimiter   = (*SSHBackend)(nil)
)
