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

// TestOutputWriterFoldedWordSplit: a passphrase's word, upper-cased by the
// job and reaching the stream scrubber one byte at a time, is redacted.
func TestOutputWriterFoldedWordSplit(t *testing.T) {
	var sec Secrets
	sec.Add("correct horse battery staple")
	for _, form := range []string{"BATTERY", "Staple", "ELPATS", url.QueryEscape("HORSE BATTERY")} {
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
		if got := strings.ToLower(out.String()); strings.Contains(got, "battery") || strings.Contains(got, "staple") ||
			strings.Contains(got, "elpats") || strings.Contains(got, "horse") {
			t.Errorf("%q written byte by byte came out as %q", form, out.String())
		}
	}
}

// BenchmarkOutputWriter: the stream scrubber over a 64 KiB job log
// written in 512-byte pieces, with an IAM-sized token, a passphrase and a
// password registered (each piece's cut is checked against every form).
func BenchmarkOutputWriter(b *testing.B) {
	var sec Secrets
	sec.Add(strings.Repeat("eyJhbGciOiJSUzI1NiJ9", 50))
	sec.Add("correct horse battery staple")
	sec.Add("hunter2-long-password")
	line := "2026-01-01T00:00:00Z INFO step 42 of 100: processed 1234 records from s3://bucket/key.json (ok)\n"
	text := []byte(strings.Repeat(line, 64<<10/len(line)))
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var out strings.Builder
		w := &outputWriter{w: &out, secrets: &sec}
		for p := 0; p < len(text); p += 512 {
			if _, err := w.Write(text[p:min(p+512, len(text))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
