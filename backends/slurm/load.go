package slurm

// Load probes (backends.LoadProber), over REST (load_rest.go) and over SSH
// (load_ssh.go). Both read what the job asks for the way Submit does
// (jobproperties over the script's #SBATCH lines, the Bridge Operator's
// aliases), read the partitions it names (or the default one), and judge
// here, in one place, whether the job fits and which numbers to report.
//
// A partition list ("a,b": Slurm starts the job in whichever can start it
// first) is probed within the same requests. The Load reported is that of
// one listed partition, not a sum: partitions often share nodes (the same
// nodes under different limits), and a sum would count their CPUs twice.
// It is the partition where the job fits with the most free CPUs (then the
// fewest pending jobs, then the order listed), the one Slurm is likeliest
// to start it in; the job fits if it fits in any of them. Queue is the list
// as named.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// demand is what a job asks of a partition.
type demand struct {
	partitions  []string // as named, in order; nil: the default partition
	tasks       int
	cpusPerTask int
	nodes       int   // the minimum node count
	minutes     int64 // the time limit; 0 unset (the partition's default), -1 none
	parallel    int   // tasks of an array that may run at once (1 for a job)
	count       int   // tasks of an array (1 for a job)
}

// taskCPUs is one job's (one array task's) CPUs: every task's, and at
// least one per node.
func (d demand) taskCPUs() int {
	return max(d.tasks*d.cpusPerTask, d.nodes, 1)
}

// jobCPUs is what the whole job asks for at once: an array's tasks
// together, up to its parallel limit (backends.Load.JobCPUs).
func (d demand) jobCPUs() int { return d.taskCPUs() * max(d.parallel, 1) }

// cpuSeconds is the job's work at p: every task's CPUs times its time
// limit (p's MaxTime when it sets none); 0 when neither is known.
func (d demand) cpuSeconds(p partLoad) int64 {
	m := d.minutes
	if m == 0 {
		m = p.maxMinutes
	}
	if m <= 0 {
		return 0
	}
	return int64(d.taskCPUs()) * int64(max(d.count, 1)) * m * 60
}

// newDemand is a job's demand before its fields are read: one task of one
// CPU, as Slurm assumes.
func newDemand(array *backends.Array) demand {
	d := demand{tasks: 1, cpusPerTask: 1, parallel: 1, count: 1}
	if array != nil {
		d.parallel, d.count = array.Count(), array.Count()
		if array.MaxParallel > 0 && array.MaxParallel < d.parallel {
			d.parallel = array.MaxParallel
		}
	}
	return d
}

// setPartitions reads a partition or a comma-separated list of them.
func (d *demand) setPartitions(s string) {
	d.partitions = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			d.partitions = append(d.partitions, p)
		}
	}
}

// setNodes reads a node count: 2, "2", or a range "2-4" (its minimum).
func (d *demand) setNodes(s string) {
	lo, _, _ := strings.Cut(strings.TrimSpace(s), "-")
	if n, err := strconv.Atoi(lo); err == nil && n > 0 {
		d.nodes = n
	}
}

// setCount sets *to from a positive count; anything else leaves it (Submit
// refuses it, or Slurm does).
func setCount(to *int, s string) {
	if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
		*to = n
	}
}

