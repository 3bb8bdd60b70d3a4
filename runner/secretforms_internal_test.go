package runner

import (
	"net/url"
	"strings"
	"testing"
)

// TestOutputWriterEncodedSplit: an encoded secret that reaches the stream
// scrubber one byte at a time is redacted all the same.
func TestOutputWriterEncodedSplit(t *testing.T) {
	const secret = `pa ss<&>"w/rd`
	var sec Secrets
	sec.Add(secret)
	for _, form := range []string{url.QueryEscape(secret), strings.ReplaceAll(secret, "<", "&lt;"), url.PathEscape(secret)} {
		var out strings.Builder
		w := &outputWriter{w: &out, secrets: &sec}
		for _, b := range []byte("log: " + form + " end\n") {
			if _, err := w.Write([]byte{b}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), form) || !strings.Contains(out.String(), "[redacted]") {
			t.Errorf("%q written byte by byte came out as %q", form, out.String())
		}
	}
}
