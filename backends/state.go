package backends

// State is one of the seven job states of the bridge-runner contract. Every
// backend maps its own states onto these, and keeps its raw state beside it.
type State string

const (
	Pending   State = "PENDING"
	Running   State = "RUNNING"
	Suspended State = "SUSPENDED"
	Done      State = "DONE"
	Failed    State = "FAILED"
	Killed    State = "KILLED"
	Unknown   State = "UNKNOWN"
)

// States lists the seven states in contract order.
var States = []State{Pending, Running, Suspended, Done, Failed, Killed, Unknown}

// Final reports whether no further change is expected: DONE, FAILED, KILLED and
// UNKNOWN (we lost track of the job and will not find it again).
func (s State) Final() bool {
	switch s {
	case Done, Failed, Killed, Unknown:
		return true
	}
	return false
}

// Valid reports whether s is one of the seven contract states.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Category says whose doing a FAILED or KILLED outcome was, so that a
// workflow can retry what a retry can mend (the infrastructure's failures)
// and nothing else. It is empty for every other state.
type Category string

const (
	// CategoryJob: the job itself failed (non-zero exit, out of memory, a
	// bad script): running it again as it is fails again.
	CategoryJob Category = "job"
	// CategoryInfrastructure: the system failed the job (node failure,
	// preemption, boot failure, a lost host or Ray node): running it again
	// elsewhere or later may succeed.
	CategoryInfrastructure Category = "infrastructure"
	// CategoryTimeout: the job reached a time limit (its own or a
	// deadline): it needs more time, not a retry as it is.
	CategoryTimeout Category = "timeout"
	// CategoryCancelled: someone cancelled it (kill flag, SIGTERM, an
	// administrator, a user on the remote system).
	CategoryCancelled Category = "cancelled"
)

// Categories lists the four categories.
var Categories = []Category{CategoryJob, CategoryInfrastructure, CategoryTimeout, CategoryCancelled}

// FailureCategory returns the category of st: the backend's own when it set
// one, else what the state implies (FAILED: the job's; KILLED: cancelled).
// It is empty unless st is FAILED or KILLED.
func (st Status) FailureCategory() Category {
	switch st.State {
	case Failed:
		if st.Category != "" && st.Category != CategoryCancelled {
			return st.Category
		}
		return CategoryJob
	case Killed:
		if st.Category != "" && st.Category != CategoryJob {
			return st.Category
		}
		return CategoryCancelled
	}
	return ""
}
