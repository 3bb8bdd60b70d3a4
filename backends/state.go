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
