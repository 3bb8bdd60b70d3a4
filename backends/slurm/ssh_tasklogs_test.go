package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

// TestSSHReadTaskLogsAfterReattach (real Slurm over SSH): a backend that
// did not submit the array (a re-attached invoke) reads each ended task's
// own output where slurmctld says it is; the tasks it does not list (here
// indexes never in the array) are not found, and all of it costs one
// scontrol, not one per task.
func TestSSHReadTaskLogsAfterReattach(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, 2*time.Minute)
	a, err := backends.ParseArray("0-2")
	if err != nil {
		t.Fatal(err)
	}
	j := backends.Job{Name: "ssh-task-logs", Key: sshKey(t), Script: "#!/bin/sh\necho \"task $BRIDGE_TASK_INDEX\"\n"}
	id, err := b.SubmitArray(ctx, j, a)
	if err != nil {
		t.Fatal(err)
	}
	for ended := false; !ended; {
		tasks, err := b.ArrayStatus(ctx, id)
		if err != nil && !errors.Is(err, backends.ErrNotFound) {
			t.Fatal(err)
		}
		ended = len(tasks) == 3
		for _, st := range tasks {
			ended = ended && st.State.Final()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("array %s has not ended: %v", id, tasks)
		case <-time.After(300 * time.Millisecond):
		}
	}

	srv := testssh.Default(t)
	counts := &backends.CommandCounts{}
	be, err := New(backends.Config{URL: srv.URL, Credentials: testssh.Creds(t, srv.CredsDir), Commands: counts})
	if err != nil {
		t.Fatal(err)
	}
	again := be.(*SSHBackend)
	t.Cleanup(func() { again.Close() })
	for i := 0; i <= 2; i++ {
		var out bytes.Buffer
		if _, err := again.ReadTaskLogs(ctx, id, i, 0, &out); err != nil || out.String() != fmt.Sprintf("task %d\n", i) {
			t.Errorf("task %d's output: %v %q", i, err, out.String())
		}
	}
	for i := 5; i <= 7; i++ {
		if _, err := again.ReadTaskLogs(ctx, id, i, 0, &bytes.Buffer{}); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("task %d is no task of the array: want not found, got %v", i, err)
		}
	}
	if n := counts.Counts()[backends.KindStatus]; n != 1 {
		t.Errorf("%d scontrols for the tasks' paths, want 1", n)
	}
}
