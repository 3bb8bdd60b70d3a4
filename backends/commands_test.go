package backends

import "testing"

// TestCommandKind: the commands the CLI backends run are counted by what
// they ask, sbatch behind its sh wrapper too; anything else is other.
func TestCommandKind(t *testing.T) {
	for want, argv := range map[string][]string{
		KindSubmit: {"sh", "-c", `umask 077 && . "$1" && shift && exec "$@"`, "sh", "/h/job.env", "sbatch", "--parsable"},
		KindStatus: {"condor_history", "-limit", "1", "-json", "12.0"},
		KindCancel: {"scancel", "7"},
		KindProbe:  {"sinfo", "-h"},
		KindOther:  {"mkdir", "-p", "/h/bridge-runner/k"},
	} {
		if got := CommandKind(argv); got != want {
			t.Errorf("%v: %s, want %s", argv, got, want)
		}
	}
	var nilCounts *CommandCounts
	nilCounts.Add(KindSubmit) // a backend built without counts
	c := &CommandCounts{}
	c.Add(KindStatus)
	c.Add(KindStatus)
	if got := c.Counts()[KindStatus]; got != 2 {
		t.Errorf("status counted %d times, want 2", got)
	}
}
