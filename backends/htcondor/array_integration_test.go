package htcondor_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

var _ backends.ArraySubmitter = (*htcondor.Backend)(nil)

// followArray polls ArrayStatus until want tasks are final (or, with
// running, until as many run); it returns the last answer.
// maxGoing > 0 is the array's %M: no more tasks may be queued at once.
func followArray(t *testing.T, b *htcondor.Backend, id string, want int, running bool, maxGoing int) map[int]backends.Status {
	t.Helper()
	ctx := testssh.Ctx(t, 3*time.Minute)
	for {
		tasks, err := b.ArrayStatus(ctx, id)
		if err != nil && !errors.Is(err, backends.ErrNotFound) {
			t.Fatalf("ArrayStatus %s: %v", id, err)
		}
		n, going := 0, 0
		for _, st := range tasks {
			if st.State.Final() || (running && st.State == backends.Running) {
				n++
			}
			if !st.State.Final() {
				going++
			}
		}
		if maxGoing > 0 && going > maxGoing {
			t.Errorf("array %s: %d tasks queued or running at once, over its %%%d: %+v", id, going, maxGoing, tasks)
		}
		if n >= want {
			return tasks
		}
		select {
		case <-ctx.Done():
			t.Fatalf("array %s: %d of %d tasks there after 3 min: %+v", id, n, want, tasks)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestArrayIndexesExitCodesAndKey: a cluster of the tasks 0-4, at most 2
// materialized at once; each prints its index and task 2 exits 3.
func TestArrayIndexesExitCodesAndKey(t *testing.T) {
	testssh.EachCondor(t, testArrayIndexesExitCodesAndKey)
}

func testArrayIndexesExitCodesAndKey(t *testing.T, srv testssh.Server) {
	b := newBackend(t, srv)
	ctx := testssh.Ctx(t, time.Minute)
	j := job(t, "#!/bin/sh\necho \"task $BRIDGE_TASK_INDEX\"\n[ \"$BRIDGE_TASK_INDEX\" = 2 ] && exit 3\nexit 0\n", nil)
	a, err := backends.ParseArray("0-4%2")
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.SubmitArray(ctx, j, a)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(id, ".") {
		t.Fatalf("array id %q is a job id, want the cluster", id)
	}
	if got, err := b.FindByKey(ctx, j.Key); err != nil || got != id {
		t.Fatalf("FindByKey while queued: %q %v, want %s", got, err, id)
	}
	before := b.Queries()
	tasks := followArray(t, b, id, 5, false, 2)
	t.Logf("array %s: %d queries while following", id, b.Queries()-before)
	checkTasks(t, b, id, tasks)
	var out bytes.Buffer
	if _, err := b.ReadLogs(ctx, id, 0, &out); err != nil || out.String() != "task 0\n" {
		t.Errorf("the array's log (its first task's): %v %q", err, out.String())
	}
	if st, err := b.Status(ctx, id); err != nil || st.State != backends.Failed {
		t.Errorf("Status of the array: %+v %v, want FAILED (task 2)", st, err)
	}
	if got, err := b.FindByKey(ctx, j.Key); err != nil || got != id {
		t.Fatalf("FindByKey after the end: %q %v, want %s", got, err, id)
	}
	// A restarted invoke knows nothing of the array: the history alone
	// gives its tasks and its first task's log.
	fresh := newBackend(t, srv)
	if tasks, err := fresh.ArrayStatus(ctx, id); err != nil || len(tasks) != 5 || tasks[2].State != backends.Failed {
		t.Errorf("a fresh backend's ArrayStatus: %v %+v", err, tasks)
	}
	if n := fresh.Queries(); n != 2 {
		t.Errorf("one ArrayStatus ran %d queries, want one condor_q and one condor_history", n)
	}
	out.Reset()
	if _, err := newBackend(t, srv).ReadLogs(ctx, id, 0, &out); err != nil || out.String() != "task 0\n" {
		t.Errorf("a fresh backend's log of the array: %v %q", err, out.String())
	}
}

// checkTasks: task 2 FAILED with exit code 3, the others DONE, each with
// its own output.
func checkTasks(t *testing.T, b *htcondor.Backend, id string, tasks map[int]backends.Status) {
	ctx := testssh.Ctx(t, time.Minute)
	for i := 0; i <= 4; i++ {
		st, ok := tasks[i]
		switch {
		case !ok:
			t.Errorf("task %d missing: %+v", i, tasks)
		case i == 2 && (st.State != backends.Failed || st.ExitCode == nil || *st.ExitCode != 3):
			t.Errorf("task 2: want FAILED exit 3, got %+v", st)
		case i != 2 && st.State != backends.Done:
			t.Errorf("task %d: want DONE, got %+v", i, st)
		}
		var out bytes.Buffer
		n := strconv.Itoa(i)
		if err := b.FetchOutput(ctx, id, "task-"+n+".out", &out); err != nil || out.String() != "task "+n+"\n" {
			t.Errorf("task %d output: %v %q", i, err, out.String())
		}
		t.Logf("task %d: %s %s", i, st.State, st.Message)
	}
	if len(tasks) != 5 {
		t.Errorf("want 5 tasks, got %+v", tasks)
	}
}

// TestArrayItemizedAndCancel: the indexes 1,3,8-9 run as such; a Cancel
// of the array's id removes every task.
func TestArrayItemizedAndCancel(t *testing.T) { testssh.EachCondor(t, testArrayItemizedAndCancel) }

func testArrayItemizedAndCancel(t *testing.T, srv testssh.Server) {
	b := newBackend(t, srv)
	ctx := testssh.Ctx(t, time.Minute)
	j := job(t, "#!/bin/sh\necho \"task $BRIDGE_TASK_INDEX\"\nsleep 300\n", nil)
	a, err := backends.ParseArray("1,3,8-9")
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.SubmitArray(ctx, j, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
	tasks := followArray(t, b, id, 1, true, 0)
	for i := range tasks {
		if i != 1 && i != 3 && i != 8 && i != 9 {
			t.Errorf("task index %d is not in 1,3,8-9: %+v", i, tasks)
		}
	}
	if err := b.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	tasks = followArray(t, b, id, 4, false, 0)
	for i, st := range tasks {
		if st.State != backends.Killed {
			t.Errorf("task %d after Cancel: want KILLED, got %+v", i, st)
		}
	}
	if len(tasks) != 4 {
		t.Errorf("want the 4 tasks 1,3,8,9, got %+v", tasks)
	}
	if err := b.Cancel(ctx, id); err != nil {
		t.Fatalf("cancelling an ended array: %v", err)
	}
}
