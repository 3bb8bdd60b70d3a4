package htcondor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// adUsage is what a job used and asked for, from its ad's documented
// attributes: RemoteUserCpu and RemoteSysCpu (seconds of CPU, all runs),
// RemoteWallClockTime (seconds of wall time, all runs), ResidentSetSize
// (peak KiB), RequestCpus and RequestMemory (MiB). A pool whose starter
// reports no rusage leaves RemoteUserCpu 0 (the test pools, 23.9 and 25,
// do): then CpusUsage (the cores the job kept busy on average) times the
// wall time stands for the CPU time. An attribute that is an expression
// rather than a number (RequestMemory's default is one) reads as unknown.
type adUsage struct {
	RemoteUserCpu       json.RawMessage `json:"RemoteUserCpu"`
	RemoteSysCpu        json.RawMessage `json:"RemoteSysCpu"`
	CpusUsage           json.RawMessage `json:"CpusUsage"`
	RemoteWallClockTime json.RawMessage `json:"RemoteWallClockTime"`
	ResidentSetSize     json.RawMessage `json:"ResidentSetSize"`
	RequestCpus         json.RawMessage `json:"RequestCpus"`
	RequestMemory       json.RawMessage `json:"RequestMemory"`
}

const usageAttributes = "RemoteUserCpu,RemoteSysCpu,CpusUsage,RemoteWallClockTime,ResidentSetSize,RequestCpus,RequestMemory"

// adNumber reads a numeric attribute; anything else is 0.
func adNumber(raw json.RawMessage) float64 {
	var f float64
	if json.Unmarshal(raw, &f) != nil || f < 0 {
		return 0
	}
	return f
}

// Usage reads the ad of the job (every task's for an array's cluster id)
// from the queue, where a completed or removed job may linger, and the
// history: two remote commands. HTCondor has no time limit of its own: TimeLimit stays 0.
func (b *Backend) Usage(ctx context.Context, id string) (backends.Usage, error) {
	if !jobID().MatchString(id) && !clusterID().MatchString(id) {
		return backends.Usage{}, fmt.Errorf("%q is not an HTCondor job id: %w", id, backends.ErrNotFound)
	}
	queued, err := b.query(ctx, false, 0, id)
	if err != nil {
		return backends.Usage{}, err
	}
	limit := 0 // an array's whole history
	if jobID().MatchString(id) {
		limit = 1
	}
	ended, err := b.query(ctx, true, limit, id)
	if err != nil {
		return backends.Usage{}, err
	}
	var u backends.Usage
	seen := map[string]bool{}
	for _, ad := range append(queued, ended...) { // a job leaving the queue between the two is in both
		if seen[ad.id()] {
			continue
		}
		seen[ad.id()] = true
		if ad.JobStatus != 3 && ad.JobStatus != 4 { // neither removed nor completed
			return backends.Usage{}, fmt.Errorf("HTCondor job %s is not over yet: %w", ad.id(), backends.ErrNotFound)
		}
		ad.addUsage(&u)
	}
	if u.Tasks == 0 {
		return backends.Usage{}, fmt.Errorf("HTCondor knows no job %s (yet): %w", id, backends.ErrNotFound)
	}
	return u, nil
}

// addUsage folds the ad into u (see backends.Usage).
func (a *jobAd) addUsage(u *backends.Usage) {
	cpus := int(adNumber(a.RequestCpus))
	wall := adNumber(a.RemoteWallClockTime)
	u.Tasks++
	u.CPUs = max(u.CPUs, cpus)
	cpu := adNumber(a.RemoteUserCpu) + adNumber(a.RemoteSysCpu)
	if cpu == 0 {
		cpu = adNumber(a.CpusUsage) * wall
	}
	u.CPUSeconds += cpu
	u.CoreSeconds += float64(cpus) * wall
	u.Elapsed = max(u.Elapsed, time.Duration(wall*float64(time.Second)))
	u.MaxRSSBytes = max(u.MaxRSSBytes, int64(adNumber(a.ResidentSetSize))<<10)
	u.ReqMemBytes = max(u.ReqMemBytes, int64(adNumber(a.RequestMemory))<<20)
	if q := epoch(a.QDate); !q.IsZero() && (u.Submit.IsZero() || q.Before(u.Submit)) {
		u.Submit = q
	}
	if s := epoch(a.JobCurrentStartDate); !s.IsZero() && (u.Start.IsZero() || s.Before(u.Start)) {
		u.Start = s
	}
}
