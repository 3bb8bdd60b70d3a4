package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestPendingLimitCancelsAndExitsInvalid: a job that has not started when
// its pendingLimit passes is cancelled, recorded KILLED with a message
// that names the wait and the scheduler's reason, and invoke ends with an
// invalid-input error (exit 2) naming pendingLimit. Meanwhile the log says
// the job waits, and for how long.
func TestPendingLimitCancelsAndExitsInvalid(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{"pending":"1h","run":"1s"}`)
	spec.PendingLimit = "1s"
	iv := h.invoker(spec)
	start := time.Now()
	err := iv.Run(context.Background())
	require.Error(t, err)
	assert.True(t, errors.Is(err, backends.ErrInvalid), "exit 2: %v", err)
	var sf *runner.SubmittedFault
	assert.False(t, errors.As(err, &sf), "the job was cancelled, its end recorded: it does not go on (%v)", err)
	var fe *backends.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "pendingLimit", fe.Field)
	assert.Less(t, time.Since(start), 1*time.Second+10*time.Second, "the limit is a ceiling (within limit+poll+cancel wait)")

	jobs := h.fake.Jobs()
	require.Len(t, jobs, 1)
	assert.NotNil(t, jobs[0].Cancelled, "the job was cancelled on the backend")
	rec := h.record()
	assert.Equal(t, string(backends.Killed), rec[record.KeyJobStatus])
	assert.Contains(t, rec[record.KeyMessage], "still PENDING after")
	assert.Contains(t, rec[record.KeyMessage], "pendingLimit of 1s")
	assert.Equal(t, string(backends.Killed), iv.Result().Status)
	logs := h.logs.String()
	assert.Contains(t, logs, "job pending: it has not started")
	assert.Contains(t, logs, "waited=")
	assert.Contains(t, logs, "pendingLimit 1s reached")
}

// TestNoPendingLimitWaits: without a limit a pending job is followed to
// its end as before; a short wait with no reason is not said (the quick
// start's local job pends for its first poll), a longer one is, once
// within a heartbeat.
func TestNoPendingLimitWaits(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"pending":"1500ms","run":"100ms"}`))
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Zero(t, strings.Count(h.logs.String(), "job pending: it has not started"), "a 1.5 s wait with no reason is no news")

}

func TestPendingLimitIsChecked(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "0": true, "30m": true, "20": true, "1.5": true, "0.5": false, "-1s": false, "9000h": false, "soon": false, "1e3": false} {
		d, err := record.ParsePendingLimit(v)
		if ok {
			assert.NoError(t, err, v)
			continue
		}
		require.Error(t, err, "%q: %v", v, d)
		assert.Contains(t, err.Error(), "pendingLimit", v)
		assert.True(t, errors.Is(err, backends.ErrInvalid), v)
	}
}
