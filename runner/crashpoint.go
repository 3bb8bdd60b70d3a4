package runner

// CrashPoints are the named moments at which tests kill invoke with SIGKILL
// (BRIDGE_CRASH_AT=<point>), to prove that a restart heals every window of
// the exactly-once protocol, including the narrow ones a random kill rarely
// hits. The hook exists only in binaries built with the bridgetest build tag
// (the tests build theirs so); a release binary has none (CrashHooks).
var CrashPoints = []string{"before-intent", "after-intent", "after-submit", "after-id", "following"}

// MoveCrashPoints are the moments only a job that moves to another target
// reaches (re-placement, replace.go; BRIDGE_CRASH_AT, as CrashPoints, which
// any job reaches): TestReplaceOnTwoRealSlurms kills invoke at each.
var MoveCrashPoints = []string{"after-move-intent", "after-move-cancel"}
