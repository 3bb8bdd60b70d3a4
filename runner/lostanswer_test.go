package runner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
)

// blindFinder is the fake whose lookups by key fail as if the backend were
// out of reach, while its submits go through (and, with LoseResponses,
// lose their answer): the invoke that submitted cannot find its job, gives
// up with the submit intent in the record, and leaves the job to a retry
// or cleanup, as one that died after submitting does.
type blindFinder struct{ *fake.Backend }

func (blindFinder) FindByKey(context.Context, string) (string, error) {
	return "", backends.Transient(errors.New("fake: lookup by key: connection refused"))
}

// blindFinderRegistry registers f as the backend fake, blind to its own jobs.
func blindFinderRegistry(t *testing.T, f *fake.Backend) *backends.Registry {
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) { return blindFinder{f}, nil }))
	return reg
}

// answerLost is the fake whose submits are taken but never answered: the
// request waits until its context ends.
type answerLost struct{ *fake.Backend }

func (a answerLost) Submit(ctx context.Context, job backends.Job) (string, error) {
	if _, err := a.Backend.Submit(ctx, job); err != nil {
		return "", err
	}
	<-ctx.Done()
	return "", backends.Transient(ctx.Err())
}

// TestSubmitWithItsAnswerLostIsFoundByKey: issue 37. The backend takes the
// job, but the answer never comes: before giving up, invoke looks for the
// job by its key, finds it and follows it to its end, with one job. The old
// code gave up (75) at the submit's deadline and left the job running with
// no id in the record.
func TestSubmitWithItsAnswerLostIsFoundByKey(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"200ms"}`))
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) { return answerLost{h.fake}, nil }))
	iv.Registry = reg
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, 1, h.fake.Count("submit"), "one job")
	assert.Equal(t, "fake-1", h.record()["id"], "the record follows it")
	assert.Contains(t, h.logs.String(), "found by its idempotency key")
}
