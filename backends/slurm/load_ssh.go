package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// ProbeLoad implements backends.LoadProber with three commands on the
// backend's SSH connection, whatever the job and however many partitions it
// names:
//
//   - sinfo (every partition, hidden ones too: state, time limit, CPUs and
//     nodes allocated/idle/other/total, job size and CPUs-per-node limits;
//     '*' marks the default partition);
//   - squeue, for the pending and running jobs of every partition;
//   - sbatch --test-only with the job's own options and script, for the
//     scheduler's estimate of its start (EstimatedStart). A refusal there
//     (a job no node of the partitions can hold, a limit of its account) is
//     Fits false, in our words; its text is never quoted.
//
// The first two are the cluster's measure (MeasureLoad, the same for every
// job); the third is the job's own question, which LoadFrom leaves out.
func (b *SSHBackend) ProbeLoad(ctx context.Context, job backends.Job, array *backends.Array) (backends.Load, error) {
	sj, err := buildSbatch(job)
	if err != nil {
		return backends.Load{}, err
	}
	d, err := sshDemand(job, array)
	if err != nil {
		return backends.Load{}, err
	}
	m, err := b.measure(ctx)
	if err != nil {
		return backends.Load{}, err
	}
	l, err := judgeSSH(m, d)
	if err != nil {
		return backends.Load{}, err
	}
	if array != nil {
		sj.args = append(sj.args, "--array="+array.String())
	}
	start, refused, err := b.testOnly(ctx, sj)
	if err != nil {
		return backends.Load{}, err
	}
	l.EstimatedStart = start
	if refused != "" && l.Fits {
		l.Fits, l.Why = false, refused
	}
	return l, nil
}

// measure reads every partition and the queue with sinfo and squeue,
// whatever the job: the part of the probe a cluster's agent does once for
// every step.
func (b *SSHBackend) measure(ctx context.Context) (loadMeasure, error) {
	all, err := b.sinfo(ctx)
	if err != nil {
		return loadMeasure{}, err
	}
	if err := b.squeue(ctx, all); err != nil {
		return loadMeasure{}, err
	}
	return loadMeasure{parts: all}, nil
}

// judgeSSH is the Load of d at the partitions of m it names, or the
// default one (which sinfo always marks, unlike some REST versions).
func judgeSSH(m loadMeasure, d demand) (backends.Load, error) {
	parts, ok, err := pickParts(d, m.parts)
	switch {
	case err != nil:
		return backends.Load{}, err
	case !ok:
		return backends.Load{}, backends.Invalid("jobproperties.partition", "the cluster marks no partition as its default; name one in jobproperties (partition)")
	}
	l := judge(d, parts)
	if m.noQueue {
		l.PendingJobs, l.RunningJobs, l.PendingCPUs, l.CPUSecondsKnown = -1, -1, -1, false
	}
	return l, nil
}

// MeasureLoad implements backends.LoadPublisher: sinfo and squeue, in the
// REST backend's format.
func (b *SSHBackend) MeasureLoad(ctx context.Context) (string, error) {
	m, err := b.measure(ctx)
	if err != nil {
		return "", err
	}
	return encodeMeasure(m)
}

// LoadFrom implements backends.LoadPublisher: ProbeLoad's Load without
// sbatch --test-only (no EstimatedStart, and a refusal only sbatch would
// tell is not seen: the submit then says it).
func (b *SSHBackend) LoadFrom(measure string, job backends.Job, array *backends.Array) (backends.Load, error) {
	m, err := decodeMeasure(measure)
	if err != nil {
		return backends.Load{}, err
	}
	if _, err := buildSbatch(job); err != nil {
		return backends.Load{}, err
	}
	d, err := sshDemand(job, array)
	if err != nil {
		return backends.Load{}, err
	}
	return judgeSSH(m, d)
}

