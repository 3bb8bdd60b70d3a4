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

// Two targets whose raw estimates rank a first are ranked b first once
// a's recorded errors say a starts late; an unknown error, or too few
// errors, changes nothing.
func TestLearntErrorsReorderEstimates(t *testing.T) {
	now := time.Now()
	late := record.LearnStartError("p", []int64{1500, 1800, 2100, 1700, 2400}) // a starts ~30m late
	for _, c := range []struct {
		name string
		errs []record.StartError
		want int
	}{
		{"a starts late: b first", []record.StartError{late}, 1},
		{"no error learnt: a first", nil, 0},
		{"another partition's error: a first", []record.StartError{record.LearnStartError("other", []int64{1800, 1800, 1800})}, 0},
		{"too few errors: a first", []record.StartError{record.LearnStartError("p", []int64{3600, 3600})}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := load(0, 4, 2), load(0, 4, 2)
			a.EstimatedStart, b.EstimatedStart = now.Add(10*time.Minute), now.Add(20*time.Minute)
			cs := cands(a, b)
			raw, err := choose(record.PolicyEarliestStart, cs)
			require.NoError(t, err)
			require.Equal(t, 0, raw, "the raw estimates rank a first")
			cs[0].target.StartErrors = c.errs
			correctByLearnt(cs)
			got, err := choose(record.PolicyEarliestStart, cs)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
			assert.True(t, a.EstimatedStart.Equal(cs[0].schedulerStart()), "the scheduler's own estimate is kept for the record")
		})
	}
}

// A correction never moves an estimate outside the range of the errors
// observed, whatever the median handed in says.
func TestCorrectionIsBounded(t *testing.T) {
	for _, c := range []struct {
		se   record.StartError
		want time.Duration
	}{
		{record.StartError{Partition: "p", MedianSeconds: 600, LowSeconds: 60, HighSeconds: 900, Samples: 5}, 10 * time.Minute},
		{record.StartError{Partition: "p", MedianSeconds: 99999, LowSeconds: -60, HighSeconds: 120, Samples: 5}, 2 * time.Minute},
		{record.StartError{Partition: "p", MedianSeconds: -99999, LowSeconds: -60, HighSeconds: 120, Samples: 5}, -time.Minute},
		{record.StartError{Partition: "p", MedianSeconds: 600, LowSeconds: 60, HighSeconds: 900, Samples: 2}, 0},
		{record.StartError{Partition: "p", MedianSeconds: 600, LowSeconds: 900, HighSeconds: 60, Samples: 5}, 0},
	} {
		assert.Equal(t, c.want, c.se.Correction(), "%+v", c.se)
	}
	se := record.LearnStartError("p", []int64{9, 1, 5, 3})
	assert.Equal(t, record.StartError{Partition: "p", MedianSeconds: 4, LowSeconds: 1, HighSeconds: 9, Samples: 4}, se)
	many := make([]int64, 0, 30)
	for i := range 30 {
		many = append(many, int64(i))
	}
	se = record.LearnStartError("p", many)
	assert.Equal(t, record.LearnWindow, se.Samples, "the newest LearnWindow errors count")
	assert.EqualValues(t, 30-record.LearnWindow, se.LowSeconds)
}
