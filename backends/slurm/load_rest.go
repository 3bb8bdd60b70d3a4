package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// ProbeLoad implements backends.LoadProber with three GETs, sent at once,
// whatever the job and however many partitions it names (and, once per
// backend, the discovery of the API version):
//
//   - partitions/: every partition's state, size and limits, which also
//     resolves the default partition;
//   - nodes/: each node's CPUs, allocated CPUs and state, for the free CPUs
//     and nodes of the partitions they are in;
//   - the queue, for the pending and running jobs of the partitions (when
//     it does not come, for a timeout or a 5xx, those counts are unknown,
//     -1, and the rest is reported): slurmctld's /metrics/partitions where
//     the credentials give its metricsURL (load_metrics.go), else jobs/.
//
// GET jobs/ is the costly one: slurmrestd has no filter by partition or
// state in any version (jobs/state/ takes only job ids and gives no
// partition), so it carries every job slurmctld knows, about 11 KB a job
// at v0.0.42 (more at v0.0.45). It is decoded as it streams in, one job at
// a time. Its one filter, update_time, is all or nothing (every job, if
// any changed since), which saves nothing on a busy cluster. It is still
// the cheapest documented query that counts jobs by partition where the
// site has no metrics (Slurm before 25.11, or MetricsType unset).
//
// From v0.0.40 to v0.0.44, slurmrestd does not say which partition is the
// default (v0.0.38 has flags ["default"], v0.0.45 of Slurm 26.05 flags
// ["DEFAULT"] again): a job that names no partition is probed against the
// only one, and where there are several its load is unknown
// (backends.UnknownLoad) until jobproperties names one.
func (b *Backend) ProbeLoad(ctx context.Context, job backends.Job, array *backends.Array) (backends.Load, error) {
	spec, err := buildJob(job)
	if err != nil {
		return backends.Load{}, err
	}
	m, err := b.measure(ctx)
	if err != nil {
		return backends.Load{}, err
	}
	return b.judgeMeasure(m, restDemand(spec, array))
}

// measure reads every partition's load, whatever the job: the part of the
// probe a cluster's agent does once for every step (MeasureLoad).
func (b *Backend) measure(ctx context.Context) (loadMeasure, error) {
	metrics, err := b.metricsBase()
	if err != nil {
		return loadMeasure{}, err
	}
	if _, err := b.version(ctx); err != nil {
		return loadMeasure{}, probeError(err)
	}
	var all []partLoad
	var nodes []nodeInfo
	var queue []queuedJob
	var counted map[string]partQueue
	var errs [3]error
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); all, errs[0] = b.partitions(ctx) }()
	go func() { defer wg.Done(); nodes, errs[1] = b.nodes(ctx) }()
	go func() {
		defer wg.Done()
		if metrics != "" {
			counted, errs[2] = b.metricsQueue(ctx, metrics)
		} else {
			queue, errs[2] = b.queue(ctx)
		}
	}()
	wg.Wait()
	for _, err := range errs[:2] {
		if err != nil {
			return loadMeasure{}, probeError(err)
		}
	}
	for _, n := range nodes {
		n.addTo(all)
	}
	for _, j := range queue {
		countJob(all, j.state, j.partition, j.cpus, j.tasks, j.secs)
	}
	if counted != nil {
		addMetricsTo(all, counted)
	}
	// Jobs that name no partition cannot be counted to one: the counts
	// are unknown, not zero.
	m := loadMeasure{parts: all, noQueue: unattributed(queue)}
	if err := probeError(errs[2]); err != nil {
		if !errors.Is(err, backends.ErrTransient) {
			return loadMeasure{}, err
		}
		// The queue is the answer a busy slurmrestd is slowest to give
		// (every job it knows): without it the partitions still say
		// whether the job fits and how many CPUs are free.
		b.log.Warn("the queue did not come (slurmrestd's jobs/ or slurmctld's metrics); the probe reports its job counts as unknown", "error", err)
		m.noQueue = true
	}
	return m, nil
}

