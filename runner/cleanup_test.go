package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/runner"
)

func (h *harness) cleaner() *runner.Cleaner {
	return &runner.Cleaner{Store: h.store, Registry: h.reg, RetryBudget: time.Second, Wait: 2 * time.Second}
}

func TestCleanupCancelsARunningJobAndDeletes(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"30s"}`))
	done := make(chan error, 1)
	go func() { done <- iv.Run(context.Background()) }()
	require.Eventually(t, func() bool {
		rec, err := h.store.Get(context.Background())
		return err == nil && rec.Data[runner.KeyJobStatus] == "RUNNING"
	}, 5*time.Second, 20*time.Millisecond)

	cancelled, err := h.cleaner().Run(context.Background())
	require.NoError(t, err)
	assert.True(t, cancelled)
	require.NoError(t, <-done)
	assert.Equal(t, "KILLED", iv.Result().Status, "the live invoker saw kill=true and reported KILLED")
	_, err = h.store.Get(context.Background())
	assert.ErrorIs(t, err, runner.ErrNoRecord)
	assert.GreaterOrEqual(t, h.fake.Count("cancel"), 1)
	// Each built the backend once and closed it (the SSH backends' Close
	// ends their connection).
	assert.Equal(t, 2, h.fake.Count("close"), "invoke and cleanup each close the backend they built")
}

func TestCleanupWithoutInvokerCancelsByKey(t *testing.T) {
	// invoke died after submitting but before recording the id.
	h := newHarness(t, nil)
	h.fake.LoseResponses = 1
	iv := h.invoker(h.spec(`{"run":"30s"}`))
	iv.RetryBudget = 50 * time.Millisecond
	iv.SubmitLease = 100 * time.Millisecond // gives up before finding it
	_ = iv.Run(context.Background())
	require.Len(t, h.fake.Jobs(), 1)

	c := h.cleaner()
	c.Wait = 0
	cancelled, err := c.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, cancelled)
	assert.NotNil(t, h.fake.Jobs()[0].Cancelled, "the job was found by its key and cancelled")
}

func TestCleanupIsIdempotent(t *testing.T) {
	h := newHarness(t, nil)
	cancelled, err := h.cleaner().Run(context.Background())
	require.NoError(t, err, "no record is fine")
	assert.False(t, cancelled)

	iv := h.invoker(h.spec(`{"run":"10ms"}`))
	require.NoError(t, iv.Run(context.Background()))
	cancelled, err = h.cleaner().Run(context.Background())
	require.NoError(t, err)
	assert.False(t, cancelled, "a finished job is not cancelled")
	assert.Zero(t, h.fake.Count("cancel"))
	_, err = h.cleaner().Run(context.Background())
	require.NoError(t, err)
}
