package slurm

// Real events on the real clusters (22.05 and the chrooted 24.11): a job
// requeued by an administrator, a time limit cut short, and a node set
// down and back. They decide what the failure categories and the requeue
// look like from what Slurm really reports, not from hand-written states.
// They need root (scontrol as the Slurm administrator).

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// eventSlurms are the real clusters, once each (the API version does not
// change what Slurm does).
func eventSlurms(t *testing.T) []*realSlurm {
	t.Helper()
	var out []*realSlurm
	for _, rs := range realSlurms(t) {
		if !strings.Contains(rs.name, "-v0.0.") {
			out = append(out, rs)
		}
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the real-event tests run scontrol as the Slurm administrator: run them as root")
		}
		t.Skip("needs root to run scontrol as the Slurm administrator")
	}
	return out
}

// scontrol runs scontrol as root on rs's cluster: the chroot's own for the
// 24.11, this machine's (SLURM_CONF from the env file) for the 22.05.
func scontrol(t *testing.T, rs *realSlurm, args ...string) string {
	t.Helper()
	out, err := scontrolErr(rs, args...)
	require.NoError(t, err, "scontrol %v: %s", args, out)
	return out
}

// scontrolErr runs scontrol as scontrol does and returns its error instead
// of failing the test.
func scontrolErr(rs *realSlurm, args ...string) (string, error) {
	cmd := exec.Command("scontrol", args...)
	if rs.root != "" {
		cmd = exec.Command("/usr/sbin/chroot", append([]string{rs.root, "scontrol"}, args...)...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/bin", "HOME=/tmp"}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// follow polls the job until it is final or limit passes, and returns the
// states seen in order (each change once) and the last status.
func follow(t *testing.T, b *Backend, id string, limit time.Duration, until func(backends.Status) bool) ([]string, backends.Status) {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(limit)
	for {
		st, err := b.Status(context.Background(), id)
		require.NoError(t, err)
		s := string(st.State) + "/" + st.Raw
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
			t.Logf("job %s: %s (%s) category %q", id, s, st.Reason, st.FailureCategory())
		}
		if until(st) {
			return seen, st
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %v after %s", id, seen, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// restartScript ends at once when Slurm runs it again after a requeue
// (SLURM_RESTART_COUNT is set then), and runs long the first time.
const restartScript = "#!/bin/sh\nif [ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ]; then echo \"run ${SLURM_RESTART_COUNT}\"; exit 0; fi\nsleep 300\n"

// TestRealRequeueIsNotTheEnd: a running job requeued by `scontrol requeue`
// is not over: it is PENDING again (never a final state in between), runs
// again, and ends DONE; no failure category is ever reported on the way.
func TestRealRequeueIsNotTheEnd(t *testing.T) {
	for _, rs := range eventSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			b, _ := rs.backend(t, nil)
			ctx := context.Background()
			id, err := b.Submit(ctx, backends.Job{Name: "requeue", Key: newKey(), Script: restartScript,
				Properties: json.RawMessage(`{"time_limit":10,"current_working_directory":"/tmp"}`)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
			waitFor(t, b, id, 90*time.Second, func(st backends.Status) bool { return st.State == backends.Running })
			scontrol(t, rs, "requeue", id)
			seen, st := follow(t, b, id, 5*time.Minute, final)
			assert.Equal(t, backends.Done, st.State, "states %v", seen)
			assert.Empty(t, st.FailureCategory())
			// Seen on both: the job, RUNNING before the requeue, is
			// COMPLETING (22.05's v0.0.38 shows the flag alone: RUNNING;
			// 24.11 PENDING,COMPLETING), then PENDING with reason
			// BeginTime for about two minutes, then runs again.
			pendingAgain := false
			for _, s := range seen {
				pendingAgain = pendingAgain || strings.HasPrefix(s, "PENDING/")
			}
			assert.True(t, pendingAgain, "a requeued job is PENDING again: %v", seen)
			for _, s := range seen[:len(seen)-1] {
				assert.False(t, backends.State(strings.SplitN(s, "/", 2)[0]).Final(), "no final state before the real end: %v", seen)
			}
		})
	}
}

// TestRealTimeLimitIsTimeout: a running job whose time limit an
// administrator cuts (scontrol update timelimit) ends FAILED with Slurm's
// TIMEOUT, the category timeout (exit 1, not 5). Slurm keeps limits in
// whole minutes (one second is one minute) and checks them every 30 s, so
// this takes 80 s on both clusters, no faster than --time=1: no real way
// to a TIMEOUT within a minute of the start was found.
func TestRealTimeLimitIsTimeout(t *testing.T) {
	for _, rs := range eventSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			b, _ := rs.backend(t, nil)
			ctx := context.Background()
			id, err := b.Submit(ctx, backends.Job{Name: "timelimit", Key: newKey(), Script: "#!/bin/sh\nsleep 300\n",
				Properties: json.RawMessage(`{"time_limit":10,"current_working_directory":"/tmp"}`)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
			waitFor(t, b, id, 90*time.Second, func(st backends.Status) bool { return st.State == backends.Running })
			scontrol(t, rs, "update", "jobid="+id, "timelimit=00:00:01")
			seen, st := follow(t, b, id, 2*time.Minute, final)
			assert.Equal(t, backends.Failed, st.State, "states %v", seen)
			assert.Equal(t, "TIMEOUT", st.Raw)
			assert.Equal(t, backends.CategoryTimeout, st.FailureCategory())
		})
	}
}

var nodeListRE = regexp.MustCompile(`(?:^|\s)NodeList=(\S+)`)

// TestRealNodeDownIsInfrastructure: the node of two running jobs is set
// down. The job that may not be requeued ends FAILED with NODE_FAIL, the
// category infrastructure (exit 5); the one that may (Slurm's default) is
// PENDING again, and once the node is back it runs again and ends DONE.
// The node is resumed as soon as the first job ended, and again in
// cleanup. Setting the cluster's only node down ends or requeues every job
// running on it, including other tests' jobs, so this runs only when
// BRIDGE_TEST_NODE_DOWN=1 says that nothing else uses the clusters.
func TestRealNodeDownIsInfrastructure(t *testing.T) {
	if os.Getenv("BRIDGE_TEST_NODE_DOWN") != "1" {
		t.Skip("sets the clusters' only node down, failing other tests' jobs: set BRIDGE_TEST_NODE_DOWN=1 when nothing else uses them")
	}
	for _, rs := range eventSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel() // two clusters, each with its own node
			b, _ := rs.backend(t, nil)
			ctx := context.Background()
			props := json.RawMessage(`{"time_limit":10,"current_working_directory":"/tmp","requeue":false}`)
			once, err := b.Submit(ctx, backends.Job{Name: "nodefail", Key: newKey(), Script: "#!/bin/sh\nsleep 300\n", Properties: props})
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Cancel(context.Background(), once) })
			again, err := b.Submit(ctx, backends.Job{Name: "nodefail-requeue", Key: newKey(), Script: restartScript,
				Properties: json.RawMessage(`{"time_limit":10,"current_working_directory":"/tmp"}`)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Cancel(context.Background(), again) })
			for _, id := range []string{once, again} {
				waitFor(t, b, id, 90*time.Second, func(st backends.Status) bool { return st.State == backends.Running })
			}
			m := nodeListRE.FindStringSubmatch(scontrol(t, rs, "show", "job", "--oneliner", once))
			require.NotNil(t, m, "the running job's NodeList")
			node := m[1]
			// Resuming is refused ("Invalid node state specified") while
			// the down node still completes its jobs (DOWN+COMPLETING) and
			// once it is up again: only a down node needs it, and it is
			// tried until the node is up.
			resume := func() {
				for end := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
					if !strings.Contains(scontrol(t, rs, "show", "node", node), "DOWN") {
						return
					}
					out, err := scontrolErr(rs, "update", "nodename="+node, "state=resume")
					if err == nil || time.Now().After(end) {
						require.NoError(t, err, "resume node %s: %s", node, out)
						return
					}
				}
			}
			scontrol(t, rs, "update", "nodename="+node, "state=down", "reason=bridge-runner-test")
			t.Cleanup(resume)
			seen, st := follow(t, b, once, 2*time.Minute, final)
			resume()
			assert.Equal(t, backends.Failed, st.State, "states %v", seen)
			assert.Equal(t, "NODE_FAIL", st.Raw)
			assert.Equal(t, backends.CategoryInfrastructure, st.FailureCategory())

			seen, st = follow(t, b, again, 5*time.Minute, final)
			assert.Equal(t, backends.Done, st.State, "the requeued job runs again and ends DONE: %v", seen)
			for _, s := range seen[:len(seen)-1] {
				assert.False(t, backends.State(strings.SplitN(s, "/", 2)[0]).Final(), "no final state before the real end: %v", seen)
			}
		})
	}
}