// judgeMeasure is the Load of d at the partitions of m it names (or the
// default one). A partition m does not have is invalid input.
func (b *Backend) judgeMeasure(m loadMeasure, d demand) (backends.Load, error) {
	all := append([]partLoad(nil), m.parts...)
	if len(d.partitions) == 0 && len(all) == 1 {
		all[0].isDefault = true // the only partition is the default
	}
	parts, ok, err := pickParts(d, all)
	switch {
	case err != nil:
		return backends.Load{}, err
	case !ok:
		b.log.Info("slurmrestd does not say which partition is the default (API v0.0.40 to v0.0.44); name the partition in jobproperties for its load to be known")
		l := backends.UnknownLoad("")
		l.JobCPUs = d.jobCPUs()
		return l, nil
	}
	l := judge(d, parts)
	if m.noQueue {
		l.PendingJobs, l.RunningJobs, l.PendingCPUs, l.CPUSecondsKnown = -1, -1, -1, false
	}
	return l, nil
}

// probeError makes a failed answer of 5xx transient, as the probe's
// contract has it: placement then skips the target for now. Refused
// credentials and invalid settings stay what they are.
func probeError(err error) error {
	var he *httpStatusError
	if errors.As(err, &he) && !errors.Is(err, backends.ErrTransient) && !errors.Is(err, backends.ErrAuth) && !errors.Is(err, backends.ErrInvalid) {
		return backends.Transient(err)
	}
	return err
}

// httpStatusError marks an error of a 5xx answer for probeError.
type httpStatusError struct{ err error }

func (e *httpStatusError) Error() string { return e.err.Error() }
func (e *httpStatusError) Unwrap() error { return e.err }

// restDemand reads what the job asks for from the fields Submit would send.
func restDemand(spec *jobSpec, array *backends.Array) demand {
	d := newDemand(array)
	if raw, ok := spec.fields["partition"]; ok {
		d.setPartitions(rawString(raw))
	}
	setCount(&d.tasks, rawString(spec.fields["tasks"]))
	setCount(&d.cpusPerTask, rawString(spec.fields["cpus_per_task"]))
	d.setNodes(rawString(spec.fields["nodes"]))
	if _, ok := spec.fields["tasks"]; !ok && d.nodes > 1 {
		d.tasks = d.nodes // sbatch's default: one task a node
	}
	switch tl := spec.timeLimit; {
	case tl == nil:
	case tl.infinite:
		d.minutes = -1
	default:
		d.minutes = int64(tl.minutes)
	}
	return d
}

// get sends one GET of the probe; a failed answer is an error (see
// probeError).
func (b *Backend) get(ctx context.Context, endpoint string) (*response, error) {
	r, err := b.do(ctx, http.MethodGet, b.apiPath(endpoint), nil)
	if err != nil {
		return nil, err
	}
	if r.status != http.StatusOK {
		err := b.classify(ctx, r, "")
		if r.status >= 500 {
			err = &httpStatusError{err}
		}
		return nil, err
	}
	return r, nil
}

// unreadable is the error for a 200 answer that is not what slurmrestd
// sends: named by its size, never quoted.
func unreadable(r *response) error {
	return fmt.Errorf("%s %s: the answer (%d bytes, not shown) is not the JSON slurmrestd sends", r.method, r.path, len(r.body))
}

// restPartition is a partition of GET partitions/: v0.0.38's flat fields
// and v0.0.40+'s nested ones side by side; numbers in any shape number reads.
type restPartition struct {
	Name string `json:"name"`
	// v0.0.38
	Flags          []string        `json:"flags"`
	State          string          `json:"state"`
	TotalCPUs      json.RawMessage `json:"total_cpus"`
	TotalNodes     json.RawMessage `json:"total_nodes"`
	MaxTime        json.RawMessage `json:"max_time_limit"`
	MaxNodes       json.RawMessage `json:"maximum_nodes_per_job"`
	MaxCPUsPerNode json.RawMessage `json:"maximum_cpus_per_node"`
	// v0.0.40+ ("nodes" is v0.0.38's node list string)
	Partition struct {
		State []string `json:"state"`
	} `json:"partition"`
	CPUs struct {
		Total json.RawMessage `json:"total"`
	} `json:"cpus"`
	Nodes    json.RawMessage `json:"nodes"`
	Maximums struct {
		Time        json.RawMessage `json:"time"`
		Nodes       json.RawMessage `json:"nodes"`
		CPUsPerNode json.RawMessage `json:"cpus_per_node"`
	} `json:"maximums"`
}

