package runner_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/runner"
)

// passphrase is a multi-word secret: its words are what a server that
// splits, re-cases or reverses it can show one by one.
const passphrase = "Correct horse Battery stäple of"

// passphraseWords are the words long enough to be scrubbed alone ("of" is
// too short, see minSecretLen).
var passphraseWords = []string{"Correct", "horse", "Battery", "stäple"}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// TestScrubMultiWordSecret: a passphrase is scrubbed whole and word by
// word, in any case, reversed, and in every wire form of the scrubber,
// whether the server echoes it whole, re-cased, reversed or split into its
// words. Before, only the whole value in its exact case was found: 638 of
// the 972 cases below leaked a word.
func TestScrubMultiWordSecret(t *testing.T) {
	secrets := &runner.Secrets{}
	secrets.Add(passphrase)
	var texts []string
	for _, s := range []string{passphrase, strings.ToUpper(passphrase), strings.ToLower(passphrase), strings.ToTitle(passphrase),
		reverse(passphrase), strings.ToUpper(reverse(passphrase)), "the words: " + strings.Join(passphraseWords, "', '")} {
		for _, form := range wireForms(s) {
			texts = append(texts, form)
		}
	}
	for _, w := range passphraseWords {
		for _, v := range []string{w, strings.ToUpper(w), strings.ToLower(w), reverse(w), strings.ToUpper(reverse(w))} {
			for _, form := range wireForms(v) {
				texts = append(texts, form)
			}
		}
	}
	leaked := 0
	for _, text := range texts {
		for _, in := range []string{"error: " + text + " refused", `{"detail":"` + text + `"}`} {
			out := strings.ToLower(secrets.Scrub(in))
			for _, w := range passphraseWords {
				if strings.Contains(out, strings.ToLower(w)) || strings.Contains(out, strings.ToLower(reverse(w))) {
					leaked++
					t.Errorf("%q of %q survived: %q", w, in, out)
					break
				}
			}
		}
	}
	t.Logf("%d of %d cases leaked a word", leaked, 2*len(texts))
	// The rest of a text is kept; a word of the secret inside a longer
	// word is still redacted (a server may glue the words together).
	assert.Equal(t, "check the key token of the [redacted]s' owner", secrets.Scrub("check the key token of the horses' owner"))
}

// TestScrubWordsNotSplitOnPunctuation: only whitespace separates words. A
// token's parts joined by "-" or "." are no words: "SECRET-token-9f8e7d"
// must not redact every "token" in the hints that name the key.
func TestScrubWordsNotSplitOnPunctuation(t *testing.T) {
	secrets := &runner.Secrets{}
	secrets.Add("SECRET-token-9f8e7d")
	secrets.Add("pass-abcdef")
	assert.Equal(t, `check the key "token" and the password`, secrets.Scrub(`check the key "token" and the password`))
	assert.Equal(t, "echo [redacted] and [redacted]", secrets.Scrub("echo secret-TOKEN-9F8E7D and D7E8F9-NEKOT-TERCES"))
}

// TestScrubMultiLineSecretNotByWord: the lines of a PEM key are no
// passphrase; their words ("PRIVATE") are not scrubbed alone, or every
// hint naming the key "ssh-privatekey" would be mangled.
func TestScrubMultiLineSecretNotByWord(t *testing.T) {
	secrets := &runner.Secrets{}
	secrets.Add("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n")
	assert.Equal(t, `check the key "ssh-privatekey"`, secrets.Scrub(`check the key "ssh-privatekey"`))
}
