package local

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

func TestMain(m *testing.M) {
	RunSupervisorIfRequested() // the supervisor is this test binary
	os.Exit(m.Run())
}

func newBackend(t *testing.T) *Backend {
	b, err := New(backends.Config{DataDir: t.TempDir()})
	require.NoError(t, err)
	return b.(*Backend)
}

func waitFinal(t *testing.T, b *Backend, id string) backends.Status {
	t.Helper()
	var st backends.Status
	require.Eventually(t, func() bool {
		var err error
		st, err = b.Status(context.Background(), id)
		require.NoError(t, err)
		return st.State.Final()
	}, 10*time.Second, 10*time.Millisecond)
	return st
}

func TestRunToEnd(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	cases := []struct {
		script string
		state  backends.State
		code   int
	}{
		{"echo out; echo err >&2", backends.Done, 0},
		{"#!/bin/sh\nexit 3\n", backends.Failed, 3},
		{"kill -SEGV $$", backends.Failed, -1},
		{"kill -KILL $$", backends.Killed, -1},
	}
	for i, c := range cases {
		key := "k" + string(rune('a'+i))
		id, err := b.Submit(ctx, backends.Job{Key: key, Name: "n", Script: c.script, Parameters: []byte(`{"a":1}`)})
		require.NoError(t, err)
		st := waitFinal(t, b, id)
		assert.Equal(t, c.state, st.State, c.script)
		if c.code >= 0 {
			require.NotNil(t, st.ExitCode)
			assert.Equal(t, c.code, *st.ExitCode)
		}
		assert.False(t, st.StartTime.IsZero())
		assert.False(t, st.EndTime.Before(st.StartTime))
	}
	var out bytes.Buffer
	next, err := b.ReadLogs(ctx, "ka", 0, &out)
	require.NoError(t, err)
	assert.Equal(t, "out\nerr\n", out.String(), "stdout and stderr in one log")
	out.Reset()
	_, err = b.ReadLogs(ctx, "ka", next, &out)
	require.NoError(t, err)
	assert.Empty(t, out.String(), "reading from the offset gives nothing new")
}

func TestSubmitTwiceIsErrExists(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	_, err := b.Submit(ctx, backends.Job{Key: "dup", Script: "true"})
	require.NoError(t, err)
	_, err = b.Submit(ctx, backends.Job{Key: "dup", Script: "true"})
	require.ErrorIs(t, err, backends.ErrExists)
	id, err := b.FindByKey(ctx, "dup")
	require.NoError(t, err)
	assert.Equal(t, "dup", id)
	id, err = b.FindByKey(ctx, "nope")
	require.NoError(t, err)
	assert.Empty(t, id)
}

func TestLaunchIsIdempotent(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	counter := filepath.Join(t.TempDir(), "runs")
	id, err := b.Submit(ctx, backends.Job{Key: "once", Script: "echo run >> " + counter + "; sleep 0.2"})
	require.NoError(t, err)
	for i := 0; i < 5; i++ { // extra supervisors, as after a crash mid-launch
		require.NoError(t, b.launch(b.dir(id)))
	}
	waitFinal(t, b, id)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, b.launch(b.dir(id)), "a launch after the end")
	time.Sleep(200 * time.Millisecond)
	got, _ := os.ReadFile(counter)
	assert.Equal(t, "run\n", string(got), "the job ran exactly once")
}

func TestInterruptedLaunchIsHealedByStatus(t *testing.T) {
	b := newBackend(t)
	// A published job whose supervisor was never started (invoke died
	// between the rename and the launch).
	dir := b.dir("orphan")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script"), []byte("echo healed"), 0o700))
	sp, _ := json.Marshal(spec{Key: "orphan", Created: time.Now().Add(-2 * time.Second), Command: []string{"/bin/sh", "./script"}})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "job.json"), sp, 0o600))
	old := time.Now().Add(-2 * time.Second)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "job.json"), old, old))
	st := waitFinal(t, b, "orphan")
	assert.Equal(t, backends.Done, st.State)
}

