package slurm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

// TestSSHLoadFromAMeasureIsTheProbe: over SSH, on the real Slurm of the
// login node, a step judging its job against the measure a cluster's agent
// published (sinfo and squeue, two commands) gets the Load its own probe
// gets but for sbatch --test-only's estimate (for the default partition, a
// named one, an array, and an unknown partition, which is invalid input
// either way), with no command; a measure it cannot read is neither
// invalid nor transient (the step then probes).
func TestSSHLoadFromAMeasureIsTheProbe(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, 3*time.Minute)
	sleeper := "#!/bin/sh\nsleep 60\n"
	run, err := b.Submit(ctx, probeJob(sleeper, `{"begin":"now+1hour"}`)) // a job in the queue
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Cancel(context.Background(), run) })
	arr := &backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 9}}, MaxParallel: 2}
	for _, c := range []struct {
		props string
		array *backends.Array
	}{{`{}`, nil}, {`{"partition":"debug"}`, nil}, {`{"cpus_per_task":2}`, arr}, {`{"partition":"no-such"}`, nil}} {
		job := probeJob(sleeper, c.props)
		m, want, werr := stableProbe(t, ctx, b, job, c.array)
		assert.NotContains(t, m, "\n", "one line")
		before := b.ssh.Commands()
		got, gerr := b.LoadFrom(m, job, c.array)
		assert.Equal(t, before, b.ssh.Commands(), "%s: LoadFrom runs no command", c.props)
		assert.Equal(t, werr != nil, gerr != nil, "%s: %v / %v", c.props, werr, gerr)
		if werr != nil {
			assert.ErrorIs(t, gerr, backends.ErrInvalid, c.props)
			continue
		}
		want.EstimatedStart = time.Time{} // sbatch --test-only: the job's own question
		assert.Equal(t, want, got, c.props)
		assert.True(t, got.TotalCPUs > 0 && got.PendingJobs >= 1, "%s: the measure has the cluster and its queue: %+v", c.props, got)
	}
	for _, bad := range []string{"", "{}", `{"f":2,"p":[{"n":"debug"}]}`, "api=v0.0.45"} {
		_, err := b.LoadFrom(bad, probeJob(sleeper, `{}`), nil)
		require.Error(t, err, bad)
		assert.False(t, errors.Is(err, backends.ErrInvalid) || errors.Is(err, backends.ErrTransient), bad)
	}
}

// stableProbe measures, probes and measures again until both measures
// agree (other tests share the cluster and may change it in between), and
// returns the measure and the probe's answer. The measure costs sinfo and
// squeue, two commands.
func stableProbe(t *testing.T, ctx context.Context, b *SSHBackend, job backends.Job, array *backends.Array) (string, backends.Load, error) {
	t.Helper()
	for try := 0; ; try++ {
		before := b.ssh.Commands()
		m1, err := b.MeasureLoad(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, b.ssh.Commands()-before, "commands per measure")
		want, werr := b.ProbeLoad(ctx, job, array)
		m2, err := b.MeasureLoad(ctx)
		require.NoError(t, err)
		if m1 == m2 {
			return m1, want, werr
		}
		require.Less(t, try, 20, "the cluster never kept still between two measures")
		time.Sleep(time.Second)
	}
}
