package backends

import (
	"maps"
	"sync"
)

// CommandCounts counts what a backend asked the remote system over SSH
// (sbatch, condor_q, an SFTP read of the job's output), by kind, as the
// runner's HTTP client counts requests by their answer's class: the
// record's request counts and the operator's metrics carry both. A nil
// *CommandCounts counts nothing.
type CommandCounts struct {
	mu sync.Mutex
	n  map[string]int64
}

// The kinds CommandCounts counts: KindError is a command or transfer that
// got no outcome (no connection, a lost one, a timeout).
const (
	KindSubmit = "submit"
	KindStatus = "status"
	KindCancel = "cancel"
	KindProbe  = "probe"
	KindLog    = "log"
	KindStage  = "stage"
	KindOther  = "other"
	KindError  = "error"
)

// commandKinds are the commands the CLI backends run, by kind; any other
// command (mkdir, a shell) is KindOther.
var commandKinds = map[string]string{
	"sbatch": KindSubmit, "condor_submit": KindSubmit,
	"scontrol": KindStatus, "squeue": KindStatus, "sacct": KindStatus, "condor_q": KindStatus, "condor_history": KindStatus,
	"scancel": KindCancel, "condor_rm": KindCancel,
	"sinfo": KindProbe, "condor_status": KindProbe,
}

// CommandKind is the kind of a command line: that of the first word of
// argv that names a command above (Slurm's sbatch runs behind a small
// "sh -c ... exec" that sources the job's variables).
func CommandKind(argv []string) string {
	for _, a := range argv {
		if k, ok := commandKinds[a]; ok {
			return k
		}
	}
	return KindOther
}

// Add counts one of kind.
func (c *CommandCounts) Add(kind string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[kind]++
}

// Counts returns a copy of the counts by kind.
func (c *CommandCounts) Counts() map[string]int64 {
	if c == nil {
		return map[string]int64{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}
