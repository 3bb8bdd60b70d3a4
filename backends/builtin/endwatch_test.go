package builtin_test

import (
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// TestSSHBackendsAnnounceEnds: every built-in backend that takes an
// ssh:// resourceURL holds a session on the login node, where its jobs'
// ends can be seen without asking the scheduler: it must be an
// EndWatcher (a new one fails here until it is).
func TestSSHBackendsAnnounceEnds(t *testing.T) {
	url := "ssh://user@127.0.0.1:1/dir"
	if !sshexec.IsSSH(url) {
		t.Fatalf("%s is no SSH resourceURL", url)
	}
	reg, n := builtin.Registry(), 0
	for _, name := range reg.Names() {
		be, err := reg.New(name, backends.Config{URL: url})
		if err != nil {
			continue // not reached over SSH: it refuses the URL
		}
		n++
		if _, ok := be.(backends.EndWatcher); !ok {
			t.Errorf("backend %s takes an ssh:// resourceURL (%T) but is no backends.EndWatcher", name, be)
		}
	}
	if n < 2 {
		t.Fatalf("%d backends over SSH, want slurm and htcondor at least", n)
	}
}
