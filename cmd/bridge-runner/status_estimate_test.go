package main

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

// status shows a placed job's predicted start against the observed one:
// whole in JSON, as late/early in -o wide's START column.
func TestStatusShowsStartEstimate(t *testing.T) {
	for v, want := range map[string]string{
		"cluster=a partition=debug predicted=2026-05-01T12:00:00Z observed=2026-05-01T12:05:00Z": "late 5m",
		"cluster=a partition=debug predicted=2026-05-01T12:00:00Z observed=2026-05-01T11:59:30Z": "early 30s",
		"cluster=a partition=debug predicted=2026-05-01T12:00:00Z observed=2026-05-01T12:00:00Z": "on time",
		"cluster=a partition=debug predicted=2026-05-01T12:00:00Z":                               "predicted 2026-05-01T12:00:00Z",
		"cluster=a partition=debug predicted=unknown observed=2026-05-01T12:00:00Z":              "unknown",
		"cluster=a predicted=soon": "",
		"":                         "",
	} {
		row := toRow(record.Listed{Job: "j", Record: &record.Record{Data: map[string]string{record.KeyStartEstimate: v}}})
		assert.Equal(t, want, row.StartEstimate.cell(), v)
		p := &statusPrinter{o: &statusOptions{output: "wide"}}
		h, c := p.header(), p.cells(row)
		require.Len(t, c, len(h))
		assert.Equal(t, none(want), c[slices.Index(h, "START")], v)
	}
	row := toRow(record.Listed{Job: "j", Record: &record.Record{Data: map[string]string{
		record.KeyStartEstimate: "cluster=hpc-1 partition=debug predicted=2026-05-01T12:00:00Z observed=2026-05-01T12:05:00Z"}}})
	require.NotNil(t, row.StartEstimate)
	assert.Equal(t, "hpc-1", row.StartEstimate.Cluster)
	assert.Equal(t, "2026-05-01T12:00:00Z", row.StartEstimate.Predicted)
	assert.Equal(t, "2026-05-01T12:05:00Z", row.StartEstimate.Observed)
	require.NotNil(t, row.StartEstimate.ErrorSeconds)
	assert.EqualValues(t, 300, *row.StartEstimate.ErrorSeconds)
}
