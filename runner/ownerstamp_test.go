package runner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestRecordStampedWithItsRun: a record created in a run carries that run
// as status.owner from its first moment (record.ConfigMapStore.Run). A task
// of the run claims it as its own; a task of another run is refused before
// anything is submitted, and another run's cleanup leaves it alone.
func TestRecordStampedWithItsRun(t *testing.T) {
	h := newHarness(t, nil)
	data := h.spec(`{"run":"300ms"}`).WithDefaults().Data()
	data[record.KeyOwner] = "Workflow a (uid 1111)"
	createRecord(t, h, data)

	require.ErrorIs(t, claimRun(t, h, "Workflow b (uid 2222) node b.main.invoke")[0], backends.ErrInvalid)
	assert.Zero(t, h.fake.Count("submit"))

	c := h.cleaner()
	c.Owner = "Workflow b (uid 2222) node b.onExit"
	res, err := c.Run(context.Background())
	require.NoError(t, err)
	assert.False(t, res.Deleted, "another run's exit handler keeps the record")
	assert.Equal(t, "Workflow a (uid 1111)", h.record()[record.KeyOwner])

	task := "Workflow a (uid 1111) node a.main.invoke"
	require.NoError(t, claimRun(t, h, task)[0], "a task of the run that created the record")
	assert.Equal(t, task, h.record()[record.KeyOwner])
	assert.Equal(t, 1, h.fake.Count("submit"))
}
