package runner

import (
	"os"
	"syscall"
)

// CrashPoints are the named moments at which tests kill invoke with SIGKILL
// (BRIDGE_CRASH_AT=<point>), to prove that a restart heals every window of
// the exactly-once protocol, including the narrow ones a random kill rarely
// hits.
var CrashPoints = []string{"before-intent", "after-intent", "after-submit", "after-id", "following"}

// crashPoint kills this process if BRIDGE_CRASH_AT names point. SIGKILL,
// not exit: nothing may be flushed or deferred, as in a real crash.
func crashPoint(point string) {
	if os.Getenv("BRIDGE_CRASH_AT") == point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns
	}
}
