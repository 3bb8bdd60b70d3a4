package slurm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// arrayScript exits 3 in task 4 only, after printing the index it saw.
const arrayScript = "#!/bin/sh\necho \"task $BRIDGE_TASK_INDEX of $SLURM_ARRAY_TASK_ID\"\nexit $((BRIDGE_TASK_INDEX == 4 ? 3 : 0))\n"

// arrayPython is the same in Python, whose #! the wrapper must honour.
const arrayPython = "#!/usr/bin/env python3\nimport os, sys\ni = os.environ['BRIDGE_TASK_INDEX']\nprint('task %s of %s' % (i, os.environ['SLURM_ARRAY_TASK_ID']))\nsys.exit(3 if i == '4' else 0)\n"

// arrayStatuser is what the array tests need of both flavours.
type arrayStatuser interface {
	backends.ArraySubmitter
	FindByKey(ctx context.Context, key string) (string, error)
	Cancel(ctx context.Context, id string) error
}

// waitTasks polls ArrayStatus until n tasks are final.
func waitTasks(t *testing.T, b arrayStatuser, id string, n int, limit time.Duration) map[int]backends.Status {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		tasks, err := b.ArrayStatus(context.Background(), id)
		require.NoError(t, err)
		done := 0
		for _, st := range tasks {
			if st.State.Final() {
				done++
			}
		}
		if done == n {
			return tasks
		}
		if time.Now().After(deadline) {
			t.Fatalf("array %s: %d of %d tasks final after %s: %+v", id, done, n, limit, tasks)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// waitRunning polls ArrayStatus until n tasks run.
func waitRunning(t *testing.T, b arrayStatuser, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		tasks, err := b.ArrayStatus(context.Background(), id)
		require.NoError(t, err)
		running := 0
		for _, st := range tasks {
			if st.State == backends.Running {
				running++
			}
		}
		if running == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("array %s: %d tasks running, want %d: %+v", id, running, n, tasks)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// checkArrayTasks: task 4 FAILED with exit code 3, the other five DONE.
func checkArrayTasks(t *testing.T, tasks map[int]backends.Status) {
	t.Helper()
	require.Len(t, tasks, 6)
	for i := 0; i < 6; i++ {
		st, ok := tasks[i]
		require.True(t, ok, "task %d", i)
		require.NotNil(t, st.ExitCode, "task %d: %+v", i, st)
		if i == 4 {
			assert.Equal(t, backends.Failed, st.State, "task 4: %+v", st)
			assert.Equal(t, 3, *st.ExitCode)
		} else {
			assert.Equal(t, backends.Done, st.State, "task %d: %+v", i, st)
			assert.Equal(t, 0, *st.ExitCode)
		}
	}
}

func TestArrayRealSlurm(t *testing.T) {
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			for _, script := range []struct{ name, text string }{{"sh", arrayScript}, {"python3", arrayPython}} {
				t.Run(script.name, func(t *testing.T) {
					t.Parallel()
					if script.name == "python3" && !rs.hasPython() {
						t.Skip("no python3 on the cluster's node (the script's #! would not run)")
					}
					realArrayRun(t, rs, script.text)
				})
			}
			t.Run("cancel", func(t *testing.T) { t.Parallel(); realArrayCancel(t, rs) })
			t.Run("too-big", func(t *testing.T) { realArrayTooBig(t, rs) })
		})
	}
}

// hasPython: python3 is on the cluster's (one) node, as seen from here.
func (rs *realSlurm) hasPython() bool {
	if !rs.local {
		return false
	}
	for _, p := range []string{"usr/bin/python3", "usr/local/bin/python3"} {
		if _, err := os.Stat(filepath.Join(cmp.Or(rs.root, "/"), p)); err == nil {
			return true
		}
	}
	return false
}

func realArrayRun(t *testing.T, rs *realSlurm, script string) {
	b, _ := rs.backend(t, nil)
	ctx := context.Background()
	key := newKey()
	a, err := backends.ParseArray("0-5%3")
	require.NoError(t, err)
	out := outPath(key, "%a.out")
	id, err := b.SubmitArray(ctx, backends.Job{Name: "array", Key: key, Script: script,
		Properties: json.RawMessage(fmt.Sprintf(`{"standard_output":%q,"time_limit":5}`, out))}, a)
	require.NoError(t, err)
	found, err := b.FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, id, found, "FindByKey gives the array's id")
	tasks := waitTasks(t, b, id, 6, 3*time.Minute)
	checkArrayTasks(t, tasks)
	found, err = b.FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, id, found, "FindByKey gives the array's id once its tasks ran")
	for i := 0; i < 6; i++ {
		text, ok := readJobFile(t, rs, outPath(key, fmt.Sprintf("%d.out", i)))
		if ok {
			assert.Equal(t, fmt.Sprintf("task %d of %d\n", i, i), text)
		}
	}
}

func realArrayCancel(t *testing.T, rs *realSlurm) {
	b, _ := rs.backend(t, nil)
	ctx := context.Background()
	// Two tasks run and two wait: Cancel must end both kinds.
	a, err := backends.ParseArray("0-3%2")
	require.NoError(t, err)
	id, err := b.SubmitArray(ctx, backends.Job{Name: "array-cancel", Key: newKey(), Script: "#!/bin/sh\nsleep 60\n",
		Properties: json.RawMessage(`{"time_limit":5}`)}, a)
	require.NoError(t, err)
	waitRunning(t, b, id, 2)
	require.NoError(t, b.Cancel(ctx, id))
	tasks := waitTasks(t, b, id, 4, time.Minute)
	require.Len(t, tasks, 4, "every task has a record once cancelled")
	for i, st := range tasks {
		assert.Equal(t, backends.Killed, st.State, "task %d: %+v", i, st)
	}
}

