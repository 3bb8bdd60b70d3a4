package htcondor_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

var _ backends.StatusBatcher = (*htcondor.Backend)(nil)

// TestStatusMany: on the real pool, one StatusMany for a finished, a
// failed, a running and a held job, plus an unknown and a malformed id,
// is one condor_q and one condor_history; it says of each job what Status
// says and leaves the other ids out. It also measures one StatusMany
// against Status for 20 jobs.
func TestStatusMany(t *testing.T) { testssh.EachCondor(t, testStatusMany) }

func testStatusMany(t *testing.T, srv testssh.Server) {
	b := newBackend(t, srv)
	ctx := testssh.Ctx(t, 5*time.Minute)
	submit := func(script string, props map[string]any) string {
		t.Helper()
		id, err := b.Submit(ctx, job(t, script, props))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
		return id
	}
	ids := map[string]string{
		"done":    submit("#!/bin/sh\nexit 0\n", nil),
		"failed":  submit("#!/bin/sh\nexit 3\n", nil),
		"running": submit("#!/bin/sh\nsleep 300\n", nil),
		"held":    submit("#!/bin/sh\nexit 0\n", map[string]any{"on_exit_hold": true}),
	}
	want := map[string]backends.State{"done": backends.Done, "failed": backends.Failed, "running": backends.Running, "held": backends.Failed}
	for name, id := range ids {
		if st := follow(t, b, id, want[name]); st.State != want[name] {
			t.Fatalf("%s: want %s, got %+v", name, want[name], st)
		}
	}
	waitGone(t, b, ctx, ids["done"], ids["failed"])

	asked := []string{ids["done"], ids["failed"], ids["running"], ids["held"], "999999.0", "1.0; true", "-constraint"}
	before := b.Queries()
	got, err := b.StatusMany(ctx, asked)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.Queries() - before; n != 2 {
		t.Errorf("one StatusMany ran %d condor_q/condor_history commands, want 2", n)
	}
	if len(got) != 4 {
		t.Errorf("want the 4 jobs only, got %d: %+v", len(got), got)
	}
	for name, id := range ids {
		one, err := b.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got[id].State != want[name] || got[id].State != one.State || got[id].Raw != one.Raw {
			t.Errorf("%s: StatusMany %+v, Status %+v", name, got[id], one)
		}
		if one.State.Final() && !reflect.DeepEqual(one, got[id]) {
			t.Errorf("%s: an ended job, StatusMany %+v, Status %+v", name, got[id], one)
		}
	}
	measureTwenty(t, b, ctx, ids)
}

// measureTwenty logs the time and commands of Status for 20 jobs (the
// four, and 16 submitted on hold, which never run) against one
// StatusMany of them, and checks the two agree.
func measureTwenty(t *testing.T, b *htcondor.Backend, ctx context.Context, ids map[string]string) {
	twenty := []string{ids["done"], ids["failed"], ids["running"], ids["held"]}
	for len(twenty) < 20 {
		id, err := b.Submit(ctx, job(t, "#!/bin/sh\nexit 0\n", map[string]any{"hold": true}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
		twenty = append(twenty, id)
	}
	one := map[string]backends.Status{}
	before, t0 := b.Queries(), time.Now()
	for _, id := range twenty {
		st, err := b.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		one[id] = st
	}
	each, singles := time.Since(t0), b.Queries()-before
	before, t0 = b.Queries(), time.Now()
	got, err := b.StatusMany(ctx, twenty)
	if err != nil {
		t.Fatal(err)
	}
	many, n := time.Since(t0), b.Queries()-before
	if n != 2 || len(got) != 20 {
		t.Fatalf("StatusMany of 20 jobs: %d commands, %d statuses", n, len(got))
	}
	for _, id := range twenty {
		if got[id].State != one[id].State || got[id].Raw != one[id].Raw {
			t.Errorf("%s: StatusMany %+v, Status %+v", id, got[id], one[id])
		}
	}
	t.Logf("20 Status: %d commands, %s; one StatusMany of 20 ids: %d commands, %s",
		singles, each.Round(time.Millisecond), n, many.Round(time.Millisecond))
}

// waitGone waits until the ended jobs done and failed leave the queue
// (soon after their end), seen when a StatusMany of the two needs
// condor_history (two commands) and still reports both, as it must.
func waitGone(t *testing.T, b *htcondor.Backend, ctx context.Context, done, failed string) {
	deadline := time.Now().Add(time.Minute)
	for {
		before := b.Queries()
		got, err := b.StatusMany(ctx, []string{done, failed})
		if err != nil {
			t.Fatal(err)
		}
		if n := b.Queries() - before; n == 2 && len(got) == 2 && got[done].State == backends.Done && got[failed].State == backends.Failed {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("the ended jobs after a minute: %d commands, %+v", n, got)
		}
		time.Sleep(time.Second)
	}
}
