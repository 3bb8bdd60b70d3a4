package backends

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// LoadProber is implemented by backends that can say, before a job is
// submitted, how busy the place it would run is (a Slurm partition, an LSF
// queue, an HTCondor pool, a Ray cluster, a quantum backend) and whether the
// job fits there at all. Placement (package runner) probes every target a
// job names and submits to one of them; it is designed with StatusBatcher
// and ArraySubmitter, and like them it is optional: a backend without it
// is placed by the order of the targets alone.
//
// ProbeLoad looks at the place job would go (job.Properties names the
// partition or queue the way Submit reads it; array is non-nil for an
// array) with a small, fixed number of read-only requests. It never
// submits. An error wrapping ErrTransient means the target did not answer
// (placement skips it and says why); any other error is a target that
// cannot take the job as given (ErrInvalid: a partition that does not
// exist).
type LoadProber interface {
	ProbeLoad(ctx context.Context, job Job, array *Array) (Load, error)
}

// Load is one target's load as a probe saw it. Counts are what the
// scheduler reports for the partition or queue the job would use; -1 is
// unknown. Placement policies read only these fields, so the same Load
// always gives the same choice.
type Load struct {
	// Fits is false when the job cannot run there as given (more CPUs or
	// nodes than the partition has, a time limit over its maximum, a
	// partition that is down); Why then says why in the probe's own words
	// (never a server's text).
	Fits bool
	Why  string
	// Queue is the partition or queue probed (the default one resolved).
	Queue string

	FreeCPUs, TotalCPUs   int
	FreeNodes, TotalNodes int
	// PendingJobs and RunningJobs are the jobs waiting and running there.
	PendingJobs, RunningJobs int
	// PendingCPUs is what the pending jobs ask for together, where known.
	PendingCPUs int
	// PendingCPUSeconds and RunningCPUSeconds are the work ahead of the
	// job, as the scheduler reports it: each pending job's CPUs times its
	// time limit, each running job's CPUs times its time left (a job
	// without a limit counts the queue's longest). Only when
	// CPUSecondsKnown: a probe that cannot tell leaves them out, and
	// placement then compares jobs and CPUs.
	PendingCPUSeconds, RunningCPUSeconds int64
	CPUSecondsKnown                      bool
	// JobCPUSeconds is this job's own work: its CPUs times its time limit
	// (every task of an array); 0 when the probe cannot tell.
	JobCPUSeconds int64
	// JobCPUs is what this job asks for (every task of an array together,
	// up to its parallel limit), as the backend reads its properties.
	JobCPUs int
	// EstimatedStart is the scheduler's own estimate of when the job would
	// start (sbatch --test-only), zero when it gave none.
	EstimatedStart time.Time
}

// UnknownLoad is a Load with every count unknown and the job fitting: what
// a backend reports when it can tell only that the target answers.
func UnknownLoad(queue string) Load {
	return Load{Fits: true, Queue: queue, FreeCPUs: -1, TotalCPUs: -1, FreeNodes: -1, TotalNodes: -1,
		PendingJobs: -1, RunningJobs: -1, PendingCPUs: -1, JobCPUs: -1}
}

// LoadPublisher is implemented by LoadProbers whose probe splits in two:
// what does not depend on the job (the cluster's partitions or queues,
// their nodes and their queue), measured once for every step by the
// cluster's agent, which publishes it sealed in its heartbeat; and the
// judgement of one job against it, which a step makes without a request.
// ProbeLoad must equal LoadFrom of a fresh MeasureLoad, but for what only
// a question about the job itself can tell (Slurm over SSH asks sbatch
// --test-only for EstimatedStart): LoadFrom leaves that out (zero), so
// that a step reading a published load sends nothing.
//
// Every backend with a ProbeLoad is a LoadPublisher, or is listed with the
// reason in backends' TestEveryProberPublishes.
type LoadPublisher interface {
	LoadProber
	// MeasureLoad reads the cluster's load with the probe's requests and
	// returns it as a small single-line text (the backend's own format: no
	// newline, at most MaxLoadMeasure bytes, parsed figures and names
	// only, never a server's text). Its errors are ProbeLoad's.
	MeasureLoad(ctx context.Context) (string, error)
	// LoadFrom judges job (and array, as ProbeLoad takes them) against
	// a measure MeasureLoad returned, sending nothing. A measure it cannot
	// read (another release's format) is an error not wrapping ErrInvalid
	// or ErrTransient: the caller then probes.
	LoadFrom(measure string, job Job, array *Array) (Load, error)
}

// MaxLoadMeasure bounds a published measure: it rides in the agent's
// heartbeat ConfigMap (of 1 MiB at most) beside the memo; a cluster whose
// measure is larger is not published, and its steps probe for themselves.
const MaxLoadMeasure = 64 << 10

// EncodeMeasure is measure m as published: one line of JSON, refused past
// MaxLoadMeasure (parts says what it counts, for the error: "12
// partitions"), so that each backend's MeasureLoad keeps the same bound.
func EncodeMeasure(m any, parts string) (string, error) {
	out, err := json.Marshal(m)
	if err == nil && len(out) > MaxLoadMeasure {
		return "", fmt.Errorf("the cluster's load is %d bytes as published, over %d (%s): steps probe for themselves", len(out), MaxLoadMeasure, parts)
	}
	return string(out), err
}

// ErrMeasureFormat is what LoadFrom returns for a published measure this
// release cannot read (another release's format): the caller probes.
var ErrMeasureFormat = errors.New("the published load is not in a format this release reads")
