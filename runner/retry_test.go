package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestRetryBudgetIsACeiling: issue 25 item 7. An attempt that hangs (a
// request to a blackholed server) is cut off when the budget ends, and the
// budget counts from the first attempt, not from its failure: 1 s of budget
// against requests that hang for 2 s ends after 1 s, not 3 s (the old code
// started the clock after the first failure and let each attempt run).
func TestRetryBudgetIsACeiling(t *testing.T) {
	hang := func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
			return backends.Transient(errors.New("timed out"))
		}
	}
	start := time.Now()
	err := retryTransient(context.Background(), time.Second, hang)
	took := time.Since(start)
	assert.Less(t, took, 1500*time.Millisecond, "bounded by the budget")
	assert.ErrorIs(t, err, backends.ErrTransient, "cut off by the budget is transient (exit 75)")
	assert.Contains(t, err.Error(), "retry budget")

	// Quick failures are retried until the budget, and no further.
	calls := 0
	start = time.Now()
	_ = retryTransient(context.Background(), 500*time.Millisecond, func(context.Context) error {
		calls++
		return backends.Transient(errors.New("refused"))
	})
	assert.Less(t, time.Since(start), 600*time.Millisecond)
	assert.Greater(t, calls, 1)
}
