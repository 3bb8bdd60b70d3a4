package runner

// CrashPoints are the named moments at which tests kill invoke with SIGKILL
// (BRIDGE_CRASH_AT=<point>), to prove that a restart heals every window of
// the exactly-once protocol, including the narrow ones a random kill rarely
// hits. The hook exists only in binaries built with the bridgetest build tag
// (the tests build theirs so); a release binary has none (CrashHooks).
var CrashPoints = []string{"before-intent", "after-intent", "after-submit", "after-id", "following", "after-move-intent", "after-move-cancel"}

// MoveCrashPoints are the CrashPoints only a job that moves to another
// target reaches (re-placement, replace.go); TestReplaceOnTwoRealSlurms
// kills invoke at each of them, the others are reached by any job.
var MoveCrashPoints = []string{"after-move-intent", "after-move-cancel"}
