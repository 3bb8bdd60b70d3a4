package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/slurm"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestReplaceOnTwoRealSlurms: a step with replaceAfter=5s and two
// targets, the suite's real Slurm 22.05 ("old") and 24.11 ("young"),
// partition short. The step's job waits on old whatever else runs there:
// old's target begins it an hour from now (jobproperties begin_time, a
// device of the test's own: it waits with no CPU of a shared cluster). At placement
// young has a held job of the test's waiting in short, so it does not start
// the job now either and the ordered policy puts it on old; then the test
// cancels that held job, young starts the job now, and the step moves there
// and ends DONE. Invoke is killed with SIGKILL at each step of the move (and
// at the new target's submit), then restarted: each time exactly one of the
// step's jobs ever ran, on young, and the job left on old was cancelled
// without ever starting, as the record's status.moves says.
func TestReplaceOnTwoRealSlurms(t *testing.T) {
	clearEnv(t)
	old, young := twoSlurms(t)
	for _, point := range append(append([]string{""}, runner.MoveCrashPoints...), "after-submit", "after-id") {
		t.Run(cmpOr(point, "no-crash"), func(t *testing.T) {
			unfill := holdShort(t, young)
			name := fmt.Sprintf("mv-%d", time.Now().UnixNano()%1_000_000_000)
			state := t.TempDir()
			args := []string{"--state-dir", state, "--job-name", name, "--backend", "slurm", "--placement", "ordered",
				"--targets", heldOnOld(old, young), "--job-properties", `{"partition":"short","time_limit":2}`,
				"--script", "#!/bin/sh\necho moved\n", "--replace-after", "5s", "--update-interval", "1",
				"--submit-lease", "3s", "--watcher=false"}
			go func() { // young frees up once the step is placed (on old)
				store := record.NewFileStore(state, name)
				for range 600 {
					if rec, err := store.Get(context.Background()); err == nil && rec.Data[record.KeyPlacement] != "" {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				unfill()
			}()
			out := invokeThroughCrashes(t, point, args)
			rec, err := record.NewFileStore(state, name).Get(context.Background())
			require.NoError(t, err)
			assert.Equal(t, "DONE", rec.Data[record.KeyJobStatus], out)
			p, _ := record.ParsePlaced(rec.Data[record.KeyPlacement])
			require.NotNil(t, p)
			assert.Equal(t, "young", p.Target, out)
			moves, err := record.ParseMoves(rec.Data[record.KeyMoves])
			require.NoError(t, err)
			require.Len(t, moves, 1, out)
			assert.Equal(t, "old", moves[0].Target)
			t.Logf("moved: %+v", moves[0])

			onOld, onYoung := slurmJobsNamed(t, old, name), slurmJobsNamed(t, young, name)
			assert.Equal(t, map[string]string{moves[0].ID: "CANCELLED, never started"}, onOld, "old: the one job, cancelled while it waited")
			assert.Equal(t, map[string]string{rec.Data[record.KeyID]: "COMPLETED"}, onYoung, "young: the one job that ran")
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// invokeThroughCrashes runs invoke with BRIDGE_CRASH_AT=point until it
// ends without being killed (three killed runs at most, then without the
// hook), and returns the last run's output.
func invokeThroughCrashes(t *testing.T, point string, args []string) string {
	t.Helper()
	for i := 0; ; i++ {
		var env []string
		if point != "" && i < 3 {
			env = []string{"BRIDGE_CRASH_AT=" + point}
		}
		cmd, out := startInvoke(t, env, args...)
		var late atomic.Bool // a ceiling, so that a cluster busy with others' jobs fails the test rather than hangs it
		stop := time.AfterFunc(3*time.Minute, func() { late.Store(true); _ = cmd.Process.Kill() })
		err := cmd.Wait()
		stop.Stop()
		require.False(t, late.Load(), "invoke still running after 3 min (did 24.11's partition short stay full?): %s", out)
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
			require.NotEmpty(t, env, "killed without the hook: %s", out)
			t.Logf("run %d died at %s", i+1, point)
			continue
		}
		require.NoError(t, err, "run %d: %s", i+1, out)
		if point != "" {
			require.Greater(t, i, 0, "invoke never reached %s: %s", point, out)
		}
		return out.String()
	}
}

// heldOnOld is twoTargets with old's jobs begun an hour from now (22.05's
// v0.0.38 takes sbatch's words), so the step's job waits on old (PENDING,
// BeginTime) however busy or idle old is.
func heldOnOld(old, young slurmCluster) string {
	return fmt.Sprintf(`[{"name":"old","resourceURL":%q,"credentials":%q,"jobproperties":{"begin_time":"now+3600"}},{"name":"young","resourceURL":%q,"credentials":%q}]`,
		old.url, old.creds, young.url, young.creds)
}

// holdShort submits one held job to c's partition short (waiting there, so
// that c does not start another job now: placement's startsNow wants
// nothing waiting) and returns a function that cancels it (also called
// when the test ends). It needs no CPU of the shared cluster.
func holdShort(t *testing.T, c slurmCluster) func() {
	be, err := slurm.New(backends.Config{URL: c.url, Credentials: runner.DirCredentials{Dir: c.creds, Secrets: &runner.Secrets{}}})
	require.NoError(t, err)
	id, err := be.Submit(context.Background(), backends.Job{Name: "mv-held", Key: fmt.Sprintf("mv-held-%d", time.Now().UnixNano()),
		Script: "#!/bin/sh\nsleep 600\n", Properties: json.RawMessage(`{"partition":"short","time_limit":10,"cpus_per_task":1,"hold":true}`)})
	require.NoError(t, err)
	var once sync.Once
	unfill := func() { once.Do(func() { _ = be.Cancel(context.Background(), id) }) }
	t.Cleanup(unfill)
	return unfill
}

// slurmJobsNamed is every job slurmctld knows on c with this name, by id:
// its state, and for a cancelled one whether it ever started (a pending
// job cancelled has its start time set to its end time).
func slurmJobsNamed(t *testing.T, c slurmCluster, name string) map[string]string {
	t.Helper()
	var jr struct {
		Jobs []struct {
			ID    json.Number     `json:"job_id"`
			Name  string          `json:"name"`
			State json.RawMessage `json:"job_state"` // a string (v0.0.38), a list later
			Start json.RawMessage `json:"start_time"`
			End   json.RawMessage `json:"end_time"`
		} `json:"jobs"`
	}
	getSlurmREST(t, c, "jobs/", &jr)
	out := map[string]string{}
	for _, j := range jr.Jobs {
		if j.Name != name {
			continue
		}
		st := strings.Trim(strings.TrimSpace(strings.Trim(strings.TrimSpace(string(j.State)), "[]")), `"`)
		if st == "CANCELLED" {
			if slurmNumber(j.Start) == slurmNumber(j.End) {
				st += ", never started"
			} else {
				st += " after it started"
			}
		}
		out[j.ID.String()] = st
	}
	return out
}

// slurmNumber reads a number (v0.0.38) or {"number": n} (later).
func slurmNumber(raw json.RawMessage) string {
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	var set struct {
		Number json.Number `json:"number"`
	}
	_ = json.Unmarshal(raw, &set)
	return set.Number.String()
}

// TestReplaceAfterBadIsExit2: a replaceAfter that is no duration, out of
// bounds, or given with one target is exit 2 naming the field, before any
// target is asked anything (none listens here) or anything is submitted.
func TestReplaceAfterBadIsExit2(t *testing.T) {
	clearEnv(t)
	two := fmt.Sprintf(`[{"name":"a","resourceURL":"http://%s"},{"name":"b","resourceURL":"http://%s"}]`, closedPort(t), closedPort(t))
	one := fmt.Sprintf(`[{"name":"a","resourceURL":"http://%s"}]`, closedPort(t))
	for _, c := range []struct{ targets, after string }{{two, "soon"}, {two, "0.2"}, {two, "9000h"}, {one, "10m"}} {
		res := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "bad-replace", "--backend", "slurm",
			"--targets", c.targets, "--replace-after", c.after, "--script", "#!/bin/sh\ntrue\n")
		assert.Equal(t, ExitInvalid, res.code, "replaceAfter %q: %s", c.after, res.stderr)
		assert.Contains(t, res.stderr, "replaceAfter", c.after)
	}
}