// rawString is a job field as text: a JSON string's contents, or a
// number's digits.
func rawString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if n, ok := number(raw); ok {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// partLoad is one partition as a probe saw it. Limits are -1 when none.
type partLoad struct {
	name       string
	isDefault  bool
	state      string // UP, DOWN, DRAIN, INACTIVE (upper case)
	totalCPUs  int
	freeCPUs   int
	totalNodes int
	freeNodes  int
	maxMinutes int64 // MaxTime
	maxNodes   int   // MaxNodes, per job
	maxCPUs    int   // MaxCPUsPerNode
	pending    int
	running    int
	pendCPUs   int
	runCPUs    int // what its running jobs were given
	// pendSecs and runSecs are the CPU-seconds of its pending jobs (CPUs ×
	// time limit) and running ones (CPUs × time left); noSecs: some job's
	// time was not told (or the counts came from metrics), so they are
	// unknown.
	pendSecs, runSecs int64
	noSecs            bool
}

func newPartLoad(name string) partLoad {
	return partLoad{name: name, maxMinutes: -1, maxNodes: -1, maxCPUs: -1}
}

// capFree caps a partition's free CPUs by its MaxCPUsPerNode: its nodes'
// idle CPUs are free to it only up to what its own running jobs leave of
// that cap (a partition of two CPUs per node, both in use, has none free
// however idle the node is).
func (p *partLoad) capFree() {
	if p.maxCPUs > 0 {
		p.freeCPUs = min(p.freeCPUs, max(p.capacity()-p.runCPUs, 0))
	}
}

// capacity is the most CPUs one job can have there.
func (p partLoad) capacity() int {
	if p.maxCPUs > 0 && p.totalNodes > 0 && p.maxCPUs*p.totalNodes < p.totalCPUs {
		return p.maxCPUs * p.totalNodes
	}
	return p.totalCPUs
}

// stateWords says a partition's state in our words; "" for UP.
var stateWords = map[string]string{"UP": "", "DOWN": "is down (it takes jobs but starts none)",
	"DRAIN": "is draining (it takes no new jobs)", "INACTIVE": "is inactive (it takes no jobs)"}

// whyNot says why d cannot run in p as given, or "" when it can.
func whyNot(d demand, p partLoad) string {
	if w, known := stateWords[p.state]; !known {
		return fmt.Sprintf("partition %s is not up", p.name)
	} else if w != "" {
		return fmt.Sprintf("partition %s %s", p.name, w)
	}
	switch {
	case p.totalNodes >= 0 && d.nodes > p.totalNodes:
		return fmt.Sprintf("the job asks for %d nodes; partition %s has %d", d.nodes, p.name, p.totalNodes)
	case p.maxNodes > 0 && d.nodes > p.maxNodes:
		return fmt.Sprintf("the job asks for %d nodes; partition %s allows %d a job", d.nodes, p.name, p.maxNodes)
	case p.capacity() >= 0 && d.taskCPUs() > p.capacity():
		return fmt.Sprintf("the job asks for %d CPUs (tasks × cpus_per_task); partition %s has %d for one job", d.taskCPUs(), p.name, p.capacity())
	case p.maxMinutes >= 0 && d.minutes < 0:
		return fmt.Sprintf("the job asks for no time limit; partition %s allows %s at most", p.name, minutesText(p.maxMinutes))
	case p.maxMinutes >= 0 && d.minutes > p.maxMinutes:
		return fmt.Sprintf("the job's time limit, %s, is over partition %s's maximum, %s", minutesText(d.minutes), p.name, minutesText(p.maxMinutes))
	}
	return ""
}

// minutesText is a time limit as Slurm writes one (D-HH:MM:SS).
func minutesText(m int64) string {
	s := fmt.Sprintf("%02d:%02d:00", m/60%24, m%60)
	if m >= 24*60 {
		s = strconv.FormatInt(m/(24*60), 10) + "-" + s
	}
	return s
}

// judge makes the Load of d from the partitions it names (parts, in the
// order named; see the top of this file for a list).
func judge(d demand, parts []partLoad) backends.Load {
	for i := range parts {
		parts[i].capFree()
	}
	names := make([]string, len(parts))
	best, fits := -1, false
	var why []string
	for i, p := range parts {
		names[i] = p.name
		w := whyNot(d, p)
		if w != "" {
			why = append(why, w)
			continue
		}
		if !fits || p.freeCPUs > parts[best].freeCPUs || (p.freeCPUs == parts[best].freeCPUs && p.pending < parts[best].pending) {
			best, fits = i, true
		}
	}
	if best < 0 {
		best = 0
	}
	p := parts[best]
	l := backends.Load{Fits: fits, Queue: strings.Join(names, ","), FreeCPUs: p.freeCPUs, TotalCPUs: p.capacity(),
		FreeNodes: p.freeNodes, TotalNodes: p.totalNodes, PendingJobs: p.pending, RunningJobs: p.running,
		PendingCPUs: p.pendCPUs, JobCPUs: d.jobCPUs(),
		PendingCPUSeconds: p.pendSecs, RunningCPUSeconds: p.runSecs, CPUSecondsKnown: !p.noSecs, JobCPUSeconds: d.cpuSeconds(p)}
	if !fits {
		l.Why = strings.Join(why, "; ")
	}
	return l
}

// pickParts resolves d's partitions among those the cluster has (all): the
// ones named, in their order, or the default one. A name the cluster does
// not have is invalid: Slurm refuses a list with one unknown partition
// too. ok is false when no partition is named and none is marked default.
func pickParts(d demand, all []partLoad) (parts []partLoad, ok bool, err error) {
	if len(d.partitions) == 0 {
		for _, p := range all {
			if p.isDefault {
				return []partLoad{p}, true, nil
			}
		}
		return nil, false, nil
	}
	for _, name := range d.partitions {
		i := indexOf(all, name)
		if i < 0 {
			return nil, false, backends.Invalid("jobproperties.partition", "the cluster has no partition %q (sinfo -s lists those there are); name one of them, or leave partition out for the default", name)
		}
		parts = append(parts, all[i])
	}
	return parts, true, nil
}

func indexOf(all []partLoad, name string) int {
	for i, p := range all {
		if p.name == name {
			return i
		}
	}
	return -1
}

// countJob adds one job of the queue to the partitions it is in: part is
// its partition, or for a pending job the list it may start in; tasks is
// how many tasks a pending array's record stands for (1 otherwise); secs
// is its time limit (pending) or time left (running) in seconds, -1 when
// the scheduler gave none (then the partition's MaxTime stands for it).
func countJob(parts []partLoad, state, part string, cpus, tasks int, secs int64) {
	for _, name := range strings.Split(part, ",") {
		i := indexOf(parts, strings.TrimSpace(name))
		if i < 0 {
			continue
		}
		p := &parts[i]
		n := max(cpus, 1) * max(tasks, 1)
		s := secs
		if s < 0 && p.maxMinutes > 0 {
			s = p.maxMinutes * 60
		}
		p.noSecs = p.noSecs || s < 0
		switch state {
		case "PENDING":
			p.pending++
			p.pendCPUs += n
			p.pendSecs += int64(n) * max(s, 0)
		case "RUNNING":
			p.running++
			p.runCPUs += n
			p.runSecs += int64(n) * max(s, 0)
		}
	}
}

// arrayTaskCount is how many tasks a pending array record stands for, from
// its task string ("5-999%50"), 1 when it is not an array's.
func arrayTaskCount(spec string) int {
	spec = strings.Trim(strings.TrimSpace(spec), "[]")
	if spec == "" || spec == "N/A" {
		return 1
	}
	a, err := backends.ParseArray(spec)
	if err != nil || a.Count() == 0 {
		return 1
	}
	return a.Count()
}
