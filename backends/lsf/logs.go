package lsf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
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

// ReadTaskLogs implements backends.TaskLogReader: the output file of
// task of array id (LSF's element task+1, see array.go), downloaded as
// ReadLogs downloads a job's: with the job files download of the array's
// job id, the file named as bsub -o names an element's, %J the array's id
// and %I the element's index. A task shows its own output only when the
// array's outputFile has %I (e.g. out.%J.%I); without, every element
// writes the one file, which is no task's own. ErrNotFound: the task has
// not written its file yet.
func (b *Backend) ReadTaskLogs(ctx context.Context, id string, task int, offset int64, w io.Writer) (int64, error) {
	f, err := b.arrayFiles(ctx, id)
	if err != nil {
		return offset, err
	}
	if f.out == "" {
		return offset, fmt.Errorf("LSF array %s has no output file (set outputFile in jobproperties, e.g. out.%%J.%%I): %w", id, backends.ErrNotFound)
	}
	return b.readTaskFile(ctx, id, task, f.out, "outputFile", f.cwd, offset, w)
}

// ReadTaskErrs implements backends.TaskErrReader: the standard error of
// task of array id where the array's errorFile (bsub -e) names a file of
// its own per element (%I, e.g. err.%J.%I), downloaded as ReadTaskLogs
// downloads its output. Without errorFile (or with the outputFile's own
// name) standard error is in the output already: ErrNotFound, nothing to
// add; an errorFile without %I is one file for every element, no task's
// own, and refused naming the field and the fix.
func (b *Backend) ReadTaskErrs(ctx context.Context, id string, task int, offset int64, w io.Writer) (int64, error) {
	f, err := b.arrayFiles(ctx, id)
	if err != nil {
		return offset, err
	}
	if f.err == "" || f.err == f.out {
		return offset, fmt.Errorf("LSF array %s writes its standard error to its output file: %w", id, backends.ErrNotFound)
	}
	return b.readTaskFile(ctx, id, task, f.err, "errorFile", f.cwd, offset, w)
}

// readTaskFile downloads task's file of array id, named by pattern (the
// jobproperties field it came from: field) in working directory cwd, from
// offset on.
func (b *Backend) readTaskFile(ctx context.Context, id string, task int, pattern, field, cwd string, offset int64, w io.Writer) (int64, error) {
	if !strings.Contains(pattern, "%I") {
		return offset, backends.Invalid("jobproperties", "%s %q has no %%I, so the tasks of array %s write one file and no task's is its own; put %%I in it (e.g. %s)",
			field, pattern, id, map[string]string{"outputFile": "out.%J.%I", "errorFile": "err.%J.%I"}[field])
	}
	p := strings.NewReplacer("%J", id, "%I", strconv.Itoa(task+1)).Replace(pattern)
	if !path.IsAbs(p) {
		if cwd == "" {
			return offset, fmt.Errorf("LSF array %s's working directory is not known yet: %w", id, backends.ErrNotFound)
		}
		p = path.Join(cwd, p)
	}
	ow := backends.NewOffsetWriter(w, offset)
	err := b.FetchOutput(ctx, id, p, ow)
	return offset + ow.Written(), err
}

// jobFiles are an array's output and error file patterns as Application
// Center reports them (%J and %I not replaced) and its working directory.
type jobFiles struct{ out, err, cwd string }

// arrayFiles is job id's jobFiles, asked once when they are known for good.
func (b *Backend) arrayFiles(ctx context.Context, id string) (jobFiles, error) {
	if !validID(id) {
		return jobFiles{}, fmt.Errorf("LSF job id %q is not a job id: %w", id, backends.ErrNotFound)
	}
	b.mu.Lock()
	f, ok := b.outPatterns[id]
	b.mu.Unlock()
	if ok {
		return f, nil
	}
	e, err := b.jobInfo(ctx, id)
	if err != nil {
		return jobFiles{}, err
	}
	if e == nil {
		return jobFiles{}, fmt.Errorf("LSF job %s is not listed, so its files cannot be named: %w", id, backends.ErrNotFound)
	}
	f = jobFiles{out: str(get(e, "outfile", "outFile", "outputFile")), err: str(get(e, "errfile", "errFile", "errorFile")), cwd: str(get(e, "cwd", "execCwd"))}
	if f.cwd != "" || (f.out == "" || path.IsAbs(f.out)) && (f.err == "" || path.IsAbs(f.err)) {
		// Known for good: each task's read asks no more.
		b.mu.Lock()
		if b.outPatterns == nil {
			b.outPatterns = map[string]jobFiles{}
		}
		b.outPatterns[id] = f
		b.mu.Unlock()
	}
	return f, nil
}

var (
	_ backends.LogReader     = (*Backend)(nil)
	_ backends.TaskLogReader = (*Backend)(nil)
	_ backends.TaskErrReader = (*Backend)(nil)
)