// sshDemand reads what the job asks for as sbatch would: the script's
// #SBATCH lines, then jobproperties over them (the command line wins).
func sshDemand(job backends.Job, array *backends.Array) (demand, error) {
	opts := map[string]string{}
	if job.ScriptPath == "" {
		ds, err := scriptDirectives(job.Script)
		if err != nil {
			return demand{}, err
		}
		for _, dv := range ds {
			opts[dv.opt] = dv.val
		}
	}
	props, err := propertyMap(job.Properties)
	if err != nil {
		return demand{}, err
	}
	for k, raw := range props {
		opt := restToSbatch[k]
		if opt == "" {
			opt = strings.ReplaceAll(k, "_", "-")
		}
		var v any
		if json.Unmarshal(raw, &v) == nil {
			if _, isBool := v.(bool); !isBool {
				opts[opt] = rawString(raw)
			}
		}
	}
	d := newDemand(array)
	if p, ok := opts["partition"]; ok {
		d.setPartitions(p)
	}
	setCount(&d.tasks, opts["ntasks"])
	setCount(&d.cpusPerTask, opts["cpus-per-task"])
	d.setNodes(opts["nodes"])
	if _, ok := opts["ntasks"]; !ok && d.nodes > 1 {
		d.tasks = d.nodes
	}
	if t, ok := opts["time"]; ok {
		if m, inf, ok := parseSlurmTime(t); ok && inf {
			d.minutes = -1
		} else if ok {
			d.minutes = int64(m)
		}
	}
	return d, nil
}

// sinfoFormat: partition (with * for the default), state, time limit,
// CPUs A/I/O/T, nodes A/I/O/T, job size in nodes (min-max), max CPUs per
// node.
const sinfoFormat = "%P|%a|%l|%C|%F|%s|%B"

// sinfo reads every partition with one sinfo.
func (b *SSHBackend) sinfo(ctx context.Context) ([]partLoad, error) {
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"sinfo", "--noheader", "--all", "--format=" + sinfoFormat}})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, probeCmdError("sinfo", res)
	}
	parts := parseSinfo(string(res.Stdout))
	if len(parts) == 0 {
		return nil, fmt.Errorf("sinfo printed no partition as asked (%d bytes, not shown)", len(res.Stdout))
	}
	return parts, nil
}

// sinfoStates maps sinfo's %a onto the REST API's partition states.
var sinfoStates = map[string]string{"up": "UP", "down": "DOWN", "drain": "DRAIN", "inact": "INACTIVE"}

// parseSinfo reads sinfo's lines (sinfoFormat). sinfo may print a
// partition on several lines, one a group of its nodes: their counts add up.
func parseSinfo(out string) []partLoad {
	var parts []partLoad
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 7 || f[0] == "" {
			continue
		}
		name, def := strings.CutSuffix(f[0], "*")
		cpus, ok1 := slashCounts(f[3])
		nodes, ok2 := slashCounts(f[4])
		if !ok1 || !ok2 {
			continue
		}
		i := indexOf(parts, name)
		if i < 0 {
			p := newPartLoad(name)
			p.isDefault = def
			p.state = sinfoStates[strings.ToLower(strings.TrimSpace(f[1]))]
			if p.state == "" {
				p.state = "UNKNOWN"
			}
			p.maxMinutes = sinfoLimit(f[2])
			_, hi, _ := strings.Cut(f[5], "-")
			p.maxNodes = int(countLimit(hi))
			p.maxCPUs = int(countLimit(f[6]))
			parts = append(parts, p)
			i = len(parts) - 1
		}
		parts[i].freeCPUs += cpus[1]
		parts[i].totalCPUs += cpus[3]
		parts[i].freeNodes += nodes[1]
		parts[i].totalNodes += nodes[3]
	}
	return parts
}

