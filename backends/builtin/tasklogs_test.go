package builtin_test

import (
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
)

// tasksLogsOnCluster are the backends whose array tasks' logs still stay
// on the cluster (job.log lists them as "-"; --log-task is refused).
// Remove one when it gets a way for every resourceURL it takes.
var tasksLogsOnCluster = map[string]bool{}

// TestArrayTaskLogsLeaveTheCluster: every built-in backend that runs
// arrays must get each task's log to the step's S3 prefix: either its
// tasks ship them (a backends.LogShipper, Slurm over REST) or invoke reads
// each task's output itself (a backends.TaskLogReader, Slurm over SSH,
// HTCondor, LSF). A new array backend fails here until it does one or the
// other, or is listed in tasksLogsOnCluster; a listed one that has a way
// for each of its URLs fails too, so that the list stays true.
func TestArrayTaskLogsLeaveTheCluster(t *testing.T) {
	reg := builtin.Registry()
	stuck := map[string]bool{} // array backends, and whether some URL of theirs has no way
	for _, name := range reg.Names() {
		for _, url := range []string{"ssh://user@127.0.0.1:1/dir", "http://127.0.0.1:1", "https://127.0.0.1:1"} {
			be, err := reg.New(name, backends.Config{URL: url})
			if err != nil {
				continue // it refuses the URL
			}
			if _, ok := be.(backends.ArraySubmitter); !ok {
				continue
			}
			_, ships := be.(backends.LogShipper)
			_, reads := be.(backends.TaskLogReader)
			stuck[name] = stuck[name] || !(ships || reads)
			if !ships && !reads && !tasksLogsOnCluster[name] {
				t.Errorf("backend %s (%T, %s) runs arrays, but its tasks' logs stay on the cluster: make it a backends.TaskLogReader or a LogShipper", name, be, url)
			}
		}
	}
	for name := range tasksLogsOnCluster {
		if s, ok := stuck[name]; ok && !s {
			t.Errorf("backend %s gets its tasks' logs off the cluster now: remove it from tasksLogsOnCluster", name)
		}
	}
	if len(stuck) < 2 {
		t.Fatalf("%d array backends found, want Slurm and HTCondor at least", len(stuck))
	}
}

// stderrInTheLog are the TaskLogReaders whose tasks write their standard
// error into the file ReadTaskLogs reads, by default (so it needs no
// backends.TaskErrReader), with where that is said.
var stderrInTheLog = map[string]string{
	"slurm": "sbatch writes standard error to the --output file unless --error is given",
}

// TestArrayTaskErrorsLeaveTheCluster: a backend that reads its tasks'
// logs itself also reads their standard error (a backends.TaskErrReader,
// HTCondor's task-N.err), or is listed in stderrInTheLog with the reason
// the log already holds it; a listed one that reads it separately fails,
// so that the list stays true.
func TestArrayTaskErrorsLeaveTheCluster(t *testing.T) {
	reg := builtin.Registry()
	seen := 0
	for _, name := range reg.Names() {
		for _, url := range []string{"ssh://user@127.0.0.1:1/dir", "http://127.0.0.1:1", "https://127.0.0.1:1"} {
			be, err := reg.New(name, backends.Config{URL: url})
			if err != nil {
				continue
			}
			if _, ok := be.(backends.TaskLogReader); !ok {
				continue
			}
			seen++
			_, errs := be.(backends.TaskErrReader)
			_, listed := stderrInTheLog[name]
			switch {
			case !errs && !listed:
				t.Errorf("backend %s (%T, %s) reads its tasks' logs but not their standard error: make it a backends.TaskErrReader, or list it in stderrInTheLog with the reason", name, be, url)
			case errs && listed:
				t.Errorf("backend %s (%T) reads its tasks' standard error separately: remove it from stderrInTheLog", name, be)
			}
		}
	}
	if seen < 3 {
		t.Fatalf("%d TaskLogReaders found, want Slurm over SSH, HTCondor and LSF at least", seen)
	}
}
