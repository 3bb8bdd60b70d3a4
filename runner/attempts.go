package runner

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// Attempts. A record runs one job at a time, its attempt. When invoke
// starts on a record whose job ended in a failure that the resubmit policy
// allows another try for (by default an infrastructure failure: exit 5),
// the invoke is a workflow's retry of the step, and it submits a new
// attempt under the same record instead of re-attaching to the failed job
// forever. The failed attempt's id and outcome move to status.attempts
// (the last MaxAttemptHistory of them), the job's state keys are cleared,
// and status.attempt counts up; then the submit goes through the same
// intent, key and adoption protocol as the first one, with a key of its
// own per attempt, so each attempt is submitted exactly once.
// ParseResubmit checks a resubmit policy.
func ParseResubmit(v string) (string, error) {
	switch p := strings.TrimSpace(v); p {
	case "":
		return record.ResubmitInfrastructure, nil
	case record.ResubmitInfrastructure, record.ResubmitFailed, record.ResubmitNever:
		return p, nil
	}
	return "", backends.Invalid(record.Resubmit.Flag, "is %q; use infrastructure, failed or never", v)
}

// attemptKeys are the keys of one attempt's job: cleared for the next.
var attemptKeys = []string{record.KeyID, record.KeyJobStatus, record.KeyMessage, record.KeySubmit, record.KeyStart, record.KeyEnd, record.KeyRawState, record.KeyReason,
	record.KeyExitCode, record.KeyKey, record.KeyIntent, record.KeyLogOffset, record.KeyOutputs, record.KeyIDFingerprint, record.KeyFailureCategory,
	record.KeyWatchGroup, record.KeyWatchObserved, record.KeyWatchHandover, record.KeyArrayCounts, record.KeyArrayFailed, record.KeyArrayExitCodes, record.KeyEfficiency,
	record.KeyArrayChunks}

// attemptOf is the record's current attempt number.
func attemptOf(d map[string]string) int {
	n, err := strconv.Atoi(d[record.KeyAttempt])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// AttemptKey is the idempotency key of attempt n of the record uid. The
// first attempt's key is the one records always had, so a job submitted
// before attempts existed is still adopted by it.
func AttemptKey(uid string, n int) string {
	if n <= 1 {
		return IdempotencyKey(uid)
	}
	return IdempotencyKey(uid + "/attempt/" + strconv.Itoa(n))
}

// resubmits reports whether the record's ended job calls for a new attempt
// under policy.
func resubmits(d map[string]string, policy string) bool {
	if d[record.KeyID] == "" || killRequested(d) || d[record.KeyIntent] != "" {
		return false
	}
	st := backends.State(d[record.KeyJobStatus])
	cat := backends.Category(d[record.KeyFailureCategory])
	switch policy {
	case record.ResubmitFailed:
		return st == backends.Failed || cat == backends.CategoryInfrastructure
	case record.ResubmitNever:
		return false
	}
	return (st == backends.Failed || st == backends.Killed) && cat == backends.CategoryInfrastructure
}

// newAttempt starts the next attempt when the recorded job ended in a
// failure that policy retries. The change is a compare-and-swap on the
// record: of several invokers, one moves the attempt on and the others
// find it moved.
func (r *run) newAttempt(ctx context.Context, policy string, log *slog.Logger) error {
	if !resubmits(r.rec.Data, policy) {
		return nil
	}
	from, id := attemptOf(r.rec.Data), r.rec.Data[record.KeyID]
	err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error {
		return r.update(ctx, func(d map[string]string) (bool, error) {
			if attemptOf(d) != from || d[record.KeyID] != id || !resubmits(d, policy) {
				return false, nil // someone else moved it on, or it changed
			}
			d[record.KeyAttempts] = appendAttempt(d[record.KeyAttempts], from, d)
			for _, k := range attemptKeys {
				delete(d, k)
			}
			d[record.KeyAttempt] = strconv.Itoa(from + 1)
			return true, nil
		})
	})
	if err != nil {
		return fmt.Errorf("starting a new attempt in %s: %w", r.Store.Describe(), err)
	}
	if attemptOf(r.rec.Data) > from {
		log.Info("the job ended in a failure another attempt may mend; submitting a new attempt",
			"failed_job", id, "attempt", attemptOf(r.rec.Data), "resubmit", policy)
	}
	return nil
}

// appendAttempt adds attempt n's line to the history, keeping the last
// MaxAttemptHistory lines.
func appendAttempt(hist string, n int, d map[string]string) string {
	f := func(s string) string {
		s = strings.Join(strings.Fields(s), "_")
		if s == "" {
			return "-"
		}
		return s
	}
	line := strings.Join([]string{strconv.Itoa(n), f(d[record.KeyID]), f(d[record.KeyJobStatus]), f(d[record.KeyFailureCategory]),
		f(d[record.KeyRawState]), f(d[record.KeyEnd])}, " ")
	var lines []string
	if hist != "" {
		lines = strings.Split(hist, "\n")
	}
	lines = append(lines, line)
	if len(lines) > record.MaxAttemptHistory {
		lines = lines[len(lines)-record.MaxAttemptHistory:]
	}
	return strings.Join(lines, "\n")
}
