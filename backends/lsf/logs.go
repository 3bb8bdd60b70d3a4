package lsf

import (
	"context"
	"errors"
	"io"
	"path"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// ReadLogs implements backends.LogReader: the job's output file (the
// outfile Application Center reports, i.e. jobproperties outputFile)
// downloaded with the job files download, written from offset on. The API
// has no ranges, so each read transfers the whole file and drops what was
// already shown (streamed: memory does not grow with the file). A job
// without an output file has no output to read; a file not written yet
// reads as nothing new.
func (b *Backend) ReadLogs(ctx context.Context, id string, offset int64, w io.Writer) (int64, error) {
	p, err := b.outputFile(ctx, id)
	if err != nil || p == "" {
		return offset, err
	}
	ow := backends.NewOffsetWriter(w, offset)
	err = b.FetchOutput(ctx, id, p, ow)
	if errors.Is(err, backends.ErrNotFound) {
		err = nil
	}
	return offset + ow.Written(), err
}

// outputFile is the absolute path of job id's output file, or "" if it has
// none. LSF's %J and %I in the name stand for the job id and array index.
func (b *Backend) outputFile(ctx context.Context, id string) (string, error) {
	b.mu.Lock()
	p, ok := b.outFiles[id]
	b.mu.Unlock()
	if ok {
		return p, nil
	}
	e, err := b.jobInfo(ctx, id)
	if err != nil || e == nil {
		return "", err
	}
	p = strings.NewReplacer("%J", id, "%I", "0").Replace(str(get(e, "outfile", "outFile", "outputFile")))
	if p == "" {
		b.log.Info("the job has no output file, so its output cannot be shown; set outputFile in jobproperties", "job_id", id)
	} else if !path.IsAbs(p) {
		cwd := str(get(e, "cwd", "execCwd"))
		if cwd == "" {
			return "", nil // not known yet
		}
		p = path.Join(cwd, p)
	}
	b.mu.Lock()
	if b.outFiles == nil {
		b.outFiles = map[string]string{}
	}
	b.outFiles[id] = p
	b.mu.Unlock()
	return p, nil
}

var _ backends.LogReader = (*Backend)(nil)
