package runner_test

import (
	"context"
	"errors"
	"fmt"
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

// accountingFake is the fake with accounting: Usage answers faults first,
// in order, then usage.
type accountingFake struct {
	*fake.Backend
	mu     sync.Mutex
	faults []error
	usage  backends.Usage
	calls  int
}

func (a *accountingFake) Usage(_ context.Context, id string) (backends.Usage, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if len(a.faults) > 0 {
		err := a.faults[0]
		a.faults = a.faults[1:]
		return backends.Usage{}, err
	}
	return a.usage, nil
}

func accountingHarness(t *testing.T, a *accountingFake) *harness {
	h := newHarness(t, nil)
	a.Backend = h.fake
	h.reg = backends.NewRegistry()
	require.NoError(t, h.reg.Register("fake", func(backends.Config) (backends.Backend, error) { return a, nil }))
	return h
}

// TestEfficiencyIsRecordedOnceAccountingKnowsTheJob: accounting that lags
// the job's end (slurmdbd writes asynchronously) is asked again with
// back-off; the record and the output get the same figures.
func TestEfficiencyIsRecordedOnceAccountingKnowsTheJob(t *testing.T) {
	submit := time.Now().Add(-time.Minute).Truncate(time.Second)
	a := &accountingFake{faults: []error{backends.ErrNotFound, backends.Transient(errors.New("busy"))},
		usage: backends.Usage{Tasks: 1, CPUSeconds: 3, CPUs: 2, CoreSeconds: 8, Elapsed: 4 * time.Second, TimeLimit: time.Minute,
			MaxRSSBytes: 25 << 20, ReqMemBytes: 100 << 20, Submit: submit, Start: submit.Add(7 * time.Second)}}
	h := accountingHarness(t, a)
	iv := h.invoker(h.spec(`{"run":"200ms"}`))
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, 3, a.calls, "asked until the accounting knew the job")
	e, err := record.ParseEfficiency(h.record()[record.KeyEfficiency])
	require.NoError(t, err)
	require.NotNil(t, e, "the record has the efficiency")
	require.NotNil(t, e.CPU)
	assert.InDelta(t, 0.375, *e.CPU, 1e-9)
	require.NotNil(t, e.Memory)
	assert.InDelta(t, 0.25, *e.Memory, 1e-9)
	require.NotNil(t, e.Time)
	assert.InDelta(t, 4.0/60, *e.Time, 1e-3)
	require.NotNil(t, e.QueueWaitSeconds)
	assert.EqualValues(t, 7, *e.QueueWaitSeconds)
	assert.Empty(t, e.Unavailable)
	assert.Equal(t, h.record()[record.KeyEfficiency], iv.Result().Efficiency, "the output is the record's text")
}

// TestEfficiencyUnavailableNeverFailsTheStep: no accounting, or one that
// never knows the job, or one that fails with the server's words: the job
// still ends DONE, the record says why in our words, within the ceiling.
func TestEfficiencyUnavailableNeverFailsTheStep(t *testing.T) {
	serverText := "slurmdbd: internal error at /var/lib/secret-path"
	for _, tc := range []struct {
		name  string
		fault error
		why   string
	}{
		{"no accounting", backends.ErrNoAccounting, "the cluster keeps none"},
		{"server error", fmt.Errorf("%s", serverText), "reading it failed"},
		{"lagging past the ceiling", backends.ErrNotFound, "the accounting did not know the job's end within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			faults := make([]error, 1000)
			for i := range faults {
				faults[i] = tc.fault
			}
			a := &accountingFake{faults: faults}
			h := accountingHarness(t, a)
			iv := h.invoker(h.spec(`{"run":"100ms"}`))
			start := time.Now()
			require.NoError(t, iv.Run(context.Background()), "a missing accounting never fails the step")
			assert.Less(t, time.Since(start), runner.AccountingWait+5*time.Second, "the accounting's ceiling")
			assert.Equal(t, "DONE", iv.Result().Status)
			d := h.record()
			e, err := record.ParseEfficiency(d[record.KeyEfficiency])
			require.NoError(t, err)
			require.NotNil(t, e)
			assert.Contains(t, e.Unavailable, "accounting unavailable: "+tc.why)
			assert.Nil(t, e.CPU)
			assert.NotContains(t, d[record.KeyEfficiency], "secret-path", "no server text in the record")
			assert.NotContains(t, iv.Result().Efficiency, "secret-path", "no server text in the output")
		})
	}
}