// limit reads a limit: none (-1) when unset, infinite, negative (22.05
// writes INFINITE as -1) or NO_VAL.
func limit(raws ...json.RawMessage) int64 {
	for _, raw := range raws {
		if n, ok := number(raw); ok {
			if n < 0 || n >= 0xfffffffe {
				return -1
			}
			return n
		}
	}
	return -1
}

func (rp *restPartition) load() partLoad {
	p := newPartLoad(rp.Name)
	p.isDefault = containsFold(rp.Flags, "default")
	p.state = strings.ToUpper(rp.State)
	if len(rp.Partition.State) > 0 {
		p.state = strings.ToUpper(rp.Partition.State[0])
	}
	var nodes struct {
		Total json.RawMessage `json:"total"`
	}
	if t := strings.TrimSpace(string(rp.Nodes)); strings.HasPrefix(t, "{") {
		_ = json.Unmarshal(rp.Nodes, &nodes)
	}
	p.totalCPUs = int(limit(rp.TotalCPUs, rp.CPUs.Total))
	p.totalNodes = int(limit(rp.TotalNodes, nodes.Total))
	p.maxMinutes = limit(rp.MaxTime, rp.Maximums.Time)
	p.maxNodes = int(limit(rp.MaxNodes, rp.Maximums.Nodes))
	p.maxCPUs = int(limit(rp.MaxCPUsPerNode, rp.Maximums.CPUsPerNode))
	if p.totalCPUs < 0 {
		p.totalCPUs = 0
	}
	if p.totalNodes < 0 {
		p.totalNodes = 0
	}
	return p
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// partitions is GET partitions/: every partition.
func (b *Backend) partitions(ctx context.Context) ([]partLoad, error) {
	r, err := b.get(ctx, "partitions/")
	if err != nil {
		return nil, err
	}
	var pr struct {
		Partitions *[]restPartition `json:"partitions"`
	}
	if json.Unmarshal(r.body, &pr) != nil || pr.Partitions == nil {
		return nil, unreadable(r)
	}
	out := make([]partLoad, 0, len(*pr.Partitions))
	for _, p := range *pr.Partitions {
		if p.Name != "" {
			out = append(out, p.load())
		}
	}
	return out, nil
}

// nodeInfo is a node of GET nodes/.
type nodeInfo struct {
	CPUs       json.RawMessage `json:"cpus"`
	AllocCPUs  json.RawMessage `json:"alloc_cpus"`
	State      json.RawMessage `json:"state"`       // "idle" (v0.0.38) or ["IDLE","DRAIN"]
	StateFlags []string        `json:"state_flags"` // v0.0.38's flags
	Partitions []string        `json:"partitions"`
}

// unusable are node states and flags under which a node starts no job.
var unusable = map[string]bool{"DOWN": true, "DRAIN": true, "DRAINED": true, "DRAINING": true, "FAIL": true,
	"FAILING": true, "NOT_RESPONDING": true, "MAINTENANCE": true, "INVALID": true, "ERROR": true, "FUTURE": true,
	"UNKNOWN": true, "REBOOT_REQUESTED": true, "REBOOT_ISSUED": true, "POWER_DOWN": true, "POWERING_DOWN": true}

// addTo adds the node's free CPUs (and itself, when it is idle) to the
// partitions of parts it is in. A partition's MaxCPUsPerNode caps what a
// node gives it.
func (n nodeInfo) addTo(parts []partLoad) {
	for _, s := range append(states(n.State), n.StateFlags...) {
		if unusable[strings.ToUpper(s)] {
			return
		}
	}
	cpus, _ := number(n.CPUs)
	alloc, _ := number(n.AllocCPUs)
	free := int(max(cpus-alloc, 0))
	for _, name := range n.Partitions {
		i := indexOf(parts, name)
		if i < 0 {
			continue
		}
		f := free
		if parts[i].maxCPUs > 0 {
			f = min(f, parts[i].maxCPUs)
		}
		parts[i].freeCPUs += f
		if alloc == 0 && cpus > 0 {
			parts[i].freeNodes++
		}
	}
}

// nodes is GET nodes/.
func (b *Backend) nodes(ctx context.Context) ([]nodeInfo, error) {
	r, err := b.get(ctx, "nodes/")
	if err != nil {
		return nil, err
	}
	var nr struct {
		Nodes *[]nodeInfo `json:"nodes"`
	}
	if json.Unmarshal(r.body, &nr) != nil || nr.Nodes == nil {
		return nil, unreadable(r)
	}
	return *nr.Nodes, nil
}

// unattributed: the queue has jobs and none says its partition (a
// version that left the field out would read as an empty cluster).
func unattributed(queue []queuedJob) bool {
	for _, j := range queue {
		if j.partition != "" {
			return false
		}
	}
	return len(queue) > 0
}

// queuedJob is what the probe keeps of a job of GET jobs/.
type queuedJob struct {
	state, partition string
	cpus, tasks      int
	secs             int64 // time limit (pending) or left (running), -1 unknown
}

// queueRecord is the part of a job record the probe reads.
type queueRecord struct {
	JobState        json.RawMessage `json:"job_state"`
	Partition       string          `json:"partition"`
	CPUs            json.RawMessage `json:"cpus"`
	ArrayTaskString string          `json:"array_task_string"`
	TimeLimit       json.RawMessage `json:"time_limit"` // minutes
	StartTime       json.RawMessage `json:"start_time"` // Unix seconds
}

// infiniteMinutes is Slurm's INFINITE time limit as v0.0.38 writes it
// (later versions say {"infinite": true}, which number reads as unknown).
const infiniteMinutes = 0xFFFFFFFE

// seconds is the job's time limit in seconds (pending) or its time left
// at now (running); -1 when the record gives no finite limit.
func (j *queueRecord) seconds(state string, now time.Time) int64 {
	m, ok := number(j.TimeLimit)
	if !ok || m <= 0 || m >= infiniteMinutes {
		return -1
	}
	if state != "RUNNING" {
		return m * 60
	}
	start, ok := number(j.StartTime)
	if !ok || start <= 0 {
		return m * 60
	}
	return max(m*60-(now.Unix()-start), 0)
}

// queue is GET jobs/, read as a stream (see ProbeLoad): the pending and
// running jobs.
func (b *Backend) queue(ctx context.Context) ([]queuedJob, error) {
	path := b.apiPath("jobs/")
	resp, err := b.open(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || mt != "application/json" {
		r, err := readAnswer(ctx, http.MethodGet, path, resp)
		if err != nil {
			return nil, err
		}
		if r.status == http.StatusOK {
			return nil, unreadable(r)
		}
		err = b.classify(ctx, r, "")
		if r.status >= 500 {
			err = &httpStatusError{err}
		}
		return nil, err
	}
	defer resp.Body.Close()
	body := &readErr{r: io.LimitReader(resp.Body, httpx.MaxBody)}
	out, err := decodeQueue(body)
	switch {
	case body.err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case body.err != nil:
		return nil, backends.Transient(fmt.Errorf("GET %s: reading the answer: %w", path, body.err))
	case err != nil:
		return nil, fmt.Errorf("GET %s: the answer is not the JSON slurmrestd sends (not shown)", path)
	}
	return out, nil
}

// decodeQueue reads the jobs of a GET jobs/ answer one at a time, keeping
// the pending and running ones.
func decodeQueue(r io.Reader) ([]queuedJob, error) {
	dec := json.NewDecoder(r)
	now := time.Now()
	var out []queuedJob
	listed := false
	err := forEachKey(dec, func(key string) error {
		if key != "jobs" {
			return skipValue(dec, 0)
		}
		listed = true
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return errors.New("jobs is not a list")
		}
		for dec.More() {
			var j queueRecord
			if err := dec.Decode(&j); err != nil {
				return err
			}
			st := states(j.JobState)
			if len(st) == 0 || (st[0] != "PENDING" && st[0] != "RUNNING") {
				continue
			}
			cpus, _ := number(j.CPUs)
			q := queuedJob{state: st[0], partition: j.Partition, cpus: int(cpus), tasks: 1, secs: j.seconds(st[0], now)}
			if st[0] == "PENDING" {
				q.tasks = arrayTaskCount(j.ArrayTaskString)
			}
			out = append(out, q)
		}
		_, err := dec.Token()
		return err
	})
	if err == nil && !listed {
		err = errors.New("no jobs in the answer")
	}
	return out, err
}

var _ backends.LoadProber = (*Backend)(nil)
