package slurm

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

type pendingCanceller interface {
	backends.Backend
	backends.PendingCanceller
}

// checkCancelIfPending on a real Slurm: a pending job (--begin an hour
// ahead) is cancelled and confirmed, again when asked twice; a running job
// is left running.
func checkCancelIfPending(t *testing.T, b pendingCanceller, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pending, err := b.Submit(ctx, backends.Job{Name: "cip-pending", Key: key + "p", Script: "#!/bin/sh\n#SBATCH --begin=now+1hours\ntrue\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(context.Background(), pending) })
	for range 2 {
		start := time.Now()
		pc, err := b.CancelIfPending(ctx, pending)
		if err != nil || !pc.Cancelled {
			t.Fatalf("a pending job: %+v, %v", pc, err)
		}
		t.Logf("took %s; evidence: %s", time.Since(start).Round(time.Millisecond), pc.Evidence)
	}
	if st, err := b.Status(ctx, pending); err != nil || st.Raw != "CANCELLED" || st.ExitCode != nil && *st.ExitCode != 0 {
		t.Fatalf("after the cancel: %+v, %v", st, err)
	}
	running, err := b.Submit(ctx, backends.Job{Name: "cip-running", Key: key + "r", Script: "#!/bin/sh\n#SBATCH --time=5\nsleep 300\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(context.Background(), running) })
	for {
		st, err := b.Status(ctx, running)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == backends.Running {
			break
		}
		if st.State.Final() || ctx.Err() != nil {
			t.Fatalf("the running job: %+v", st)
		}
		time.Sleep(300 * time.Millisecond)
	}
	pc, err := b.CancelIfPending(ctx, running)
	if err != nil || pc.Cancelled {
		t.Fatalf("a running job: %+v, %v", pc, err)
	}
	if st, err := b.Status(ctx, running); err != nil || st.State != backends.Running {
		t.Fatalf("the running job after CancelIfPending: %+v, %v", st, err)
	}
}

func TestCancelIfPendingRealSlurm(t *testing.T) {
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			b, ct := rs.backend(t, nil)
			checkCancelIfPending(t, b, newKey())
			t.Logf("requests: %v", ct.snapshot())
		})
	}
}

func TestCancelIfPendingSSH(t *testing.T) {
	checkCancelIfPending(t, sshBackend(t), sshKey(t))
}

// TestCancelIfPendingDark: slurmrestd unreachable during the ask is an
// error (unknown), never a Cancelled, and the job is left pending, not held.
func TestCancelIfPendingDark(t *testing.T) {
	rs := realSlurms(t)[0]
	b, _ := rs.backend(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := b.Submit(ctx, backends.Job{Name: "cip-dark", Key: newKey(), Script: "#!/bin/sh\n#SBATCH --begin=now+1hours\ntrue\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
	u, err := url.Parse(rs.url)
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.NewProxy(t, u.Host)
	dark := *rs
	dark.url = u.Scheme + "://" + p.Addr + u.Path
	db, _ := dark.backend(t, nil)
	if _, err := db.Status(ctx, id); err != nil { // learn the version first
		t.Fatal(err)
	}
	p.Cut()
	short, cancelShort := context.WithTimeout(ctx, 20*time.Second)
	defer cancelShort()
	pc, err := db.CancelIfPending(short, id)
	if err == nil || pc.Cancelled {
		t.Fatalf("dark: want an error and no Cancelled, got %+v, %v", pc, err)
	}
	st, err := b.Status(ctx, id)
	if err != nil || st.State != backends.Pending || st.Reason == "JobHeldUser" || st.Reason == "JobHeldAdmin" {
		t.Fatalf("after a dark ask the job must be pending and not held: %+v, %v", st, err)
	}
}
