package backends

import (
	"context"
	"errors"
	"time"
)

// ErrNoAccounting: the system keeps no accounting that Usage could read
// (Slurm without slurmdbd). Asking again does not help.
var ErrNoAccounting = errors.New("the cluster keeps no accounting")

// Usage is what an ended job used against what it was given, as the
// system's own accounting says (Slurm's slurmdbd or sacct, HTCondor's job
// ad or history). For an array, every task's record is folded into one:
// CPU time and core-seconds are summed, peak memory and elapsed are the
// largest task's, and Tasks counts them. A figure the system did not gather
// is zero (Slurm with jobacct_gather/none records no CPU time or memory):
// zero means unknown, never "used nothing".
type Usage struct {
	Tasks int // records folded (an array's tasks), 1 for a plain job
	// CPUSeconds is the user plus system CPU time the job used.
	CPUSeconds float64
	// CPUs is the CPUs allocated to one task.
	CPUs int
	// CoreSeconds is CPUs × elapsed, summed over the tasks: what
	// CPUSeconds is measured against.
	CoreSeconds float64
	// Elapsed is the longest task's run time.
	Elapsed time.Duration
	// TimeLimit is the job's time limit; 0 when it has none.
	TimeLimit time.Duration
	// MaxRSSBytes is the peak resident memory of the largest task.
	MaxRSSBytes int64
	// ReqMemBytes is the memory requested for one task; 0 when none was.
	ReqMemBytes int64
	// Submit and Start are the earliest task's, for the queue wait.
	Submit, Start time.Time
}

// Accountant is implemented by backends that can read an ended job's usage
// from the system's accounting. Accounting may lag the job's end (slurmdbd
// writes asynchronously, HTCondor moves a job to its history when it
// leaves the queue): Usage returns an error wrapping ErrNotFound while the
// accounting does not know the ended job yet, and the runner asks again
// within a small ceiling. A backend asked about a job that has not ended
// returns ErrNotFound too. A system without accounting returns
// ErrNoAccounting.
type Accountant interface {
	Usage(ctx context.Context, id string) (Usage, error)
}
