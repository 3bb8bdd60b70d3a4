package record_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

func TestStartEstimateRoundTrip(t *testing.T) {
	p := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, e := range []record.StartEstimate{
		{Cluster: "hpc-1", Partition: "debug", Predicted: p},
		{Cluster: "hpc-1", Partition: "debug", Predicted: p, Observed: p.Add(90 * time.Second)},
		{Cluster: "b", Observed: p},
	} {
		got, err := record.ParseStartEstimate(e.String())
		require.NoError(t, err, e.String())
		assert.Equal(t, e, *got)
	}
	e, _ := record.ParseStartEstimate(record.StartEstimate{Cluster: "a", Predicted: p, Observed: p.Add(90 * time.Second)}.String())
	secs, ok := e.ErrorSeconds()
	assert.True(t, ok)
	assert.EqualValues(t, 90, secs)
}

// The record is user-editable: what bridge-runner never writes is an
// error naming the key, never trusted.
func TestStartEstimateRefusesWhatItNeverWrites(t *testing.T) {
	for _, v := range []string{"garbage", "cluster=a", "cluster=a predicted=tomorrow", "cluster=a predicted=unknown x=1",
		"cluster=a cluster=b predicted=unknown", "cluster=a predicted=unknown observed=soon"} {
		_, err := record.ParseStartEstimate(v)
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), record.KeyStartEstimate)
	}
	e, err := record.ParseStartEstimate("")
	assert.NoError(t, err)
	assert.Nil(t, e)
}

func TestPlausibleStart(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for est, ok := range map[time.Time]bool{
		at.Add(-30 * time.Second):                   true, // clock skew: "now"
		at.Add(time.Hour):                           true,
		at.Add(-time.Hour):                          false, // before the placement
		time.Date(4068, 1, 1, 0, 0, 0, 0, time.UTC): false,
		at.Add(record.MaxEstimateAhead + time.Hour): false,
		{}: false,
	} {
		assert.Equal(t, ok, !record.PlausibleStart(est, at).IsZero(), "%s", est)
	}
}

// A target's startErrors that the operator never writes are refused as
// the field they are, naming the fix.
func TestTargetStartErrorsAreChecked(t *testing.T) {
	spec := func(errs string) *record.Spec {
		return &record.Spec{Backend: "slurm", ResourceURL: "http://127.0.0.1:6820", JobScript: "#!/bin/sh\ntrue\n",
			Targets: `[{"name":"a"},{"name":"b","resourceURL":"http://127.0.0.2:6820","credentials":"b","startErrors":` + errs + `}]`}
	}
	d, err := spec(`[{"partition":"debug","medianSeconds":60,"lowSeconds":-5,"highSeconds":300,"samples":4}]`).Parse()
	require.NoError(t, err)
	assert.Equal(t, 60*time.Second, d.Targets[1].StartErrors[0].Correction())
	for _, bad := range []string{
		`[{"partition":"debug","medianSeconds":600,"lowSeconds":-5,"highSeconds":300,"samples":4}]`,
		`[{"partition":"debug","samples":4},{"partition":"debug","samples":1}]`,
		`[{"partition":"debug","samples":-1}]`,
	} {
		_, err := spec(bad).Parse()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "targets[1].startErrors")
		assert.Contains(t, err.Error(), "remove it")
	}
}
