package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// A placement that used a start estimate records it with the chosen
// target's cluster and partition, and the observed start once the job
// runs (the backend's own start time), so the estimate's error can be
// measured.
func TestPlacementRecordsPredictedAndObservedStart(t *testing.T) {
	tc := newTwoClusters(t)
	predicted := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	a, b := loadOf(0, 4, 2), loadOf(0, 4, 2)
	a.EstimatedStart = predicted
	// Before the placement: absurd. Trusted raw, it would win.
	b.EstimatedStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	tc.a.SetLoad(a, nil)
	tc.b.SetLoad(b, nil)
	iv := tc.invoker("")
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "a", iv.Result().Target, "b's estimate before the placement is not trusted")

	e, err := record.ParseStartEstimate(tc.record()[record.KeyStartEstimate])
	require.NoError(t, err)
	require.NotNil(t, e, "the placement used an estimate: it is recorded")
	assert.Equal(t, "a", e.Cluster)
	assert.Equal(t, "batch", e.Partition)
	assert.True(t, predicted.Equal(e.Predicted), "predicted %s, recorded %s", predicted, e.Predicted)
	require.False(t, e.Observed.IsZero(), "the job ran: its start is observed")
	start, err := time.Parse(time.RFC3339, tc.record()[record.KeyStart])
	require.NoError(t, err)
	assert.True(t, start.Equal(e.Observed), "the backend's own start time (%s), observed %s", start, e.Observed)
	secs, ok := e.ErrorSeconds()
	require.True(t, ok)
	assert.Less(t, secs, int64(0), "it started before the predicted hour")

	p, err := record.ParsePlaced(tc.record()[record.KeyPlacement])
	require.NoError(t, err)
	assert.Nil(t, p.Probes[1].EstimatedStart, "the absurd estimate is not recorded as b's")
}

// An estimate years ahead (one sweep saw the year 4068) is recorded as
// unknown: the start is still observed, but no error is measured.
func TestAbsurdEstimateIsRecordedAsUnknown(t *testing.T) {
	tc := newTwoClusters(t)
	a, b := loadOf(0, 4, 12), loadOf(4, 4, 0)
	b.EstimatedStart = time.Date(4068, 3, 1, 0, 0, 0, 0, time.UTC)
	tc.a.SetLoad(a, nil)
	tc.b.SetLoad(b, nil)
	iv := tc.invoker("")
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "b", iv.Result().Target)
	v := tc.record()[record.KeyStartEstimate]
	assert.Contains(t, v, "predicted=unknown")
	assert.NotContains(t, v, "4068")
	e, err := record.ParseStartEstimate(v)
	require.NoError(t, err)
	require.NotNil(t, e)
	assert.False(t, e.Observed.IsZero())
	_, ok := e.ErrorSeconds()
	assert.False(t, ok, "no error from an unknown prediction")
}

// A placement whose chosen target gave no estimate records none.
func TestPlacementWithoutEstimateRecordsNone(t *testing.T) {
	tc := newTwoClusters(t)
	tc.a.SetLoad(loadOf(0, 4, 12), nil)
	tc.b.SetLoad(loadOf(4, 4, 0), nil)
	iv := tc.invoker("")
	require.NoError(t, iv.Run(context.Background()))
	assert.Empty(t, tc.record()[record.KeyStartEstimate])
}

// The learnt errors a target carries (the operator copies them from its
// BridgeCluster) reach placement through the record's targets: a's
// earlier raw estimate loses once a's jobs are known to start an hour
// late, and the record keeps the scheduler's own estimate.
func TestPlacementCorrectsByLearntErrors(t *testing.T) {
	tc := newTwoClusters(t)
	now := time.Now().UTC().Truncate(time.Second)
	a, b := loadOf(0, 4, 2), loadOf(0, 4, 2)
	a.EstimatedStart, b.EstimatedStart = now.Add(10*time.Minute), now.Add(30*time.Minute)
	tc.a.SetLoad(a, nil)
	tc.b.SetLoad(b, nil)
	targets := `[{"name":"a","backend":"fakea","resourceURL":"https://a.example.org:6820",` +
		`"startErrors":[{"partition":"batch","medianSeconds":3600,"lowSeconds":3000,"highSeconds":4000,"samples":6}]},` +
		`{"name":"b","backend":"fakeb","resourceURL":"https://b.example.org:6820","credentials":"b"}]`
	spec := &record.Spec{Targets: targets, ResourceURL: "https://a.example.org:6820",
		JobScript: "#!/bin/sh\ntrue\n", JobProperties: `{"run":"50ms"}`, UpdateInterval: "0.5"}
	iv := tc.harness.invoker(spec)
	iv.Backend.Credentials = runner.DirCredentials{Dir: tc.creds, Secrets: &runner.Secrets{}}
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "b", iv.Result().Target, "a's estimates come true an hour late")
	p, err := record.ParsePlaced(tc.record()[record.KeyPlacement])
	require.NoError(t, err)
	require.NotNil(t, p.Probes[0].EstimatedStart)
	assert.True(t, a.EstimatedStart.Equal(*p.Probes[0].EstimatedStart), "the probe records the scheduler's own estimate")
}
