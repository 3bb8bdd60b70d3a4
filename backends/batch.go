package backends

import "context"

// StatusBatcher is implemented by backends that can report the states of
// many jobs in one query (Slurm's job list or state endpoint, squeue with
// a job list, condor_q with a constraint, Ray's job list). A cluster's
// watcher (package runner) calls it for every job it follows there, so
// the load on the scheduler stays flat in the number of jobs.
//
// StatusMany returns the status of each of ids the backend reported. An id
// it did not report (unknown, forgotten, or beyond what one query covers)
// is left out of the map: that is not an error, the job's own invoke asks
// Status for it. A status may be a summary: State and Raw are what Status
// says, but where the query cannot tell (Slurm's jobs/state/ says PENDING
// of a held job, which Status calls SUSPENDED) and the rest may be
// missing; whoever acts on a change asks Status, so a coarse state costs a
// request, never a wrong record. One call costs a small number of requests that does not grow
// with len(ids) (a backend may split very long lists into a few), and an
// error wraps ErrTransient when a retry may do better.
type StatusBatcher interface {
	StatusMany(ctx context.Context, ids []string) (map[string]Status, error)
}

// BatchCoster is a StatusBatcher whose StatusMany splits a long list of
// ids into several requests (a request line or command line holds only so
// many): StatusManyRequests says how many one call for n ids sends, so
// that the watcher spaces its rounds by requests, not by calls, within the
// cluster's budget (500 jobs on Slurm 24.11 made three GET jobs/state/ a
// round: 1.5 requests a second against the budget of one).
type BatchCoster interface {
	StatusManyRequests(n int) int
}

// BatchRequests is how many requests a StatusMany of n ids by b sends: as
// b says, else one.
func BatchRequests(b StatusBatcher, n int) int {
	if c, ok := b.(BatchCoster); ok {
		return max(c.StatusManyRequests(n), 1)
	}
	return 1
}

// Chunks is how many lists of at most per items n items make.
func Chunks(n, per int) int {
	return (n + per - 1) / per
}
