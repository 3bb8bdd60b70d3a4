//go:build bridgetest

package runner

import (
	"os"
	"syscall"
)

// CrashHooks says whether this binary has the crash hook (see CrashPoints).
const CrashHooks = true

// crashPoint kills this process if BRIDGE_CRASH_AT names point. SIGKILL,
// not exit: nothing may be flushed or deferred, as in a real crash.
func crashPoint(point string) {
	if os.Getenv("BRIDGE_CRASH_AT") == point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never returns
	}
}
