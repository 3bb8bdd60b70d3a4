package htcondor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// ProbeCommands is how many remote commands ProbeLoad runs: condor_status
// for the pool's slots and condor_q -totals for its queue.
const ProbeCommands = 2

// slotAd is the part of a startd slot's ClassAd the probe reads.
type slotAd struct {
	Machine         string  `json:"Machine"`
	SlotType        string  `json:"SlotType"` // Partitionable, Dynamic, Static (absent: static)
	State           string  `json:"State"`
	Cpus            float64 `json:"Cpus"` // a partitionable slot: what is left of it
	Memory          float64 `json:"Memory"`
	TotalSlotCpus   float64 `json:"TotalSlotCpus"`
	TotalSlotMemory float64 `json:"TotalSlotMemory"`
}

const slotAttributes = "Machine,SlotType,State,Cpus,Memory,TotalSlotCpus,TotalSlotMemory"

// queueTotals is condor_q -allusers -totals -json's summary ad.
type queueTotals struct {
	AllusersIdle    *int `json:"AllusersIdle"`
	AllusersRunning *int `json:"AllusersRunning"`
	Idle            int  `json:"Idle"`
	Running         int  `json:"Running"`
}

// ProbeLoad reads the pool as the submit host sees it, with ProbeCommands
// remote commands: the execute slots (condor_status, whose ads are slots), which give
// the pool's CPUs, what is free of them and whether some slot could ever
// match the job's request_cpus and request_memory, and the schedd's job
// totals (idle jobs are pending). HTCondor has no queues: Queue is empty.
// Both commands are the pool's measure (MeasureLoad, the same for every
// job): ProbeLoad is LoadFrom of a fresh one.
func (b *Backend) ProbeLoad(ctx context.Context, job backends.Job, array *backends.Array) (backends.Load, error) {
	req, err := jobRequest(job)
	if err != nil {
		return backends.Load{}, err
	}
	m, err := b.measure(ctx)
	if err != nil {
		return backends.Load{}, err
	}
	return judgePool(m, req, array), nil
}

// measure reads the pool's slots and the schedd's totals, whatever the
// job.
func (b *Backend) measure(ctx context.Context) (poolMeasure, error) {
	slots, err := b.slots(ctx)
	if err != nil {
		return poolMeasure{}, err
	}
	totals, err := b.queueTotals(ctx)
	if err != nil {
		return poolMeasure{}, err
	}
	m := measurePool(slots)
	m.Pending, m.Running = totals.Idle, totals.Running
	if totals.AllusersIdle != nil && totals.AllusersRunning != nil {
		m.Pending, m.Running = *totals.AllusersIdle, *totals.AllusersRunning
	}
	return m, nil
}

// parallelTasks is how many of an array's tasks may run at once (1 for a
// single job).
func parallelTasks(a *backends.Array) int {
	if a == nil {
		return 1
	}
	n := a.Count()
	if a.MaxParallel > 0 && a.MaxParallel < n {
		n = a.MaxParallel
	}
	return n
}

// request is what a job asks of a slot; memory < 0 when its
// request_memory is an expression the probe does not evaluate.
type request struct {
	cpus     int
	memoryMB float64
}

// jobRequest reads request_cpus and request_memory from jobproperties
// (HTCondor's defaults: 1 CPU; memory unchecked when not given). A value
// that is an expression is not checked (the negotiator evaluates it).
func jobRequest(job backends.Job) (request, error) {
	cmds, err := properties(job.Properties)
	if err != nil {
		return request{}, err
	}
	req := request{cpus: 1, memoryMB: -1}
	for _, c := range cmds {
		switch strings.ToLower(c[0]) {
		case "request_cpus":
			if n, err := strconv.Atoi(strings.TrimSpace(c[1])); err == nil {
				req.cpus = n
			}
		case "request_memory":
			req.memoryMB = memoryMB(c[1])
		}
	}
	return req, nil
}

