package htcondor_test

import (
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

// TestCancelIfPending: an idle job that no machine matches is removed and
// confirmed never started (twice: the question is idempotent); a running
// job is left running.
func TestCancelIfPending(t *testing.T) { testssh.EachCondor(t, testCancelIfPending) }

func testCancelIfPending(t *testing.T, srv testssh.Server) {
	b := newBackend(t, srv)
	ctx := testssh.Ctx(t, 2*time.Minute)
	idle, err := b.Submit(ctx, job(t, "#!/bin/sh\ntrue\n", map[string]any{"requirements": `OpSys == "NO-SUCH-OS"`}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(ctx, idle) })
	for range 2 {
		pc, err := b.CancelIfPending(ctx, idle)
		if err != nil || !pc.Cancelled {
			t.Fatalf("an idle job: %+v, %v", pc, err)
		}
		t.Logf("evidence: %s", pc.Evidence)
	}
	running, err := b.Submit(ctx, job(t, "#!/bin/sh\nsleep 300\n", nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(ctx, running) })
	if st := follow(t, b, running, backends.Running); st.State != backends.Running {
		t.Fatalf("want RUNNING, got %+v", st)
	}
	pc, err := b.CancelIfPending(ctx, running)
	if err != nil || pc.Cancelled {
		t.Fatalf("a running job: %+v, %v", pc, err)
	}
	if st, err := b.Status(ctx, running); err != nil || st.State != backends.Running {
		t.Fatalf("the running job after CancelIfPending: %+v, %v", st, err)
	}
}