func TestDeadSupervisorIsUnknown(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	id, err := b.Submit(ctx, backends.Job{Key: "lost", Script: "exec sleep 30"})
	require.NoError(t, err)
	var st state
	require.Eventually(t, func() bool {
		s, err := b.readState(b.dir(id))
		if err == nil && s.PID > 0 {
			st = *s
			return true
		}
		return false
	}, 5*time.Second, 10*time.Millisecond)
	// The machine "restarts": the supervisor and the job die without a word.
	require.NoError(t, syscall.Kill(st.SupervisorPID, syscall.SIGKILL))
	_ = syscall.Kill(-st.PID, syscall.SIGKILL)
	require.Eventually(t, func() bool { return !supervisorAlive(b.dir(id)) }, 5*time.Second, 10*time.Millisecond)
	got, err := b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, backends.Unknown, got.State, "never DONE when we cannot know")
}

func TestCancelBeforeAndWhileRunning(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	id, err := b.Submit(ctx, backends.Job{Key: "c1", Script: "trap 'exit 0' TERM; sleep 30 & wait"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, _ := b.Status(ctx, id)
		return st.State == backends.Running
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, b.Cancel(ctx, id))
	assert.Equal(t, backends.Killed, waitFinal(t, b, id).State, "a job that exits 0 on SIGTERM was still cancelled")
	require.NoError(t, b.Cancel(ctx, id), "cancelling a finished job is fine")
	require.ErrorIs(t, b.Cancel(ctx, "never"), backends.ErrNotFound)

	// Cancelled before its supervisor started: it never runs.
	dir := b.dir("c2")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	marker := filepath.Join(t.TempDir(), "ran")
	sp, _ := json.Marshal(spec{Key: "c2", Created: time.Now(), Command: []string{"/bin/sh", "-c", "touch " + marker}})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "job.json"), sp, 0o600))
	require.NoError(t, b.Cancel(ctx, "c2"))
	require.NoError(t, b.launch(dir))
	assert.Equal(t, backends.Killed, waitFinal(t, b, "c2").State)
	assert.NoFileExists(t, marker)
}

func TestInputsOutputsAndProperties(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	in := backends.InputFile{Name: "data/in.txt", Size: 5, Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("input")), nil
	}}
	id, err := b.Submit(ctx, backends.Job{Key: "io", Script: `cat "$BRIDGE_INPUT_DIR/in.txt" > out.txt; printf '%s|%s' "$FOO" "$1" > env.txt`,
		Properties: []byte(`{"env":{"FOO":"bar"},"args":["arg1"]}`), Inputs: []backends.InputFile{in}})
	require.NoError(t, err)
	assert.Equal(t, backends.Done, waitFinal(t, b, id).State)
	var out bytes.Buffer
	require.NoError(t, b.FetchOutput(ctx, id, "out.txt", &out))
	assert.Equal(t, "input", out.String())
	out.Reset()
	require.NoError(t, b.FetchOutput(ctx, id, "env.txt", &out))
	assert.Equal(t, "bar|arg1", out.String())
	assert.ErrorIs(t, b.FetchOutput(ctx, id, "missing.txt", &out), backends.ErrNotFound)
}

func TestValidate(t *testing.T) {
	b := newBackend(t)
	for props, ok := range map[string]bool{`{}`: true, `{"workdir":"/tmp"}`: true, `{"partition":"x"}`: false,
		`{"env":{"A":1}}`: false, `{"workdir":"/nonexistent/dir"}`: false} {
		err := b.Validate(backends.Job{Key: "v", Script: "true", Properties: []byte(props)})
		if ok {
			assert.NoError(t, err, props)
		} else {
			assert.ErrorIs(t, err, backends.ErrInvalid, props)
		}
	}
	_, err := New(backends.Config{DataDir: t.TempDir(), URL: "http://x"})
	assert.ErrorIs(t, err, backends.ErrInvalid)
}

