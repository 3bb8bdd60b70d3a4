package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// Job output: while a job runs, invoke copies its output to LogOut (the
// step's log) from a log source (a backends.LogReader: the backend's own, a
// shared file, or the object a log shipper writes; see logSource). The
// runner alone decides when to read: on its own cadence, independent of
// status polls, and once more at the end so the tail is complete.

// DefaultLogInterval is how often a running job's output is read while it
// keeps printing. Reads back off, up to maxLogInterval, while it is quiet.
const DefaultLogInterval = 2 * time.Second

// maxLogInterval bounds the back-off of reads that found nothing new: a job
// that prints again after a long silence is shown at most this late.
const maxLogInterval = 10 * time.Second

// logReadTimeout bounds one read; a source that hangs must not stall the
// following of the job.
const logReadTimeout = 30 * time.Second

// offsetWriteEvery: the log offset alone is written to the record at most
// this often (it rides along with every state change anyway). A re-attach
// repeats at most the output of this long.
const offsetWriteEvery = 30 * time.Second

// jobOutput reads a job's output from src and writes it, scrubbed, to the
// run's LogOut; it keeps the run's offset up to date.
type jobOutput struct {
	r      *run
	src    backends.LogReader
	out    *outputWriter
	read   int64 // bytes of the job's output read so far (some may be held in out)
	every  *record.Backoff
	due    time.Time // the next read on the cadence
	errMsg string    // the last read error, so a persistent one is logged once
	// ended: the output was read to its end after the job's final state
	// (see catchUp); there is nothing more to read.
	ended bool
}

func (r *run) newJobOutput(src backends.LogReader, maxPoll time.Duration) *jobOutput {
	if src == nil {
		return nil
	}
	o := &jobOutput{r: r, src: src, out: &outputWriter{w: r.LogOut, secrets: r.Secrets}, read: r.logOff,
		every: &record.Backoff{Initial: r.LogInterval, Max: max(r.LogInterval, min(maxPoll, maxLogInterval)), Factor: 1.5, Jitter: 0.1}}
	o.due = time.Now()
	return o
}

// readNew copies what the job printed since the last read and schedules the
// next read: soon while the job prints, later while it is quiet.
func (o *jobOutput) readNew(ctx context.Context, id string, log *slog.Logger) {
	if o.ended {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	next, err := o.src.ReadLogs(rctx, id, o.read, o.out)
	cancel()
	if next > o.read {
		o.every.Reset()
		o.read = next
	}
	o.r.logOff = o.read - int64(o.out.held())
	o.due = time.Now().Add(o.every.Next())
	switch {
	case err == nil:
		o.errMsg = ""
	case errors.Is(err, backends.ErrNotFound): // no output yet (a file not written yet)
		log.Debug("no job output yet", "err", err)
	case err.Error() != o.errMsg:
		o.errMsg = err.Error()
		log.Warn("reading the job's output failed; will try again", "err", err)
	default:
		log.Debug("reading the job's output", "err", err)
	}
}

// catchUp brings the step's log up to the job's state st before the line
// that says it: an array's tasks by state and, at a final state, the job's
// last output. A person reads a job's lines, then its end; read after the
// state line, the last lines came after it.
func (f *follower) catchUp(st backends.Status) {
	f.sayTasks()
	if f.out != nil && st.State.Final() {
		f.readLogs()
		f.out.ended = true
	}
}

// soon makes the next read due now (the job's state changed: it may have
// started printing).
func (o *jobOutput) soon() {
	o.every.Reset()
	o.due = time.Now()
}

// finish writes what is held back; the whole output read is then in LogOut.
func (o *jobOutput) finish() {
	_ = o.out.Flush()
	o.r.logOff = o.read
}

// maxHeldLine bounds the beginning of a line held back until its end comes,
// so that the job's lines and invoke's own log lines do not interleave in
// the middle of a line.
const maxHeldLine = 8 << 10

// outputWriter scrubs a stream (the job's output) of secrets on its way to
// w. It writes whole lines, and never the beginning of a secret whose end
// has not arrived yet: a secret split across two reads is still redacted.
// What it holds back (at most the longest secret plus maxHeldLine) is raw,
// unscrubbed output, so the offset of what was written is exact.
type outputWriter struct {
	w       io.Writer
	secrets *Secrets
	pend    []byte
}

// maxChunk bounds what is scrubbed at once: a source that hands over
// megabytes in one write costs no more memory than one that streams.
const maxChunk = 64 << 10

func (o *outputWriter) Write(p []byte) (int, error) {
	for n := 0; n < len(p); n += maxChunk {
		if err := o.write(p[n:min(len(p), n+maxChunk)]); err != nil {
			return n, err
		}
	}
	return len(p), nil
}

func (o *outputWriter) write(p []byte) error {
	o.pend = append(o.pend, p...)
	cut := bytes.LastIndexAny(o.pend, "\n\r") + 1
	if len(o.pend)-cut > maxHeldLine {
		cut = len(o.pend)
	}
	cut = o.secrets.safeCut(o.pend, cut)
	if cut == 0 {
		return nil
	}
	if _, err := io.WriteString(o.w, o.secrets.Scrub(string(o.pend[:cut]))); err != nil {
		return err
	}
	n := copy(o.pend, o.pend[cut:])
	o.pend = o.pend[:n]
	return nil
}

// held is how many bytes of output are held back.
func (o *outputWriter) held() int { return len(o.pend) }

// Flush writes what was held back.
func (o *outputWriter) Flush() error {
	if len(o.pend) == 0 {
		return nil
	}
	_, err := io.WriteString(o.w, o.secrets.Scrub(string(o.pend)))
	o.pend = o.pend[:0]
	return err
}
