package ray

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// ProbeRequests is how many requests ProbeLoad sends: the dashboard's
// cluster status and its job list.
const ProbeRequests = 2

// clusterStatus is the part of GET /api/cluster_status the probe reads:
// the dashboard's envelope {"result", "msg", "data"} around the
// autoscaler's report, whose loadMetricsReport gives each resource as
// [used, total], for the cluster (usage) and per node (usageByNode).
type clusterStatus struct {
	Result *bool `json:"result"`
	Data   struct {
		ClusterStatus *struct {
			LoadMetricsReport struct {
				Usage       map[string][]float64            `json:"usage"`
				UsageByNode map[string]map[string][]float64 `json:"usageByNode"`
			} `json:"loadMetricsReport"`
		} `json:"clusterStatus"`
	} `json:"data"`
}

// ProbeLoad reads the Ray cluster with ProbeRequests requests: GET
// /api/cluster_status (the route the dashboard's own overview reads; not
// part of the Jobs REST API) for CPUs used and total, overall and per
// node, and GET /api/jobs/ for the jobs pending and running. The job does
// not fit when its entrypoint asks for more CPUs, GPUs, memory or custom
// resources than the whole cluster has now (an autoscaling cluster's
// possible growth is not read). A dashboard without the route (404) can
// say only that it answers: the counts are unknown. Ray has no queues:
// Queue is empty. Both requests are the cluster's measure (MeasureLoad,
// the same for every job): ProbeLoad is LoadFrom of a fresh one.
func (b *Backend) ProbeLoad(ctx context.Context, job backends.Job, _ *backends.Array) (backends.Load, error) {
	p, err := parseProperties(job.Properties)
	if err != nil {
		return backends.Load{}, err
	}
	m, err := b.measure(ctx)
	if err != nil {
		return backends.Load{}, err
	}
	return judgeCluster(m, p), nil
}

// clusterMeasure is the cluster's load before any job is judged: what a
// cluster's agent measures once for every step (MeasureLoad).
type clusterMeasure struct {
	Format int `json:"f"`
	// Known: the dashboard has the cluster status route; Usage is its
	// [used, total] by resource, Nodes and FreeNodes its nodes (free:
	// none of its CPUs used).
	Known     bool                 `json:"k,omitempty"`
	Usage     map[string][]float64 `json:"u,omitempty"`
	Nodes     int                  `json:"n"`
	FreeNodes int                  `json:"fn"`
	Pending   int                  `json:"p"`
	Running   int                  `json:"r"`
}

// measureFormat names the published measure's format: a measure of any
// other is not read (the step probes for itself).
const measureFormat = 1

// measure reads the cluster's status and its jobs, whatever the job.
func (b *Backend) measure(ctx context.Context) (clusterMeasure, error) {
	usage, perNode, known, err := b.clusterUsage(ctx)
	if err != nil {
		return clusterMeasure{}, err
	}
	pending, running, err := b.jobCounts(ctx)
	if err != nil {
		return clusterMeasure{}, err
	}
	m := clusterMeasure{Format: measureFormat, Known: known, Pending: pending, Running: running}
	if known {
		m.Usage, m.Nodes = map[string][]float64{}, len(perNode)
		for name, v := range usage {
			if resourceName.MatchString(name) && len(v) == 2 {
				m.Usage[name] = v
			}
		}
		for _, res := range perNode {
			if u, t := pair(res, "CPU"); u == 0 && t > 0 {
				m.FreeNodes++
			}
		}
	}
	return m, nil
}

