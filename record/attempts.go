package record

// The keys and the invoke setting of attempts (see runner's attempts.go): a
// retry of a step whose job failed may submit a new attempt under the same
// record.
const (
	// KeyAttempt is the current attempt's number; absent means 1.
	KeyAttempt = "status.attempt"
	// KeyAttempts lists the earlier attempts, one per line, oldest first:
	// "<n> <id> <state> <category> <backend state> <end time>" ("-" for
	// an empty field).
	KeyAttempts = "status.attempts"
	// MaxAttemptHistory bounds KeyAttempts: older lines are dropped (the
	// attempt number still counts them).
	MaxAttemptHistory = 10
)

// Resubmit policies (the --resubmit invoke setting).
const (
	ResubmitInfrastructure = "infrastructure" // after an infrastructure failure only (exit 5)
	ResubmitFailed         = "failed"         // after any FAILED end (exit 1 or 5)
	ResubmitNever          = "never"          // never: a retry re-attaches to the ended job
)

// Resubmit is the invoke setting that says when a retry of the step
// submits a new attempt.
var Resubmit = Input{
	Flag:    "resubmit",
	Default: ResubmitInfrastructure,
	Type:    TypeString,
	Help: "when invoke, run again on a record whose job ended (a workflow's retry of the step), submits a new attempt " +
		"under the same record instead of re-attaching: infrastructure (after an infrastructure failure, exit 5), " +
		"failed (after any FAILED end), or never",
}