func realArrayTooBig(t *testing.T, rs *realSlurm) {
	b, ct := rs.backend(t, nil)
	a, err := backends.ParseArray("0-1001") // the clusters keep the default MaxArraySize, 1001
	require.NoError(t, err)
	_, err = b.SubmitArray(context.Background(), backends.Job{Name: "array-big", Key: newKey(), Script: "#!/bin/sh\ntrue\n"}, a)
	testutil.RequireFieldError(t, err, "array")
	assert.Contains(t, err.Error(), "MaxArraySize")
	t.Logf("refused with %d requests: %v", ct.total(), err)
}

func TestArraySSH(t *testing.T) {
	b := sshBackend(t)
	for _, script := range []struct{ name, text string }{{"sh", arrayScript}, {"python3", arrayPython}} {
		t.Run(script.name, func(t *testing.T) {
			ctx := testssh.Ctx(t, 4*time.Minute)
			a, err := backends.ParseArray("0-5%3")
			require.NoError(t, err)
			key := sshKey(t)
			id, err := b.SubmitArray(ctx, backends.Job{Name: "ssh-array", Key: key, Script: script.text}, a)
			require.NoError(t, err)
			found, err := b.FindByKey(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, id, found)
			checkArrayTasks(t, waitTasks(t, b, id, 6, 3*time.Minute))
			found, err = b.FindByKey(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, id, found, "found once the tasks ran")
			var log bytes.Buffer
			_, err = b.ReadLogs(ctx, id, 0, &log)
			require.NoError(t, err)
			assert.Equal(t, "task 0 of 0\n", log.String(), "the array's log is its first task's")
			dir, err := b.ssh.JobDir(ctx, key)
			require.NoError(t, err)
			for i := 1; i < 6; i++ {
				log.Reset()
				_, err := b.ssh.ReadFrom(ctx, fmt.Sprintf("%s/job-%d.out", dir, i), 0, &log)
				require.NoError(t, err)
				assert.Equal(t, fmt.Sprintf("task %d of %d\n", i, i), log.String())
			}
		})
	}
	t.Run("cancel", func(t *testing.T) {
		ctx := testssh.Ctx(t, 2*time.Minute)
		a, _ := backends.ParseArray("0-3%2")
		id, err := b.SubmitArray(ctx, backends.Job{Name: "ssh-array-cancel", Key: sshKey(t), Script: "#!/bin/sh\nsleep 60\n"}, a)
		require.NoError(t, err)
		waitRunning(t, b, id, 2)
		require.NoError(t, b.Cancel(ctx, id))
		tasks := waitTasks(t, b, id, 4, time.Minute)
		require.Len(t, tasks, 4)
		for i, st := range tasks {
			assert.Equal(t, backends.Killed, st.State, "task %d: %+v", i, st)
		}
	})
	t.Run("too-big", func(t *testing.T) {
		ctx := testssh.Ctx(t, time.Minute)
		a, _ := backends.ParseArray("0-1001")
		key := sshKey(t)
		_, err := b.SubmitArray(ctx, backends.Job{Name: "ssh-array-big", Key: key, Script: "#!/bin/sh\ntrue\n"}, a)
		testutil.RequireFieldError(t, err, "array")
		assert.Contains(t, err.Error(), "MaxArraySize, 1001")
		found, err := b.FindByKey(ctx, key)
		require.NoError(t, err)
		assert.Empty(t, found, "nothing was submitted")
	})
}

// TestArrayRealSlurmdbd: once slurmctld has forgotten an array's tasks
// (MinJobAge=2 s on that cluster), ArrayStatus reads them all from
// slurmdbd in one query.
func TestArrayRealSlurmdbd(t *testing.T) {
	rs := realSlurmEnv(t, accountingEnv)
	if rs == nil {
		msg := "no real Slurm with slurmdbd: see TestRealSlurmdbdPastMinJobAge"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	b, ct := rs.backend(t, nil)
	ctx := context.Background()
	a, err := backends.ParseArray("0-2")
	require.NoError(t, err)
	id, err := b.SubmitArray(ctx, backends.Job{Name: "array-dbd", Key: newKey(),
		Script: "#!/bin/sh\nexit $((BRIDGE_TASK_INDEX == 1 ? 3 : 0))\n", Properties: json.RawMessage(`{"time_limit":5}`)}, a)
	require.NoError(t, err)
	waitTasks(t, b, id, 3, 2*time.Minute)
	start := time.Now()
	for {
		_, _, err := b.liveRecords(ctx, id)
		if errors.Is(err, backends.ErrNotFound) {
			break
		}
		require.NoError(t, err)
		require.Less(t, time.Since(start), 3*time.Minute, "slurmctld still knows array %s", id)
		time.Sleep(time.Second)
	}
	before := ct.total()
	tasks, err := b.ArrayStatus(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 2, ct.total()-before, "one request to slurmctld, one to slurmdbd")
	require.Len(t, tasks, 3, "%+v", tasks)
	for i, st := range tasks {
		want := backends.Done
		if i == 1 {
			want = backends.Failed
		}
		assert.Equal(t, want, st.State, "task %d: %+v", i, st)
	}
}
