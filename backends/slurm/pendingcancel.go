package slurm

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// CancelIfPending, on Slurm, holds first, then reads, then cancels:
//
//  1. hold (priority 0): slurmctld applies it under its job write lock, the
//     same lock the scheduler takes to start a job, so from then on a job
//     that is still pending cannot start. Slurm accepts a hold on a running
//     job too (it does nothing to it), so the hold alone says nothing.
//  2. read the job: PENDING (no flag such as REQUEUED, which would mean it
//     ran before) proves it never started and, held, never will; anything
//     else means it started: release the hold and leave it.
//  3. cancel it, and read it again: CANCELLED confirms it.
//
// Why not the filters that look atomic: scancel --state=PENDING filters on
// the client in 22.05 (a read, then a kill: the job can start between), and
// the REST DELETE jobs/ with a job_state filter exists only from v0.0.40
// (not on 22.05's v0.0.38). Hold-then-read works the same on every version,
// over REST and over SSH. A crash or a failure after the hold leaves the job
// held (it never starts while held): the caller asks again (this function is
// idempotent) or we release it here when we give up.
type holdCanceller interface {
	hold(ctx context.Context, id string, on bool) error
	Status(ctx context.Context, id string) (backends.Status, error)
	Cancel(ctx context.Context, id string) error
}

func cancelIfPending(ctx context.Context, h holdCanceller, id string) (backends.PendingCancel, error) {
	st, err := h.Status(ctx, id)
	if err != nil {
		return backends.PendingCancel{}, err
	}
	if cancelledPending(st) { // asked again after a confirmed cancel
		return confirmed(id, st), nil
	}
	if !waiting(st) {
		return startedAnswer(id, st), nil
	}
	if err := h.hold(ctx, id, true); err != nil {
		// The hold may have landed with its answer lost: lift it.
		return backends.PendingCancel{}, releaseAfter(ctx, h, id, fmt.Errorf("holding Slurm job %s: %w", id, err))
	}
	st, err = h.Status(ctx, id)
	if err != nil {
		return backends.PendingCancel{}, releaseAfter(ctx, h, id, fmt.Errorf("reading held Slurm job %s: %w", id, err))
	}
	if !waiting(st) {
		return startedAnswer(id, st), releaseAfter(ctx, h, id, nil)
	}
	held := st
	if err := h.Cancel(ctx, id); err != nil {
		return backends.PendingCancel{}, releaseAfter(ctx, h, id, fmt.Errorf("cancelling held Slurm job %s: %w", id, err))
	}
	st, err = h.Status(ctx, id)
	if err != nil {
		return backends.PendingCancel{}, fmt.Errorf("reading cancelled Slurm job %s: %w", id, err)
	}
	if !cancelledPending(st) {
		return backends.PendingCancel{}, fmt.Errorf("Slurm job %s: cancelled while held PENDING, but it reads %s", id, st.Raw)
	}
	pc := confirmed(id, st)
	pc.Evidence = fmt.Sprintf("Slurm job %s was held PENDING (%s), then %s", id, held.Reason, pc.Evidence)
	return pc, nil
}

// waiting: the base state PENDING and no flag (REQUEUED, for one, would mean
// it ran before). Held, it maps to SUSPENDED in the state table, so the raw
// state is what counts.
func waiting(st backends.Status) bool { return st.Raw == "PENDING" }

// cancelledPending: CANCELLED with no exit status of a run (scancel of a
// running job leaves signal 15; of a pending one, 0:0) and no time run
// (slurmctld sets a pending job's start time to its end time when it is
// cancelled).
func cancelledPending(st backends.Status) bool {
	return st.Raw == "CANCELLED" && (st.ExitCode == nil || *st.ExitCode == 0) &&
		(st.StartTime.IsZero() || !st.StartTime.Before(st.EndTime))
}

func confirmed(id string, st backends.Status) backends.PendingCancel {
	return backends.PendingCancel{Cancelled: true, Last: st, Evidence: fmt.Sprintf("Slurm job %s is CANCELLED, never run", id)}
}

func startedAnswer(id string, st backends.Status) backends.PendingCancel {
	return backends.PendingCancel{Last: st, Evidence: fmt.Sprintf("Slurm job %s is %s: it started, left alone", id, st.Raw)}
}

// releaseAfter lifts our hold (best effort, so that a job we do not move
// can start) and returns err.
func releaseAfter(ctx context.Context, h holdCanceller, id string, err error) error {
	if rerr := h.hold(ctx, id, false); rerr != nil && err == nil {
		return fmt.Errorf("releasing Slurm job %s: %w", id, rerr)
	}
	return err
}

// CancelIfPending: see cancelIfPending.
func (b *Backend) CancelIfPending(ctx context.Context, id string) (backends.PendingCancel, error) {
	return cancelIfPending(ctx, b, id)
}

// hold is POST job/{id} with {"hold":true|false}: the field every version's
// job update takes (priority 0 is refused by v0.0.38's parser).
func (b *Backend) hold(ctx context.Context, id string, on bool) error {
	if !validID(id) {
		return fmt.Errorf("Slurm job id %q is not a number: %w", id, backends.ErrNotFound)
	}
	if _, err := b.version(ctx); err != nil {
		return err
	}
	r, err := b.do(ctx, http.MethodPost, b.apiPath("job/"+id), map[string]any{"hold": on})
	if err != nil {
		return err
	}
	if r.status != http.StatusOK || len(r.env.Errors) > 0 {
		if r.status == http.StatusOK {
			return fmt.Errorf("%s %s: %s", r.method, r.path, r.errorText())
		}
		return b.classify(ctx, r, "")
	}
	return nil
}

// CancelIfPending: see cancelIfPending.
func (b *SSHBackend) CancelIfPending(ctx context.Context, id string) (backends.PendingCancel, error) {
	return cancelIfPending(ctx, b, id)
}

// hold runs scontrol hold|release.
func (b *SSHBackend) hold(ctx context.Context, id string, on bool) error {
	if !slurmID().MatchString(id) {
		return fmt.Errorf("%q is not a Slurm job id: %w", id, backends.ErrNotFound)
	}
	verb := "release"
	if on {
		verb = "hold"
	}
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"scontrol", verb, id}})
	if err != nil {
		return err
	}
	if res.ExitCode == 0 {
		return nil
	}
	text := slurmCLI.Said("scontrol", res)
	if res.Says(slurmCLI.Unreachable...) {
		return backends.Transient(fmt.Errorf("scontrol %s %s: %s", verb, id, text))
	}
	return fmt.Errorf("scontrol %s %s (exit %d): %s", verb, id, res.ExitCode, strings.TrimSpace(text))
}
