package runner_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestInfrastructureFailureRetryIsANewAttempt: the first job fails by the
// infrastructure; the step's retry (a second invoke on the same record)
// submits a new attempt, keeps the first one's id and outcome, and a
// further invoke re-attaches to the second job instead of submitting again.
func TestInfrastructureFailureRetryIsANewAttempt(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.InfraFailures = 1
	spec := h.spec(`{"run":"50ms"}`)

	first := h.invoker(spec)
	require.NoError(t, first.Run(context.Background()))
	assert.Equal(t, "FAILED", first.Result().Status)
	assert.Equal(t, "infrastructure", first.Result().FailureCategory)
	assert.Equal(t, "1", first.Result().Attempt)

	retry := h.invoker(spec)
	require.NoError(t, retry.Run(context.Background()))
	res := retry.Result()
	assert.Equal(t, "DONE", res.Status)
	assert.Equal(t, "fake-2", res.ID)
	assert.Equal(t, "2", res.Attempt)
	assert.Empty(t, res.FailureCategory)
	d := h.record()
	assert.Equal(t, "2", d[record.KeyAttempt])
	hist := strings.Split(d[record.KeyAttempts], "\n")
	require.Len(t, hist, 1)
	assert.Regexp(t, `^1 fake-1 FAILED infrastructure NODE_FAIL \d{4}-\d\d-\d\dT`, hist[0])
	assert.Empty(t, d[record.KeyFailureCategory], "the new attempt's state replaced the old one's")
	jobs := h.fake.Jobs()
	require.Len(t, jobs, 2)
	rec, err := h.store.Get(context.Background())
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, j := range jobs {
		keys[j.Key] = true
	}
	assert.True(t, keys[runner.AttemptKey(rec.UID, 1)] && keys[runner.AttemptKey(rec.UID, 2)], "each attempt carries its own key: %v", keys)
	assert.Equal(t, runner.IdempotencyKey(rec.UID), runner.AttemptKey(rec.UID, 1), "the first attempt keeps the key records always had")

	again := h.invoker(spec)
	require.NoError(t, again.Run(context.Background()))
	assert.Equal(t, "fake-2", again.Result().ID, "a DONE attempt is re-attached to, not resubmitted")
	assert.Equal(t, 2, h.fake.Count("submit"))
}

// TestResubmitPolicies: a job's own failure is re-attached to unless the
// policy is failed; never re-attaches even after an infrastructure failure.
func TestResubmitPolicies(t *testing.T) {
	for _, c := range []struct {
		policy      string
		infra       bool
		wantSubmits int
	}{
		{"", false, 1},
		{record.ResubmitInfrastructure, false, 1},
		{record.ResubmitFailed, false, 2},
		{record.ResubmitFailed, true, 2},
		{record.ResubmitNever, true, 1},
		{"", true, 2},
	} {
		t.Run(c.policy+map[bool]string{true: "-infra", false: "-job"}[c.infra], func(t *testing.T) {
			h := newHarness(t, nil)
			spec := h.spec(`{"run":"50ms","final":"FAILED","exitCode":3}`)
			if c.infra {
				h.fake.InfraFailures = 1
			}
			for i := 0; i < 2; i++ {
				iv := h.invoker(spec)
				iv.Resubmit = c.policy
				require.NoError(t, iv.Run(context.Background()))
			}
			assert.Equal(t, c.wantSubmits, h.fake.Count("submit"))
			assert.Equal(t, c.wantSubmits > 1, h.record()[record.KeyAttempts] != "")
		})
	}
}

