package builtin_test

import (
	"fmt"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
)

// cannotCancelIfPending are the built-in backends that take part in
// placement (LoadProber) but are no PendingCanceller, so that a job placed
// there never moves (replaceAfter), each with why. A job may move only off
// a backend that can say, in its scheduler's words, that the job was
// cancelled and never started.
var cannotCancelIfPending = map[string]string{
	"lsf":     "bkill has a -stat pend filter, but whether mbatchd applies it atomically with dispatch, through the Application Center, is unverified here",
	"ray":     "the Jobs API stops a job whatever its state; a PENDING job's stop races its start",
	"quantum": "a job's cancel has no 'only while queued' form",
}

// TestPlacedBackendsCanCancelIfPending: every built-in backend that takes
// part in placement is a backends.PendingCanceller, or is listed above
// with why not; a new one fails here until it is one of the two.
func TestPlacedBackendsCanCancelIfPending(t *testing.T) {
	reg, seen := builtin.Registry(), map[string]bool{}
	for _, name := range reg.Names() {
		for _, url := range []string{"https://127.0.0.1:1", "ssh://user@127.0.0.1:1/dir"} {
			be, err := reg.New(name, backends.Config{URL: url})
			if err != nil {
				continue // not reached at such a URL
			}
			if _, ok := be.(backends.LoadProber); !ok {
				continue
			}
			_, can := be.(backends.PendingCanceller)
			why, listed := cannotCancelIfPending[name]
			key := fmt.Sprintf("%s (%T)", name, be)
			seen[key] = true
			switch {
			case !can && !listed:
				t.Errorf("backend %s takes part in placement but is no backends.PendingCanceller: implement it, or list it in cannotCancelIfPending with why", key)
			case can && listed:
				t.Errorf("backend %s is a backends.PendingCanceller: remove it from cannotCancelIfPending (%q)", key, why)
			}
		}
	}
	if len(seen) < 4 {
		t.Fatalf("only %d placed backends found (%v): the test no longer sees them", len(seen), seen)
	}
	t.Logf("placed backends: %v", seen)
}
