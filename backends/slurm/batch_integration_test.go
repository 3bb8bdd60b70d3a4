package slurm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

// byteCounter counts the response bytes read through it.
type byteCounter struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *byteCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, &c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// batchJobs submits a job that succeeds, one that fails, one that runs
// (or waits for a node), and one that is held, and waits until the first
// two have ended. It cancels the others at the end of the test.
func batchJobs(t *testing.T, b *Backend) map[string]string {
	t.Helper()
	ctx := context.Background()
	ids := map[string]string{}
	for name, c := range map[string]struct{ script, props string }{
		"done":    {"#!/bin/sh\ntrue\n", `{"time_limit":5}`},
		"failed":  {"#!/bin/sh\nexit 3\n", `{"time_limit":5}`},
		"running": {"#!/bin/sh\nsleep 300\n", `{"time_limit":10}`},
		"held":    {"#!/bin/sh\ntrue\n", `{"hold":true}`},
	} {
		id, err := b.Submit(ctx, backends.Job{Name: "batch-" + name, Key: newKey(), Script: c.script, Properties: json.RawMessage(c.props)})
		require.NoError(t, err, name)
		ids[name] = id
		if name == "running" || name == "held" {
			t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
		}
	}
	waitFor(t, b, ids["done"], 60*time.Second, final)
	waitFor(t, b, ids["failed"], 60*time.Second, final)
	// Running, so that it does not start between StatusMany and Status.
	waitFor(t, b, ids["running"], 60*time.Second, func(st backends.Status) bool { return st.State == backends.Running })
	return ids
}

// TestStatusManyReal: on the real 22.05, 24.11 and 26.05 (every API), one
// StatusMany in one request says of each job what Status says and leaves
// the unknown id out; on 24.11 and 26.05 (jobs/state/) it says PENDING of the held job, which it
// cannot tell from a pending one.
func TestStatusManyReal(t *testing.T) {
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			b, ct := rs.backend(t, nil)
			ctx := context.Background()
			v, err := b.version(ctx)
			require.NoError(t, err)
			ids := batchJobs(t, b)
			asked := []string{ids["done"], ids["failed"], ids["running"], ids["held"], "99999999"}

			before := ct.total()
			got, err := b.StatusMany(ctx, asked)
			require.NoError(t, err)
			assert.Equal(t, 1, ct.total()-before, "requests for one StatusMany of %d ids (%s)", len(asked), v)
			for name, id := range ids {
				want, err := b.Status(ctx, id)
				require.NoError(t, err)
				if name == "held" && v.jobStates() {
					assert.Equal(t, backends.Suspended, want.State)
					assert.Equal(t, backends.Pending, got[id].State, "jobs/state/ says PENDING of a held job: a coarse summary")
					continue
				}
				require.Contains(t, got, id, name)
				assert.Equal(t, want.State, got[id].State, name)
				assert.Equal(t, want.Raw, got[id].Raw, name)
			}
			assert.NotContains(t, got, "99999999")
			assert.Equal(t, backends.Done, got[ids["done"]].State)
			assert.Equal(t, backends.Failed, got[ids["failed"]].State)
			assert.Equal(t, backends.Running, got[ids["running"]].State)

			// Cancelled, the held job is reported on every version.
			require.NoError(t, b.Cancel(ctx, ids["held"]))
			waitFor(t, b, ids["held"], 60*time.Second, final)
			before = ct.total()
			got, err = b.StatusMany(ctx, asked)
			require.NoError(t, err)
			assert.Equal(t, 1, ct.total()-before)
			assert.Len(t, got, 4)
			assert.Equal(t, backends.Killed, got[ids["held"]].State)
		})
	}
}

