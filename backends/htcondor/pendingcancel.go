package htcondor

import (
	"context"
	"fmt"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// JobStatus values CancelIfPending reads (statusNames has them all).
const (
	statusIdle    = 1
	statusRemoved = 3
)

// CancelIfPending removes the job only if it never started, with one
// condor_rm whose constraint says so: the schedd evaluates the constraint
// and marks the job removed in one step of its own (it alone starts jobs,
// through a shadow it spawns for a job it has marked running), so a job
// that is idle and never started when condor_rm reaches it cannot start
// after. Then the job's ad confirms it: REMOVED, without a start date.
// An idle job that ran before (evicted, requeued) has a JobStartDate and
// does not match: it is left alone.
func (b *Backend) CancelIfPending(ctx context.Context, id string) (backends.PendingCancel, error) {
	if !jobID().MatchString(id) {
		return backends.PendingCancel{}, fmt.Errorf("%q is not an HTCondor job id (CLUSTER.PROC): %w", id, backends.ErrNotFound)
	}
	cluster, proc, _ := strings.Cut(id, ".")
	constraint := fmt.Sprintf("ClusterId == %s && ProcId == %s && JobStatus == 1 && isUndefined(JobStartDate)", cluster, proc)
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"condor_rm", "-constraint", constraint}})
	if err != nil {
		return backends.PendingCancel{}, err
	}
	if res.ExitCode != 0 && !res.Says("Couldn't find/remove all jobs") {
		return backends.PendingCancel{}, backends.Transient(fmt.Errorf("condor_rm -constraint (job %s, exit %d): %s", id, res.ExitCode, condor.Said("condor_rm", res)))
	}
	ad, err := b.find(ctx, id)
	if err != nil {
		return backends.PendingCancel{}, err
	}
	if ad == nil {
		return backends.PendingCancel{}, fmt.Errorf("HTCondor job %s is neither in condor_q nor in condor_history: %w", id, backends.ErrNotFound)
	}
	st := ad.status()
	switch {
	case ad.JobStatus == statusRemoved && ad.JobStartDate == 0:
		return backends.PendingCancel{Cancelled: true, Last: st, Evidence: fmt.Sprintf("HTCondor job %s was removed while idle, never started (no JobStartDate)", id)}, nil
	case ad.JobStatus == statusIdle && ad.JobStartDate == 0:
		// Idle and never started, yet not removed: no answer we can trust.
		return backends.PendingCancel{}, fmt.Errorf("HTCondor job %s is still idle after condor_rm -constraint", id)
	}
	return backends.PendingCancel{Last: st, Evidence: fmt.Sprintf("HTCondor job %s is %s: it started or is held, left alone", id, st.Raw)}, nil
}
