package runner

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
)

// failingClose is a backend whose Close fails, as an SSH backend's may.
type failingClose struct{ *fake.Backend }

func (failingClose) Close() error { return errors.New("connection already closed") }

// An array's backend that fails to close is logged, not a panic (the
// wrapper used to close it with no logger).
func TestArrayBackendCloseErrorIsReturned(t *testing.T) {
	a := asArray(failingClose{fake.New()}, backends.Array{Ranges: []backends.IndexRange{{First: 0, Last: 1}}})
	assert.EqualError(t, a.Close(), "connection already closed")
	assert.NotPanics(t, func() { closeBackend(a, slog.New(slog.DiscardHandler)) })
}
