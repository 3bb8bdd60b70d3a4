package quantum

import (
	"context"
	"errors"
	"io"

	"github.com/bridge-runner/bridge-runner/backends"
)

// ReadLogs implements backends.LogReader: GET /jobs/{id}/logs, the job's
// log as text, written from offset on. The API serves the whole log each
// time, so what was already shown is dropped as it streams by (the logs of
// a primitive job are short). No log yet (404) reads as nothing new.
func (b *Backend) ReadLogs(ctx context.Context, id string, offset int64, w io.Writer) (int64, error) {
	ow := backends.NewOffsetWriter(w, offset)
	err := b.FetchOutput(ctx, id, "logs", ow)
	if errors.Is(err, backends.ErrNotFound) && validJobID(id) {
		err = nil
	}
	return offset + ow.Written(), err
}

var _ backends.LogReader = (*Backend)(nil)
