package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// What an ended job used, from slurmdbd (REST: GET /slurmdb/vX/job/{id})
// or sacct (SSH). Only documented fields are read: the job's allocated
// CPUs and requested memory (TRES), elapsed and time limit, and per step
// the CPU time (user plus system) and the peak resident memory (the step's
// TRES usage "max" for mem, sacct's MaxRSS). A cluster with
// JobAcctGatherType=jobacct_gather/none records neither CPU time nor
// memory: those stay zero (unknown).

// dbTres is a job record's TRES: what was allocated and requested.
type dbTres struct {
	Allocated []tresCount `json:"allocated"`
	Requested []tresCount `json:"requested"`
}

// tresCount is one TRES figure: cpu (a count), mem (MiB in a job's
// TRES, bytes in a step's usage).
type tresCount struct {
	Type  string          `json:"type"`
	Count json.RawMessage `json:"count"`
}

// dbStep is the part of a step's record that usage needs.
type dbStep struct {
	Time struct {
		Total dbSeconds `json:"total"` // user + system
	} `json:"time"`
	Tres struct {
		Requested struct { // the step's usage, despite the name
			Max []tresCount `json:"max"`
		} `json:"requested"`
	} `json:"tres"`
}

// dbSeconds is slurmdbd's CPU time; microseconds may exceed a second.
type dbSeconds struct {
	Seconds      json.RawMessage `json:"seconds"`
	Microseconds json.RawMessage `json:"microseconds"`
}

func (s dbSeconds) seconds() float64 {
	sec, _ := number(s.Seconds)
	us, _ := number(s.Microseconds)
	return float64(sec) + float64(us)/1e6
}

func tres(list []tresCount, typ string) int64 {
	for _, t := range list {
		if t.Type == typ {
			n, _ := number(t.Count)
			return n
		}
	}
	return 0
}

// Usage reads the job's records (every task's for an array) from slurmdbd.
func (b *Backend) Usage(ctx context.Context, id string) (backends.Usage, error) {
	if !validID(id) {
		return backends.Usage{}, fmt.Errorf("%q is not a Slurm job id: %w", id, backends.ErrNotFound)
	}
	jobs, err := b.accountingRecords(ctx, id)
	if err != nil {
		return backends.Usage{}, err
	}
	if b.noAccounting.Load() {
		return backends.Usage{}, backends.ErrNoAccounting
	}
	var u backends.Usage
	for _, dj := range jobs {
		j := dj.jobInfo()
		if j.id() != id && j.baseID() != id {
			continue
		}
		if !j.status().State.Final() || j.status().EndTime.IsZero() {
			return backends.Usage{}, fmt.Errorf("slurmdbd has not recorded the end of job %s yet: %w", j.id(), backends.ErrNotFound)
		}
		if tres(dj.Tres.Requested, "cpu") == 0 {
			// Seen under load: slurmdbd had the job's end but not yet what it
			// asked for (no requested TRES, no time limit; sacct printed
			// ReqMem "16?"). The rest comes a moment later.
			return backends.Usage{}, fmt.Errorf("slurmdbd has not recorded what job %s asked for yet: %w", j.id(), backends.ErrNotFound)
		}
		t := taskUsage{cpus: tres(dj.Tres.Allocated, "cpu"), reqMemMiB: tres(dj.Tres.Requested, "mem"),
			submit: j.status().SubmitTime, start: j.status().StartTime}
		t.elapsed, _ = number(dj.Time.Elapsed)
		t.limitMin, _ = number(dj.Time.Limit)
		for _, s := range dj.Steps {
			t.cpuSeconds += s.Time.Total.seconds()
			t.maxRSS = max(t.maxRSS, tres(s.Tres.Requested.Max, "mem"))
		}
		t.addTo(&u)
	}
	if u.Tasks == 0 {
		return backends.Usage{}, fmt.Errorf("slurmdbd does not know job %s (yet): %w", id, backends.ErrNotFound)
	}
	return u, nil
}

// taskUsage is one job's or array task's figures, as Slurm gives them.
type taskUsage struct {
	cpus, reqMemMiB   int64
	elapsed, limitMin int64 // seconds, minutes
	cpuSeconds        float64
	maxRSS            int64 // bytes
	submit, start     time.Time
}

// addTo folds t into u (see backends.Usage).
func (t taskUsage) addTo(u *backends.Usage) {
	u.Tasks++
	u.CPUs = max(u.CPUs, int(t.cpus))
	u.CPUSeconds += t.cpuSeconds
	u.CoreSeconds += float64(t.cpus * t.elapsed)
	u.Elapsed = max(u.Elapsed, time.Duration(t.elapsed)*time.Second)
	u.TimeLimit = max(u.TimeLimit, time.Duration(t.limitMin)*time.Minute)
	u.MaxRSSBytes = max(u.MaxRSSBytes, t.maxRSS)
	u.ReqMemBytes = max(u.ReqMemBytes, t.reqMemMiB<<20)
	if !t.submit.IsZero() && (u.Submit.IsZero() || t.submit.Before(u.Submit)) {
		u.Submit = t.submit
	}
	if !t.start.IsZero() && (u.Start.IsZero() || t.start.Before(u.Start)) {
		u.Start = t.start
	}
}

