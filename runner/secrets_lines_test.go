package runner

import (
	"strings"
	"testing"
)

// TestMultiLineSecretScrubbedByLine: a PEM key is scrubbed line by line,
// and the job output's scrubber never holds back a whole line.
func TestMultiLineSecretScrubbedByLine(t *testing.T) {
	var s Secrets
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\n" + strings.Repeat("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n", 10) + "-----END OPENSSH PRIVATE KEY-----\n"
	s.Add(key)
	if got := s.Scrub("leak: " + key); strings.Contains(got, "b3BlbnNza") || strings.Contains(got, "PRIVATE KEY") {
		t.Fatalf("a line of the key survived: %q", got)
	}
	var out strings.Builder
	w := &outputWriter{w: &out, secrets: &s}
	_, _ = w.Write([]byte("running\nb3BlbnNza"))
	if out.String() != "running\n" {
		t.Fatalf("a whole line is held back, or a secret's beginning is not: %q", out.String())
	}
	_, _ = w.Write([]byte("C1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"))
	if out.String() != "running\n[redacted]\n" {
		t.Fatalf("a secret split across writes: %q", out.String())
	}
}
