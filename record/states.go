package record

import (
	"slices"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Exit codes of invoke: a documented contract (Argo's
// retryStrategy.expression can retry exactly ExitTempFail). A job's final
// state gives its code through the state table; the others are faults.
const (
	ExitDone    = 0 // the job is DONE
	ExitFailed  = 1 // the job FAILED remotely
	ExitInvalid = 2 // invalid input or configuration; nothing was submitted
	ExitKilled  = 3 // the job was KILLED (kill flag, SIGTERM, cancelled remotely)
	ExitUnknown = 4 // UNKNOWN: we lost track of the job
	// ExitInfra: the job FAILED because of the infrastructure (node
	// failure, preemption, a lost host or Ray node): status.failureCategory
	// is infrastructure. Another attempt may succeed, and a retry of the
	// step submits one (see runner's attempts).
	ExitInfra    = 5
	ExitTempFail = 75 // temporary failure after retries, an evicted pod, or a DONE job's outputs unwritten; a retry re-attaches
)

// StateFacts are everything the surfaces say about one state of
// status.jobStatus: the README's states table, invoke's exit code, IBM's
// word, the BridgeJob's condition reason and how a KFP or Argo step ends.
// A state is in the contract only with all of them (TestStateTable).
type StateFacts struct {
	State   backends.State
	Final   bool   // no further change is expected
	Exit    int    // invoke's exit code when it ends with the job in this state
	IBM     string // the word IBM's Bridge Operator writes and reads for it
	Reason  string // the BridgeJob's Finished condition reason (CamelCase)
	Step    string // how a KFP or Argo step that ends so ends: Succeeded or Failed
	Meaning string // the README's words for it
}

// States is the state table, in contract order: the order of
// backends.States, of the README's table, and of a state's progress.
var States = []StateFacts{
	{backends.Pending, false, ExitTempFail, "PENDING", "Pending", StepFailed, "accepted, not running yet"},
	{backends.Running, false, ExitTempFail, "RUNNING", "Running", StepFailed, "running (Slurm `COMPLETING` is still running)"},
	{backends.Suspended, false, ExitTempFail, "SUSPENDED", "Suspended", StepFailed, "held or suspended"},
	{backends.Done, true, ExitDone, "DONE", "Done", StepSucceeded, "finished successfully"},
	{backends.Failed, true, ExitFailed, "FAILED", "Failed", StepFailed, "finished unsuccessfully (non-zero exit, time limit, node failure, out of memory, ...)"},
	{backends.Killed, true, ExitKilled, "KILL", "Killed", StepFailed, "cancelled: kill flag, SIGTERM, cleanup, or cancelled on the remote system; written only once the backend accepted the cancel request or reported the job's end (a cancel it never accepted is pending: see Cancellation)"},
	{backends.Unknown, true, ExitUnknown, "UNKNOWN", "Unknown", StepFailed, "lost track: the system no longer knows the job (never reported as DONE)"},
}

// How a KFP or Argo step ends: exit 0 succeeds, any other code fails it
// (and 75 is what a retry policy retries).
const (
	StepSucceeded = "Succeeded"
	StepFailed    = "Failed"
)

// CategoryExits are the failure categories whose exit code is not their
// state's: an infrastructure failure exits 5, so a retry policy can tell a
// failure another attempt may mend.
var CategoryExits = map[backends.Category]int{backends.CategoryInfrastructure: ExitInfra}

// Facts returns the facts of state st; ok is false for a word that is no
// state (nor IBM's word for one).
func Facts(st backends.State) (StateFacts, bool) {
	for _, f := range States {
		if f.State == st || (f.IBM == string(st) && st != "") {
			return f, true
		}
	}
	return StateFacts{}, false
}

// StateOf reads a record's state word, ours or IBM's (KILL), as ours; a
// word that is no state is returned as it is.
func StateOf(word string) backends.State {
	if f, ok := Facts(backends.State(word)); ok {
		return f.State
	}
	return backends.State(word)
}

// IBMWord is IBM's word for st (KILL for KILLED; the others are ours).
func IBMWord(st backends.State) string {
	if f, ok := Facts(st); ok {
		return f.IBM
	}
	return string(st)
}

// ExitCode is invoke's exit code for a job that it left in state st with
// failure category cat: the category's when it has one of its own, else
// the state's; a word that is no state is a temporary failure (75).
func ExitCode(st backends.State, cat backends.Category) int {
	f, ok := Facts(st)
	if !ok {
		return ExitTempFail
	}
	if code, ok := CategoryExits[cat]; ok && f.Final && f.Exit != ExitDone {
		return code
	}
	return f.Exit
}

// OutcomeExits lists the exit codes that report an outcome no second run
// of the same invoke would change (a final state other than DONE, a
// category's, invalid input), ascending: a Kubernetes Job fails at once on
// them (podFailurePolicy), while 75 is retried.
func OutcomeExits() []int {
	codes := []int{ExitInvalid}
	for _, f := range States {
		if f.Final && f.Exit != ExitDone {
			codes = append(codes, f.Exit)
		}
	}
	for _, c := range CategoryExits {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return slices.Compact(codes)
}