// memoryMB reads a request_memory value: a number of MiB, or a number with
// a K, M, G or T unit (an optional B after it); -1 when it is anything else.
func memoryMB(v string) float64 {
	v = strings.ToUpper(strings.TrimSpace(v))
	v = strings.TrimSuffix(v, "B")
	scale := 1.0
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'K':
			scale, v = 1.0/1024, v[:n-1]
		case 'M':
			v = v[:n-1]
		case 'G':
			scale, v = 1024, v[:n-1]
		case 'T':
			scale, v = 1024*1024, v[:n-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 {
		return -1
	}
	return f * scale
}

// poolMeasure is the pool's load before any job is judged: its sums, and
// the shapes of its largest slots (a slot another is at least as large as
// in CPUs and memory cannot fit a job the other cannot), which is all
// whether a job fits depends on.
type poolMeasure struct {
	Format     int `json:"f"`
	Slots      int `json:"s"` // slot ads read, dynamic ones too
	TotalCPUs  int `json:"tc"`
	FreeCPUs   int `json:"fc"`
	TotalNodes int `json:"tn"`
	FreeNodes  int `json:"fn"`
	Pending    int `json:"p"`
	Running    int `json:"r"`
	// Shapes are [CPUs, memory in MiB] of the largest slots, CPUs
	// descending.
	Shapes [][2]float64 `json:"sh"`
}

// measureFormat names the published measure's format: a measure of any
// other is not read (the step probes for itself).
const measureFormat = 1

// measurePool sums the slots: a partitionable slot counts its whole size
// (TotalSlotCpus) and what is left of it (Cpus) is free; a dynamic slot
// is a piece of a partitionable one, already counted; a static slot is
// free when Unclaimed.
func measurePool(slots []slotAd) poolMeasure {
	m := poolMeasure{Format: measureFormat, Slots: len(slots)}
	total, free := map[string]float64{}, map[string]float64{}
	var shapes [][2]float64
	for _, s := range slots {
		size, left, sizeMem := s.Cpus, 0.0, s.Memory
		switch s.SlotType {
		case "Dynamic":
			continue
		case "Partitionable":
			size, left, sizeMem = s.TotalSlotCpus, s.Cpus, s.TotalSlotMemory
		default:
			if s.State == "Unclaimed" {
				left = s.Cpus
			}
		}
		total[s.Machine] += size
		free[s.Machine] += left
		m.TotalCPUs += int(size)
		m.FreeCPUs += int(left)
		shapes = append(shapes, [2]float64{size, sizeMem})
	}
	m.TotalNodes = len(total)
	for mach, t := range total {
		if t > 0 && free[mach] >= t {
			m.FreeNodes++
		}
	}
	m.Shapes = largest(shapes)
	return m
}

// largest keeps the shapes no other is at least as large as in both
// dimensions (one of equal ones), CPUs descending.
func largest(shapes [][2]float64) [][2]float64 {
	sort.Slice(shapes, func(i, j int) bool {
		if shapes[i][0] != shapes[j][0] {
			return shapes[i][0] > shapes[j][0]
		}
		return shapes[i][1] > shapes[j][1]
	})
	var out [][2]float64
	for _, s := range shapes {
		if len(out) == 0 || s[1] > out[len(out)-1][1] {
			out = append(out, s)
		}
	}
	return out
}

// judgePool is the Load of a job asking req (array's tasks at once) in the
// pool m: it fits if one slot is large enough for it.
func judgePool(m poolMeasure, req request, array *backends.Array) backends.Load {
	load := backends.UnknownLoad("")
	load.Fits = false
	load.TotalCPUs, load.FreeCPUs, load.TotalNodes, load.FreeNodes = m.TotalCPUs, m.FreeCPUs, m.TotalNodes, m.FreeNodes
	load.PendingJobs, load.RunningJobs = m.Pending, m.Running
	for _, s := range m.Shapes {
		if s[0] >= float64(req.cpus) && (req.memoryMB < 0 || s[1] >= req.memoryMB) {
			load.Fits = true
		}
	}
	if !load.Fits {
		load.Why = noSlotWhy(m.Slots, req)
	}
	load.JobCPUs = req.cpus * parallelTasks(array)
	return load
}

// MeasureLoad implements backends.LoadPublisher: ProbeLoad's two commands,
// as one line of JSON (figures only).
func (b *Backend) MeasureLoad(ctx context.Context) (string, error) {
	m, err := b.measure(ctx)
	if err != nil {
		return "", err
	}
	return backends.EncodeMeasure(m, fmt.Sprintf("%d slot shapes", len(m.Shapes)))
}

// LoadFrom implements backends.LoadPublisher.
func (b *Backend) LoadFrom(measure string, job backends.Job, array *backends.Array) (backends.Load, error) {
	var m poolMeasure
	if json.Unmarshal([]byte(measure), &m) != nil || m.Format != measureFormat {
		return backends.Load{}, backends.ErrMeasureFormat
	}
	req, err := jobRequest(job)
	if err != nil {
		return backends.Load{}, err
	}
	return judgePool(m, req, array), nil
}

var _ backends.LoadPublisher = (*Backend)(nil)

func noSlotWhy(slots int, req request) string {
	if slots == 0 {
		return "the pool has no execute slots"
	}
	if req.memoryMB >= 0 {
		return fmt.Sprintf("no slot of the pool has %d CPUs and %.0f MiB of memory (request_cpus, request_memory)", req.cpus, req.memoryMB)
	}
	return fmt.Sprintf("no slot of the pool has %d CPUs (request_cpus)", req.cpus)
}

// slots runs condor_status (slot ads; -startd would give one ad per
// startd, without the slots' sizes): one remote command.
func (b *Backend) slots(ctx context.Context) ([]slotAd, error) {
	out, err := b.probeCommand(ctx, "condor_status", "-json", "-attributes", slotAttributes)
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return nil, err
	}
	var slots []slotAd
	if err := json.Unmarshal(out, &slots); err != nil {
		return nil, backends.Transient(fmt.Errorf("cannot read condor_status's JSON (%d bytes, not shown)", len(out)))
	}
	return slots, nil
}

// queueTotals runs condor_q -allusers -totals: one remote command.
func (b *Backend) queueTotals(ctx context.Context) (queueTotals, error) {
	out, err := b.probeCommand(ctx, "condor_q", "-allusers", "-totals", "-json")
	if err != nil {
		return queueTotals{}, err
	}
	var ads []queueTotals
	if err := json.Unmarshal(out, &ads); err != nil || len(ads) != 1 {
		return queueTotals{}, backends.Transient(fmt.Errorf("cannot read condor_q -totals' JSON (%d bytes, not shown)", len(out)))
	}
	return ads[0], nil
}

// probeCommand runs one read-only command. Its failure is named by the
// command and exit status only: a pool that cannot answer (the collector
// or schedd away) is transient, a missing command an invalid resourceURL.
func (b *Backend) probeCommand(ctx context.Context, args ...string) ([]byte, error) {
	b.queries.Add(1)
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: args})
	if err != nil {
		return nil, err
	}
	switch {
	case res.ExitCode == 127:
		return nil, b.ssh.CommandError(condor, args[0], res, "resourceURL")
	case res.ExitCode != 0:
		return nil, backends.Transient(fmt.Errorf("%s exited %d (%d bytes of output, not shown): the pool did not answer", args[0], res.ExitCode, len(res.Stdout)+len(res.Stderr)))
	}
	return res.Stdout, nil
}