// resourceName is what a resource's name may be to be kept in the
// measure (CPU, GPU, memory, node:10.0.0.1, accelerator_type:A100, a
// custom one): no other text of the server's is published. A job asking
// for a resource of another name finds the cluster without it.
var resourceName = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,64}$`)

// judgeCluster is the Load of a job of properties p in the cluster m.
func judgeCluster(m clusterMeasure, p Properties) backends.Load {
	load := backends.UnknownLoad("")
	if m.Known {
		load = usageLoad(m, p)
	}
	load.PendingJobs, load.RunningJobs = m.Pending, m.Running
	if p.EntrypointNumCPUs != nil {
		load.JobCPUs = int(*p.EntrypointNumCPUs + 0.999)
	} else {
		load.JobCPUs = 0 // Ray's default: an entrypoint reserves no CPU
	}
	return load
}

// MeasureLoad implements backends.LoadPublisher: ProbeLoad's two
// requests, as one line of JSON (figures and the cluster's resource
// names only).
func (b *Backend) MeasureLoad(ctx context.Context) (string, error) {
	m, err := b.measure(ctx)
	if err != nil {
		return "", err
	}
	return backends.EncodeMeasure(m, fmt.Sprintf("%d resources", len(m.Usage)))
}

// LoadFrom implements backends.LoadPublisher.
func (b *Backend) LoadFrom(measure string, job backends.Job, _ *backends.Array) (backends.Load, error) {
	var m clusterMeasure
	if json.Unmarshal([]byte(measure), &m) != nil || m.Format != measureFormat {
		return backends.Load{}, backends.ErrMeasureFormat
	}
	p, err := parseProperties(job.Properties)
	if err != nil {
		return backends.Load{}, err
	}
	return judgeCluster(m, p), nil
}

var _ backends.LoadPublisher = (*Backend)(nil)

// usageLoad turns the cluster's [used, total] resources into a Load.
func usageLoad(m clusterMeasure, p Properties) backends.Load {
	load := backends.UnknownLoad("")
	used, total := pair(m.Usage, "CPU")
	load.TotalCPUs, load.FreeCPUs = int(total), int(total-used)
	load.TotalNodes, load.FreeNodes = m.Nodes, m.FreeNodes
	want := map[string]float64{}
	for k, v := range p.EntrypointResources {
		want[k] = v
	}
	if p.EntrypointNumCPUs != nil {
		want["CPU"] = *p.EntrypointNumCPUs
	}
	if p.EntrypointNumGPUs != nil {
		want["GPU"] = *p.EntrypointNumGPUs
	}
	if p.EntrypointMemory != nil {
		want["memory"] = float64(*p.EntrypointMemory)
	}
	for _, k := range sortedKeys(want) {
		if _, t := pair(m.Usage, k); want[k] > t {
			load.Fits = false
			load.Why = fmt.Sprintf("the entrypoint asks for %g %s and the whole cluster has %g", want[k], k, t)
			break
		}
	}
	return load
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// pair reads a resource's [used, total]; a resource the cluster does not
// have is 0 of 0.
func pair(res map[string][]float64, name string) (used, total float64) {
	v := res[name]
	if len(v) != 2 {
		return 0, 0
	}
	return v[0], v[1]
}

// clusterUsage sends GET /api/cluster_status: one request. known is false
// when the dashboard has no such route.
func (b *Backend) clusterUsage(ctx context.Context) (map[string][]float64, map[string]map[string][]float64, bool, error) {
	resp, err := b.do(ctx, http.MethodGet, "/api/cluster_status", nil)
	if err != nil {
		return nil, nil, false, err
	}
	switch {
	case resp.status == http.StatusNotFound:
		return nil, nil, false, nil
	case resp.status != http.StatusOK:
		return nil, nil, false, b.probeError(resp, "reading the ray cluster's status")
	}
	var cs clusterStatus
	if err := json.Unmarshal(resp.body, &cs); err != nil || cs.Result == nil || cs.Data.ClusterStatus == nil {
		return nil, nil, false, backends.Transient(fmt.Errorf("reading the ray cluster's status: HTTP 200 with an answer that is not the dashboard's cluster status (%d bytes, %s)", len(resp.body), httpx.NotShown))
	}
	if !*cs.Result {
		return nil, nil, false, backends.Transient(fmt.Errorf("reading the ray cluster's status: the dashboard answered result=false (its autoscaler report is not ready)"))
	}
	r := cs.Data.ClusterStatus.LoadMetricsReport
	return r.Usage, r.UsageByNode, true, nil
}

// jobCounts sends GET /api/jobs/ (one request) and counts the jobs
// PENDING and RUNNING, drivers started with ray.init among them: they use
// the cluster as much as submitted jobs.
func (b *Backend) jobCounts(ctx context.Context) (pending, running int, err error) {
	resp, err := b.do(ctx, http.MethodGet, "/api/jobs/", nil)
	if err != nil {
		return 0, 0, err
	}
	if resp.status != http.StatusOK {
		return 0, 0, b.probeError(resp, "listing ray jobs")
	}
	list, err := parseJobList(resp.body)
	if err != nil {
		return 0, 0, err
	}
	for _, d := range list {
		switch {
		case d == nil:
		case d.Status == rayPending:
			pending++
		case d.Status == rayRunning:
			running++
		}
	}
	return pending, running, nil
}

// probeError names a failed probe answer by its status alone: the
// dashboard's failures are free text, which a probe's reason never
// quotes. Authentication keeps statusError's wording (it names the
// credential, never the server's words); 5xx and 429 are transient.
func (b *Backend) probeError(r *response, what string) error {
	if httpx.IsAuth(r.status) {
		return b.statusError(r, what)
	}
	err := fmt.Errorf("%s: the Ray dashboard answered HTTP %d (%s)", what, r.status, httpx.NotShown)
	if r.status == http.StatusTooManyRequests || r.status >= 500 {
		return httpx.WithRetryAfter(backends.Transient(err), r.retryAfter)
	}
	return err
}
