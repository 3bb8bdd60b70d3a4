package backends

import "io"

// OffsetWriter helps a LogReader whose source can only send a job's output
// from its first byte (a whole-file download): it drops the first skip bytes
// written to it and passes the rest on to w, so what reaches w starts at the
// caller's offset. Memory does not grow with what is skipped.
type OffsetWriter struct {
	w       io.Writer
	skip    int64
	written int64
}

// NewOffsetWriter returns a writer to w that drops the first skip bytes.
func NewOffsetWriter(w io.Writer, skip int64) *OffsetWriter {
	return &OffsetWriter{w: w, skip: max(skip, 0)}
}

func (o *OffsetWriter) Write(p []byte) (int, error) {
	n := len(p)
	drop := min(o.skip, int64(len(p)))
	o.skip -= drop
	p = p[drop:]
	if len(p) == 0 {
		return n, nil
	}
	m, err := o.w.Write(p)
	o.written += int64(m)
	if err != nil {
		return int(drop) + m, err
	}
	return n, nil
}

// Written is how many bytes reached w.
func (o *OffsetWriter) Written() int64 { return o.written }