// sacctUsageFields are the documented sacct fields Usage asks for, in order.
const sacctUsageFields = "JobID,State,AllocCPUS,ElapsedRaw,TimelimitRaw,TotalCPU,MaxRSS,ReqMem,Submit,Start"

// Usage runs sacct for the job (every task's and step's line for an array).
// --noconvert keeps MaxRSS exact, as slurmdbd stores it: without it sacct
// rounds a figure such as 4718592 bytes to "4.50M", two decimals of its own.
func (b *SSHBackend) Usage(ctx context.Context, id string) (backends.Usage, error) {
	if !slurmID().MatchString(id) {
		return backends.Usage{}, fmt.Errorf("%q is not a Slurm job id: %w", id, backends.ErrNotFound)
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"sacct", "--parsable2", "--noheader", "--noconvert", "-j", id, "-o", sacctUsageFields}})
	if err != nil {
		return backends.Usage{}, err
	}
	switch {
	case res.ExitCode != 0 && res.Says("accounting storage is disabled"):
		return backends.Usage{}, backends.ErrNoAccounting
	case res.ExitCode != 0:
		return backends.Usage{}, backends.Transient(fmt.Errorf("sacct for job %s (exit %d): %s", id, res.ExitCode, slurmCLI.Said("sacct", res)))
	}
	return parseSacctUsage(id, string(res.Stdout))
}

// parseSacctUsage folds sacct's lines: a job's (or array task's) line
// carries its CPUs, times, requested memory and CPU time (the sum of its
// steps'); its steps' lines (ID.batch, ID.0) carry MaxRSS.
func parseSacctUsage(id, out string) (backends.Usage, error) {
	tasks := map[string]*taskUsage{}
	var order []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 10 {
			continue
		}
		task, step, isStep := strings.Cut(f[0], ".")
		if task != id && !strings.HasPrefix(task, id+"_") {
			continue
		}
		t := tasks[task]
		if t == nil {
			t = &taskUsage{}
			tasks[task] = t
			order = append(order, task)
		}
		if isStep && step != "" {
			rss, _ := sacctBytes(f[6], 1) // "": not gathered
			t.maxRSS = max(t.maxRSS, rss)
			continue
		}
		if st, _ := mapState([]string{strings.Fields(f[1] + " ")[0]}, ""); !st.Final() {
			return backends.Usage{}, fmt.Errorf("sacct says job %s is not over yet: %w", task, backends.ErrNotFound)
		}
		// slurmdbd 22.05, busy, has answered a job's line before it held
		// the job's request: TimelimitRaw empty (a job without a limit
		// says UNLIMITED) and ReqMem NO_VAL. Figures read from it would
		// claim no limit and no memory: ask again later.
		if f[4] == "" || strings.HasPrefix(f[7], "18446744073709551") {
			return backends.Usage{}, fmt.Errorf("sacct does not know what job %s asked for yet: %w", task, backends.ErrNotFound)
		}
		t.cpus, _ = strconv.ParseInt(f[2], 10, 64)
		t.elapsed, _ = strconv.ParseInt(f[3], 10, 64)
		t.limitMin, _ = strconv.ParseInt(f[4], 10, 64) // UNLIMITED: none
		t.cpuSeconds = sacctSeconds(f[5])
		mem, ok := sacctBytes(f[7], t.cpus)
		if !ok { // "" or "16?": slurmdbd has not recorded what the job asked for yet
			return backends.Usage{}, fmt.Errorf("sacct does not know what job %s asked for yet: %w", task, backends.ErrNotFound)
		}
		t.reqMemMiB = mem >> 20
		t.submit, t.start = slurmTime(f[8]), slurmTime(f[9])
	}
	var u backends.Usage
	for _, task := range order {
		tasks[task].addTo(&u)
	}
	if u.Tasks == 0 {
		return backends.Usage{}, fmt.Errorf("sacct does not know job %s (yet): %w", id, backends.ErrNotFound)
	}
	return u, nil
}

// sacctSeconds reads TotalCPU: [DD-[HH:]]MM:SS[.mmm].
func sacctSeconds(s string) float64 {
	days := 0.0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil {
			return 0
		}
		days, s = n, rest
	}
	total := 0.0
	for _, part := range strings.Split(s, ":") {
		n, err := strconv.ParseFloat(part, 64)
		if err != nil || n < 0 {
			return 0
		}
		total = total*60 + n
	}
	return days*86400 + total
}

// sacctBytes reads MaxRSS or ReqMem: a number with a unit K, M, G, T
// (powers of 1024; none: bytes for MaxRSS) and, in ReqMem before 21.08, n
// (per node) or c (per CPU, then multiplied by cpus).
func sacctBytes(s string, cpus int64) (int64, bool) {
	s = strings.TrimSpace(s)
	per := int64(1)
	if strings.HasSuffix(s, "c") {
		per = max(cpus, 1)
	}
	s = strings.TrimRight(s, "nc")
	mult := int64(1)
	if i := len(s) - 1; i >= 0 {
		if k := strings.IndexByte("KMGTP", s[i]); k >= 0 {
			mult, s = int64(1)<<(10*(k+1)), s[:i]
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return int64(n*float64(mult)) * per, true
}
