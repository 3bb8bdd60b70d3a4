package runner

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestPendingWaitCountsFromSubmitOnlyBeforeTheJobRan: a re-attach counts
// the wait since the backend's submit time; a job that ran and was
// requeued waits again from when it was seen pending.
func TestPendingWaitCountsFromSubmitOnlyBeforeTheJobRan(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Now()
	submitted := now.Add(-time.Hour)
	p := pendingWatch{limit: 30 * time.Minute}
	if !p.observe(backends.Status{State: backends.Pending, Reason: "Priority", SubmitTime: submitted}, "1", now, log) {
		t.Fatal("a re-attach to a job pending for an hour is over a 30m limit")
	}
	q := pendingWatch{limit: 30 * time.Minute}
	q.observe(backends.Status{State: backends.Running, SubmitTime: submitted}, "2", now, log)
	if q.observe(backends.Status{State: backends.Pending, Reason: "BeginTime", SubmitTime: submitted}, "2", now.Add(time.Second), log) {
		t.Fatal("a requeued job's wait starts when it is seen pending again")
	}
	if !q.observe(backends.Status{State: backends.Pending, Reason: "BeginTime", SubmitTime: submitted}, "2", now.Add(31*time.Minute), log) {
		t.Fatal("31 minutes pending again is over the 30m limit")
	}
}

// TestPendingLimitKeepsTheWaitsReason: the cancelled job's next states
// (HTCondor's REMOVED says only "via condor_rm") do not replace the reason
// the job waited for, which the record keeps.
func TestPendingLimitKeepsTheWaitsReason(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Now()
	p := pendingWatch{limit: time.Minute}
	p.observe(backends.Status{State: backends.Pending, Reason: "no match found", SubmitTime: now}, "1.0", now, log)
	if !p.observe(backends.Status{State: backends.Pending, Reason: "no match found", SubmitTime: now}, "1.0", now.Add(2*time.Minute), log) {
		t.Fatal("2 minutes pending is over the 1m limit")
	}
	p.observe(backends.Status{State: backends.Killed, Reason: "via condor_rm (by user u)"}, "1.0", now.Add(2*time.Minute+time.Second), log)
	if p.cause != "no match found" {
		t.Fatalf("the wait's reason after the cancel: %q, want the scheduler's %q", p.cause, "no match found")
	}
}

// TestPendingQuietThenHeartbeat: a wait with no reason is said once it
// lasts past pendingQuiet, then at the heartbeat; a reason at once.
func TestPendingQuietThenHeartbeat(t *testing.T) {
	var p pendingWatch
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	t0 := time.Now()
	for s := 0; s <= 30; s++ {
		p.observe(backends.Status{State: backends.Pending}, "j", t0.Add(time.Duration(s)*time.Second), log)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "job pending: it has not started"), "said once past pendingQuiet, then at the heartbeat")
	p.observe(backends.Status{State: backends.Pending, Reason: "Resources"}, "j", t0.Add(31*time.Second), log)
	assert.Equal(t, 2, strings.Count(logs.String(), "job pending: it has not started"), "a reason given is said at once")
}