// TestNewAttemptAdoptsAfterACrash: a retry that died between submitting
// attempt 2 and recording its id (its intent left behind) is healed by the
// next invoke, which finds attempt 2's job by its key and adopts it.
func TestNewAttemptAdoptsAfterACrash(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.fake.InfraFailures = 1
	spec := h.spec(`{"run":"50ms"}`)
	require.NoError(t, h.invoker(spec).Run(ctx))
	rec, err := h.store.Get(ctx)
	require.NoError(t, err)
	// What the crashed retry left: attempt 2 begun, its intent, its job.
	next := rec.Clone()
	for _, k := range []string{record.KeyID, record.KeyJobStatus, record.KeyFailureCategory, record.KeyIDFingerprint} {
		delete(next.Data, k)
	}
	next.Data[record.KeyAttempt] = "2"
	next.Data[record.KeyAttempts] = "1 fake-1 FAILED infrastructure NODE_FAIL -"
	next.Data[record.KeyIntent] = "elsewhere/1/1@" + time.Now().UTC().Format(time.RFC3339Nano)
	_, err = h.store.Update(ctx, next)
	require.NoError(t, err)
	_, err = h.fake.Submit(ctx, backends.Job{Key: runner.AttemptKey(rec.UID, 2), Properties: []byte(`{"run":"50ms"}`)})
	require.NoError(t, err)

	iv := h.invoker(spec)
	require.NoError(t, iv.Run(ctx))
	assert.Equal(t, "fake-2", iv.Result().ID, "attempt 2's job is adopted by its key")
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, 2, h.fake.Count("submit"), "the crashed attempt's job is not submitted again")
	assert.Equal(t, "1 fake-1 FAILED infrastructure NODE_FAIL -", h.record()[record.KeyAttempts])
}

// TestConcurrentRetriesStartOneAttempt: several invokers retrying the same
// failed step start one new attempt and submit it once.
func TestConcurrentRetriesStartOneAttempt(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.InfraFailures = 1
	spec := h.spec(`{"run":"300ms"}`)
	require.NoError(t, h.invoker(spec).Run(context.Background()))
	h.fake.SubmitDelay = 200 * time.Millisecond
	var wg sync.WaitGroup
	ids := make([]string, 4)
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			iv := h.invoker(spec)
			assert.NoError(t, iv.Run(context.Background()))
			ids[i] = iv.Result().ID
		}(i)
	}
	wg.Wait()
	assert.Equal(t, 2, h.fake.Count("submit"), "one new attempt, submitted once")
	for _, id := range ids {
		assert.Equal(t, "fake-2", id)
	}
	assert.Equal(t, "2", h.record()[record.KeyAttempt])
}

// TestAttemptHistoryIsBounded: after many infrastructure failures the
// history keeps the last MaxAttemptHistory attempts and the count goes on.
func TestAttemptHistoryIsBounded(t *testing.T) {
	h := newHarness(t, nil)
	n := record.MaxAttemptHistory + 3
	h.fake.InfraFailures = n
	spec := h.spec(`{"run":"10ms"}`)
	for i := 0; i < n; i++ {
		require.NoError(t, h.invoker(spec).Run(context.Background()))
	}
	d := h.record()
	assert.Equal(t, "13", d[record.KeyAttempt])
	hist := strings.Split(d[record.KeyAttempts], "\n")
	require.Len(t, hist, record.MaxAttemptHistory)
	assert.True(t, strings.HasPrefix(hist[0], "3 fake-3 "), hist[0])
	assert.True(t, strings.HasPrefix(hist[len(hist)-1], "12 fake-12 "), hist[len(hist)-1])
}

// TestCleanupFindsTheCurrentAttemptByItsKey: a retry died after submitting
// attempt 2 and before recording its id; cleanup finds that job by attempt
// 2's key and cancels it (the first attempt's key would find the old,
// ended job).
func TestCleanupFindsTheCurrentAttemptByItsKey(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.fake.InfraFailures = 1
	spec := h.spec(`{"run":"2s"}`) // attempt 2 still runs when cleanup comes
	require.NoError(t, h.invoker(spec).Run(ctx))
	h.fake.LoseResponses = 1
	iv := h.invoker(spec)
	iv.Registry = blindFinderRegistry(t, h.fake) // its lookup by key fails too
	iv.RetryBudget = 50 * time.Millisecond
	iv.SubmitLease = 100 * time.Millisecond // gives up before finding it
	_ = iv.Run(ctx)
	require.Len(t, h.fake.Jobs(), 2)
	require.Empty(t, h.record()[record.KeyID], "the retry died before recording attempt 2's id")
	require.Equal(t, "2", h.record()[record.KeyAttempt])

	c := h.cleaner()
	c.Wait = 0
	res, err := c.Run(ctx)
	require.NoError(t, err)
	assert.True(t, res.Deleted)
	var second *fake.Job
	for _, j := range h.fake.Jobs() {
		if j.ID == "fake-2" {
			second = &j
		}
	}
	require.NotNil(t, second)
	assert.True(t, res.Cancelled)
	assert.NotNil(t, second.Cancelled, "attempt 2's job was found by its key and cancelled")
}