// TestSupervisorKeepsItsLock: the supervisor's lock must outlive garbage
// collections. An unreachable *os.File is closed by the collector, which
// drops its flock: the job would then look like a dead supervisor
// (UNKNOWN). The supervisor runs in-process here so the test can force
// collections while the job runs.
func TestSupervisorKeepsItsLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gc")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	sp, _ := json.Marshal(spec{Key: "gc", Created: time.Now(), Command: []string{"/bin/sh", "-c", "sleep 1"}})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "job.json"), sp, 0o600))
	done := make(chan int, 1)
	go func() { done <- supervise(dir) }()
	require.Eventually(t, func() bool {
		b := &Backend{}
		st, err := b.readState(dir)
		return err == nil && st.PID > 0
	}, 5*time.Second, 10*time.Millisecond)
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // let finalizers run
	assert.True(t, supervisorAlive(dir), "the supervisor still holds its lock after garbage collections")
	assert.Equal(t, 0, <-done)
}

// TestFastJobsNeverLookLost: a job that ends at once, polled as fast as
// possible, is never reported UNKNOWN: its supervisor records the end
// before it lets go of its lock, and Status probes before it reads.
func TestFastJobsNeverLookLost(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		id, err := b.Submit(ctx, backends.Job{Key: "fast" + strconv.Itoa(i), Script: "true"})
		require.NoError(t, err)
		for {
			st, err := b.Status(ctx, id)
			require.NoError(t, err)
			require.NotEqual(t, backends.Unknown, st.State, "run %d: %s", i, st.Message)
			if st.State.Final() {
				break
			}
		}
	}
}

// TestReservedEndIsRead: when state.json could not record the end (a full
// disk), the end kept in the reservation is the job's state, exit code
// included; a reservation without an end is ignored.
func TestReservedEndIsRead(t *testing.T) {
	b := newBackend(t)
	dir := t.TempDir()
	require.NoError(t, reserveEnd(dir))
	started := time.Now().UTC()
	require.NoError(t, writeState(dir, &state{Started: started, PID: 1}))
	assert.Nil(t, readReserved(dir), "spaces only")
	code := 7
	ended := started.Add(time.Second)
	require.NoError(t, writeReserved(dir, &state{Started: started, Ended: &ended, ExitCode: &code}))
	fi, err := os.Stat(filepath.Join(dir, endFile))
	require.NoError(t, err)
	assert.EqualValues(t, endReserve, fi.Size(), "written in place, not grown")
	st, err := b.readState(dir)
	require.NoError(t, err)
	require.NotNil(t, st.Ended)
	assert.Equal(t, 7, *st.ExitCode)
}

// TestJobFilesAreOwnerOnly: whatever the umask of the process that runs
// invoke (022 here), every file of a local job is its user's only: the
// records, the output, and what the job itself writes, in its directory
// or in a workdir of its own choosing.
func TestJobFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	b := newBackend(t)
	work := t.TempDir()
	require.NoError(t, os.Chmod(work, 0o755))
	props, err := json.Marshal(map[string]any{"workdir": work})
	require.NoError(t, err)
	id, err := b.Submit(context.Background(), backends.Job{Key: "modes", Script: `echo out; echo own > "$BRIDGE_JOB_DIR/own.txt"; mkdir sub; echo w > sub/w.txt`,
		Properties: props, Parameters: []byte(`{"a":1}`)})
	require.NoError(t, err)
	if st := waitFinal(t, b, id); st.State != backends.Done {
		var out bytes.Buffer
		_, _ = b.ReadLogs(context.Background(), id, 0, &out)
		t.Fatalf("the job ended %s: %s", st.State, out.String())
	}
	seen := 0
	for _, top := range []string{b.root, filepath.Join(work, "sub")} {
		require.NoError(t, filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			require.NoError(t, err)
			fi, err := d.Info()
			require.NoError(t, err)
			seen++
			assert.Zero(t, fi.Mode().Perm()&0o077, "%s is %v: another user may read it", p, fi.Mode().Perm())
			return nil
		}))
	}
	assert.Greater(t, seen, 6, "the walk found the job's files")
}
