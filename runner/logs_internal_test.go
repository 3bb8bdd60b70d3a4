package runner

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every way of cutting the output in three reads gives the same scrubbed
// text, and no part of a secret is ever written before its end is known.
func TestOutputWriterScrubsSecretsSplitAcrossReads(t *testing.T) {
	secrets := &Secrets{}
	secrets.Add("abcdefgh")
	secrets.Add("multi\nline-secret")
	secrets.Add("ghost") // overlaps the end of the first
	text := "x abcdefgh y\nmulti\nline-secret abcdefghost abcd"
	want := secrets.Scrub(text)
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			var got bytes.Buffer
			w := &outputWriter{w: &got, secrets: secrets}
			for _, part := range []string{text[:i], text[i:j], text[j:]} {
				_, err := w.Write([]byte(part))
				require.NoError(t, err)
				assert.NotContains(t, got.String(), "abcdefgh")
				assert.NotContains(t, got.String(), "line-secret")
			}
			require.NoError(t, w.Flush())
			assert.Equal(t, want, got.String(), "cut at %d and %d", i, j)
		}
	}
}

func TestOutputWriterWritesWholeLinesAndCountsHeldBytes(t *testing.T) {
	var got bytes.Buffer
	w := &outputWriter{w: &got, secrets: &Secrets{}}
	_, _ = w.Write([]byte("one\ntw"))
	assert.Equal(t, "one\n", got.String())
	assert.Equal(t, 2, w.held(), "the line's beginning waits for its end")
	_, _ = w.Write([]byte("o\rthree"))
	assert.Equal(t, "one\ntwo\r", got.String(), "a carriage return ends a line too (progress bars)")
	long := strings.Repeat("z", maxHeldLine+1)
	_, _ = w.Write([]byte(long))
	assert.Equal(t, 0, w.held(), "a line longer than maxHeldLine is not held back")
	require.NoError(t, w.Flush())
	assert.Equal(t, "one\ntwo\rthree"+long, got.String())
}

func TestParseLogDir(t *testing.T) {
	m, err := ParseLogDir("/logs")
	require.NoError(t, err)
	p, err := m.podPath("/shared/u/slurm-7.out")
	require.NoError(t, err)
	assert.Equal(t, "/logs/slurm-7.out", p)

	m, err = ParseLogDir("/home:/mnt/home")
	require.NoError(t, err)
	p, err = m.podPath("/home/alice/run/slurm-7.out")
	require.NoError(t, err)
	assert.Equal(t, "/mnt/home/alice/run/slurm-7.out", p)
	_, err = m.podPath("/homer/x.out")
	assert.ErrorContains(t, err, "not under /home")

	for _, bad := range []string{"logs", "home:/mnt", "/home:mnt", ""} {
		_, err := ParseLogDir(bad)
		assert.ErrorContains(t, err, "log-dir", bad)
	}
}

func TestPresignSecretIsTheSignature(t *testing.T) {
	u := "https://s3.example/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261123&X-Amz-Signature=0123456789abcdef"
	assert.Equal(t, "0123456789abcdef", presignSecret(u))
	s := &Secrets{}
	s.Add(presignSecret(u))
	assert.Equal(t, strings.ReplaceAll(u, "0123456789abcdef", "[redacted]"), s.Scrub(u), "a leaked URL is useless")
	assert.Equal(t, "not a url %zz", presignSecret("not a url %zz"))
}

// fixedLocator says the job's output is at one remote path.
type fixedLocator string

func (l fixedLocator) OutputPath(context.Context, string) (string, error) { return string(l), nil }

// TestFileLogsNeverBlockOnAFIFO: a job's output that shows in the pod as a
// named pipe is refused at once (an error naming it), not opened in a way
// that blocks the follow loop until someone writes to the pipe.
func TestFileLogsNeverBlockOnAFIFO(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "job.out"), 0o600))
	l := &fileLogs{locate: fixedLocator("/remote/job.out"), mount: logMount{Pod: dir}, paths: map[string]string{}}
	done := make(chan error, 1)
	go func() {
		_, err := l.ReadLogs(context.Background(), "1", 0, io.Discard)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "named pipe")
	case <-time.After(10 * time.Second):
		t.Fatal("reading the job's output blocked on a FIFO")
	}
}
