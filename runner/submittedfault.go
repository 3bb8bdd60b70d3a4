package runner

import (
	"errors"
	"fmt"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// SubmittedFault is a permanent fault (one that refuses a step's input or
// configuration: backends.ErrInvalid) that came once the step's job was on
// the cluster: a credentials file gone or unreadable mid-job, a server's
// certificate no longer trusted, a Role that lost a verb. The contract's
// exit 2 says "nothing was submitted", which is then untrue: the job goes
// on, its id is in the record (or found by its key), and a retry of the
// step, once the fault is mended, re-attaches to it. So it is a temporary
// failure (exit 75), and its message says so. It unwraps to the fault,
// whose class still names what to mend.
type SubmittedFault struct {
	ID  string // the job's id
	Err error
}

func (e *SubmittedFault) Error() string {
	return fmt.Sprintf("%v; job %s was submitted before this and goes on: mend that and retry the step (it re-attaches, never resubmits), or cancel the job with cleanup", e.Err, e.ID)
}

func (e *SubmittedFault) Unwrap() error { return e.Err }

// afterSubmit makes err a *SubmittedFault when it refuses the step's input
// but the step had its job's id (submitted or adopted: recordID, or the
// record's id re-attached to) and the job goes on, as far as the record
// knows. Left as they are: a job whose end is recorded (cancelled at its
// pendingLimit, say: the job as given does not start there, and a retry
// as it is would wait again), and a record whose id is not the job it
// submitted (FaultRecordID, an id edited by hand: there is no job of the
// record's to re-attach to).
func (r *run) afterSubmit(err error) error {
	if err == nil || r.result.ID == "" || !errors.Is(err, backends.ErrInvalid) || record.FaultClass(err) == record.FaultRecordID {
		return err
	}
	if r.rec != nil && backends.State(r.rec.Data[record.KeyJobStatus]).Final() {
		return err // the job does not go on
	}
	var sf *SubmittedFault
	if errors.As(err, &sf) {
		return err
	}
	return &SubmittedFault{ID: r.result.ID, Err: err}
}