// TestStatusManyRealCost measures, on each real cluster's default API,
// one StatusMany of 20 ended jobs against 20 Status calls: requests,
// response bytes and time.
func TestStatusManyRealCost(t *testing.T) {
	for _, rs := range realSlurms(t) {
		if rs.name != "22.05" && rs.name != "24.11" && rs.name != "26.05" {
			continue
		}
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			ct := &countingTransport{n: map[string]int{}, next: http.DefaultTransport}
			bc := &byteCounter{next: ct}
			be, err := New(backends.Config{URL: rs.url, Credentials: rs.creds, HTTPClient: &http.Client{Transport: bc}})
			require.NoError(t, err)
			b := be.(*Backend)
			ctx := context.Background()
			v, err := b.version(ctx)
			require.NoError(t, err)
			var ids []string
			for i := 0; i < 20; i++ {
				id, err := b.Submit(ctx, backends.Job{Name: "batch-cost", Key: newKey(), Script: "#!/bin/sh\ntrue\n"})
				require.NoError(t, err)
				ids = append(ids, id)
			}
			for _, id := range ids {
				waitFor(t, b, id, 2*time.Minute, final)
			}
			measure := func(fn func()) (time.Duration, int, int64) {
				r0, b0 := ct.total(), bc.n.Load()
				start := time.Now()
				fn()
				return time.Since(start), ct.total() - r0, bc.n.Load() - b0
			}
			var manyT, oneT []time.Duration
			var manyR, oneR int
			var manyB, oneB int64
			for round := 0; round < 5; round++ {
				d, r, n := measure(func() {
					got, err := b.StatusMany(ctx, ids)
					require.NoError(t, err)
					require.Len(t, got, len(ids))
				})
				manyT, manyR, manyB = append(manyT, d), r, n
				d, r, n = measure(func() {
					for _, id := range ids {
						_, err := b.Status(ctx, id)
						require.NoError(t, err)
					}
				})
				oneT, oneR, oneB = append(oneT, d), r, n
			}
			assert.Equal(t, 1, manyR)
			assert.Equal(t, len(ids), oneR)
			med := func(ds []time.Duration) time.Duration {
				sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
				return ds[len(ds)/2].Round(time.Microsecond)
			}
			t.Logf("%s (%s), 20 ended jobs: one StatusMany %s, %d request(s), %d bytes; 20 Status %s, %d requests, %d bytes (medians of 5)",
				rs.name, v, med(manyT), manyR, manyB, med(oneT), oneR, oneB)
		})
	}
}

// TestStatusManySSH: over SSH, StatusMany says of each job what Status
// says, leaves an unknown id out, and costs one squeue plus one sacct for
// the id squeue does not list.
func TestStatusManySSH(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, 3*time.Minute)
	ids := map[string]string{}
	for name, c := range map[string]struct{ script, props string }{
		"done":    {"#!/bin/sh\ntrue\n", `{}`},
		"failed":  {"#!/bin/sh\nexit 3\n", `{}`},
		"running": {"#!/bin/sh\nsleep 300\n", `{"time":"10:00"}`},
		"held":    {"#!/bin/sh\ntrue\n", `{"begin":"now+1hour"}`},
	} {
		id, err := b.Submit(ctx, backends.Job{Name: "batch-" + name, Key: sshKey(t), Script: c.script, Properties: json.RawMessage(c.props)})
		require.NoError(t, err, name)
		ids[name] = id
		t.Cleanup(func() { _ = b.Cancel(context.Background(), id) })
	}
	// The backend submits no held job; hold it as its user would.
	res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"scontrol", "hold", ids["held"]}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "scontrol hold: %s", res.Stderr)
	sshFollow(t, b, ids["done"], backends.Done)
	sshFollow(t, b, ids["failed"], backends.Failed)
	sshFollow(t, b, ids["running"], backends.Running)
	asked := []string{ids["done"], ids["failed"], ids["running"], ids["held"], "99999999"}
	before := b.ssh.Commands()
	got, err := b.StatusMany(ctx, asked)
	require.NoError(t, err)
	cmds := b.ssh.Commands() - before
	for name, id := range ids {
		want, err := b.Status(ctx, id)
		require.NoError(t, err)
		require.Contains(t, got, id, name)
		assert.Equal(t, want.State, got[id].State, name)
		assert.Equal(t, want.Raw, got[id].Raw, name)
	}
	assert.NotContains(t, got, "99999999")
	assert.Len(t, got, 4)
	assert.Equal(t, backends.Suspended, got[ids["held"]].State)
	assert.Equal(t, 2, cmds, "squeue, then sacct for the unknown id")

	before = b.ssh.Commands()
	start := time.Now()
	got, err = b.StatusMany(ctx, asked[:4])
	many := time.Since(start)
	require.NoError(t, err)
	assert.Len(t, got, 4)
	assert.Equal(t, 1, b.ssh.Commands()-before, "squeue alone when it lists every id")
	before = b.ssh.Commands()
	start = time.Now()
	for _, id := range asked[:4] {
		_, err := b.Status(ctx, id)
		require.NoError(t, err)
	}
	t.Logf("over SSH, 4 jobs: one StatusMany %s, 1 command; 4 Status %s, %d commands",
		many.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), b.ssh.Commands()-before)
}
