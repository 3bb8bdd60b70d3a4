package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// The observed start is written once: the backend's start time when it
// tells one, else the time the job is first seen running; a waiting job,
// or one that ended without a start, observes nothing.
func TestObservedStart(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	pred := record.StartEstimate{Cluster: "a", Partition: "debug", Predicted: now.Add(-time.Minute)}.String()
	told := now.Add(-30 * time.Second)
	for _, c := range []struct {
		name     string
		recorded string
		st       backends.Status
		want     time.Time // zero: nothing to write
	}{
		{"the backend's start time", pred, backends.Status{State: backends.Running, StartTime: told}, told},
		{"first seen running", pred, backends.Status{State: backends.Running}, now},
		{"ended with a start time", pred, backends.Status{State: backends.Done, StartTime: told}, told},
		{"pending", pred, backends.Status{State: backends.Pending}, time.Time{}},
		{"ended without a start", pred, backends.Status{State: backends.Failed}, time.Time{}},
		{"no prediction", "", backends.Status{State: backends.Running}, time.Time{}},
		{"observed already", record.StartEstimate{Cluster: "a", Predicted: now, Observed: told}.String(), backends.Status{State: backends.Running}, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := observedStart(c.recorded, c.st, now)
			if c.want.IsZero() {
				assert.Empty(t, got)
				return
			}
			e, err := record.ParseStartEstimate(got)
			require.NoError(t, err)
			require.NotNil(t, e)
			assert.True(t, c.want.Equal(e.Observed), "observed %s, want %s", e.Observed, c.want)
			assert.Equal(t, "debug", e.Partition)
		})
	}
}

// Absurd estimates rank nothing: one before the placement or years after
// it is cleared before the policy chooses.
func TestAbsurdEstimatesRankNothing(t *testing.T) {
	now := time.Now()
	for _, absurd := range []time.Time{now.Add(-time.Hour), time.Date(4068, 1, 1, 0, 0, 0, 0, time.UTC)} {
		a, b := load(0, 4, 2), load(0, 4, 2)
		a.EstimatedStart, b.EstimatedStart = now.Add(time.Hour), absurd
		cs := cands(a, b)
		distrustAbsurd(cs, now)
		got, err := choose(record.PolicyEarliestStart, cs)
		require.NoError(t, err)
		assert.Equal(t, 0, got, "equal backlogs: the first listed, whatever the absurd estimate says")
		assert.False(t, cs[0].absurdStart)
		assert.True(t, cs[1].absurdStart)
		assert.True(t, cs[1].load.EstimatedStart.IsZero())
	}
}