// slashCounts reads "A/I/O/T" (allocated, idle, other, total).
func slashCounts(s string) ([4]int, bool) {
	var out [4]int
	f := strings.Split(strings.TrimSpace(s), "/")
	if len(f) != 4 {
		return out, false
	}
	for i, x := range f {
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// sinfoLimit reads a time limit in minutes, -1 for none.
func sinfoLimit(s string) int64 {
	m, inf, ok := parseSlurmTime(s)
	if !ok || inf {
		return -1
	}
	return int64(m)
}

// countLimit reads a count limit ("infinite", "UNLIMITED" or a number),
// -1 for none.
func countLimit(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return -1
	}
	return n
}

// slurmDuration reads squeue's times ("[days-]hours:minutes:seconds",
// "minutes:seconds") in seconds; -1 for UNLIMITED, NOT_SET, INVALID.
func slurmDuration(s string) int64 {
	days := int64(0)
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 {
			return -1
		}
		days, s = n, rest
	}
	var secs int64
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return -1
	}
	for _, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return -1
		}
		secs = secs*60 + n
	}
	return days*86400 + secs
}

// squeue counts the pending and running jobs of parts (every partition)
// with one squeue.
// %P of a pending job is the list it may start in; %K of a pending array's
// record is its tasks not started ("5-999%50").
func (b *SSHBackend) squeue(ctx context.Context, parts []partLoad) error {
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"squeue", "--noheader", "--all",
		"--states=PENDING,RUNNING", "--format=%T|%P|%C|%K|%l|%L"}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return probeCmdError("squeue", res)
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 6 {
			continue
		}
		cpus, _ := strconv.Atoi(f[2])
		tasks, secs := 1, slurmDuration(f[5]) // %L: the time left of a running job
		if f[0] == "PENDING" {
			tasks, secs = arrayTaskCount(f[3]), slurmDuration(f[4]) // %l: its time limit
		}
		countJob(parts, f[0], f[1], cpus, tasks, secs)
	}
	return nil
}

// testOnlyLine is sbatch --test-only's answer (on stderr): "sbatch: Job 12
// to start at 2026-11-27T01:26:42 using 2 processors on nodes n1 in
// partition debug", in the login node's local time.
var testOnlyLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)\bJob \d+ to start at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) using `)
})

// testOnly asks sbatch --test-only when the job would start. refused says,
// in our words, that sbatch refused the job; an unreachable slurmctld is
// transient.
func (b *SSHBackend) testOnly(ctx context.Context, sj *sshJob) (start time.Time, refused string, err error) {
	args := append([]string{"sbatch", "--test-only"}, sj.args...)
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: args, Stdin: strings.NewReader(sj.script)})
	if err != nil {
		return time.Time{}, "", err
	}
	switch {
	case res.ExitCode == 0:
		if m := testOnlyLine().FindStringSubmatch(string(res.Stderr) + "\n" + string(res.Stdout)); m != nil {
			start = slurmTime(m[1])
		}
		if start.After(time.Now().AddDate(1, 0, 0)) {
			// 22.05 answered a year 3047 beside a job held back by its
			// begin time: no estimate, not one for a policy to compare.
			start = time.Time{}
		}
		return start, "", nil
	case res.ExitCode == 127 || res.Says(slurmCLI.Unreachable...):
		return time.Time{}, "", probeCmdError("sbatch --test-only", res)
	}
	return time.Time{}, fmt.Sprintf("sbatch --test-only refused the job as given (exit %d): Slurm would not accept it in partition(s) it names", res.ExitCode), nil
}

// probeCmdError is a failed command of the probe, in our words (its answer
// is named by its size, never quoted): a command missing from the login
// node is a wrong resourceURL; anything else is transient, for placement
// to skip the cluster for now.
func probeCmdError(cmd string, res sshexec.Result) error {
	n := len(res.Stdout) + len(res.Stderr)
	switch {
	case res.ExitCode == 127:
		return backends.Invalid("resourceURL", "%s is not on the PATH of the login node; point resourceURL at a Slurm login node", strings.Fields(cmd)[0])
	case res.Says(slurmCLI.Unreachable...):
		return backends.Transient(fmt.Errorf("%s: slurmctld did not answer (exit %d; its %d-byte answer not shown)", cmd, res.ExitCode, n))
	}
	return backends.Transient(fmt.Errorf("%s failed (exit %d; its %d-byte answer not shown)", cmd, res.ExitCode, n))
}

var _ backends.LoadPublisher = (*SSHBackend)(nil)
