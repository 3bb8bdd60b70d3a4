package backends

import "context"

// PendingCanceller is implemented by backends that can cancel a job only if
// it has not started, with the scheduler's own word for it. Re-placement
// (runner/replace.go) moves a job that waits too long only on a confirmed
// Cancelled; anything else leaves the job where it is.
type PendingCanceller interface {
	// CancelIfPending ends the job only if it has never started, and says
	// what the backend saw. It is idempotent: asking again about a job
	// cancelled this way confirms it again.
	//
	// Cancelled true: the backend confirmed the job never started (never
	// RUNNING, no exit code) and is now cancelled. Cancelled false with a
	// nil error: the job had started (or ended) and was left alone. An
	// error: the outcome is unknown (backend dark, timeout, ambiguous); the
	// job may still be pending and the caller must ask again later, never
	// assume either answer.
	CancelIfPending(ctx context.Context, id string) (PendingCancel, error)
}

// PendingCancel is a CancelIfPending answer.
type PendingCancel struct {
	Cancelled bool
	// Evidence is the backend's own words for the answer (states and
	// reasons it reported), for the record and the log; no server text
	// beyond parsed fields.
	Evidence string
	// Last is the job's status as last read.
	Last Status
}
