package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// Secrets is the set of secret values read so far. Everything the runner
// writes where people can read it (logs, ConfigMap, outputs, messages) goes
// through Scrub, so a secret that a backend echoes in an error cannot leak,
// in whatever encoding the server echoed it (see secretforms.go).
type Secrets struct {
	mu     sync.RWMutex
	values []secret
}

// minSecretLen: shorter values are not scrubbed, because replacing every "a"
// or "12" in the logs would hide more than it protects.
const minSecretLen = 4

// Add registers a secret value. A value of several lines (a PEM private
// key) is registered line by line: every line is still scrubbed, and the
// job output's scrubber need not hold back kilobytes (the longest secret)
// before it can show a line. A value of one line with spaces in it (a
// passphrase) is also registered word by word: a server may split it, and
// each word is part of the secret (see passphraseWords). Every value is
// also registered reversed, and all are matched in any letter case.
func (s *Secrets) Add(v string) {
	if strings.Contains(v, "\n") {
		for _, line := range strings.Split(v, "\n") {
			s.add(strings.TrimSpace(line), true)
		}
		return
	}
	s.add(v, true)
	for _, w := range passphraseWords(v) {
		s.add(w, false)
	}
}

// minWordRunes is the shortest word of a passphrase that is scrubbed on its
// own. Words of three letters or fewer ("the", "of", "and") are in every
// sentence of every log; scrubbing them would leave no message readable,
// and each carries about a tenth of a diceware passphrase's strength. From
// four letters on, a word is rare enough in messages to be worth hiding.
const minWordRunes = 4

// maxPassphrase bounds the value that is split into words. A passphrase is
// typed by a person; a longer value with spaces is a document (a key file
// written on one line) whose words ("type", "project") are no secret, and
// each word registered costs patterns to compile.
const maxPassphrase = 256

// passphraseWords returns the words of a value that has spaces, trimmed of
// the punctuation around them, that are minWordRunes long or more. Only
// whitespace separates words: the parts of a token joined by "-" or "."
// ("SECRET-token-9f8e7d") are no words, and scrubbing them alone would
// redact every "token" in the hints that name a key.
func passphraseWords(v string) []string {
	fields := strings.Fields(v)
	if len(fields) < 2 || len(v) > maxPassphrase {
		return nil
	}
	var words []string
	for _, f := range fields {
		w := strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if utf8.RuneCountInString(w) >= minWordRunes {
			words = append(words, w)
		}
	}
	return words
}

// add registers one value and its reverse (a server that writes the text
// backwards). Only a value as it was read gets base64 cores: nothing
// base64-encodes a text it reversed or split first.
func (s *Secrets) add(v string, cores bool) {
	if len(v) < minSecretLen {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range []string{v, reversed(v)} {
		if !slices.ContainsFunc(s.values, func(have secret) bool { return have.folded == foldCase(x) }) {
			s.values = append(s.values, newSecret(x, cores && i == 0))
		}
	}
	// Longest first, so that a cut short text's beginning is matched by
	// the longest secret it begins (scrubCut).
	sort.Slice(s.values, func(i, j int) bool { return len(s.values[i].value) > len(s.values[j].value) })
}

// reversed is s written backwards, rune by rune; a byte that is no UTF-8
// stays itself (a conversion to []rune would make it U+FFFD, which every
// such byte of a text then matched).
func reversed(s string) string {
	b := make([]byte, 0, len(s))
	for i := len(s); i > 0; {
		_, n := utf8.DecodeLastRuneInString(s[:i])
		b = append(b, s[i-n:i]...)
		i -= n
	}
	return string(b)
}

// Scrub replaces every registered secret in text with "[redacted]", in any
// letter case and encoding, and a secret's beginning where text was cut
// short ("..."): a backend that clips a long error body may cut a secret
// in two, and the half left would no longer match.
func (s *Secrets) Scrub(text string) string {
	if s == nil {
		return text
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.values) == 0 {
		return text
	}
	// Every match is found in the unchanged text and all are redacted at
	// once: a word of a passphrase redacted first would break the match
	// of the whole passphrase's encoded form around it. The windows of
	// text near an escape or a cut are found once, for the longest secret,
	// and each secret's patterns run in them.
	folded := foldCase(text)
	reach := 0
	for _, v := range s.values {
		reach = max(reach, v.maxLen)
	}
	var spans []span
	escapes := nearWindows(text, nextEscape, reach)
	for _, v := range s.values {
		spans = append(spans, indexAll(folded, v.folded)...)
		spans = append(spans, matchSpans(text, escapes, v.patterns.get)...)
		for _, e := range v.exact {
			spans = append(spans, indexAll(text, e)...)
		}
	}
	text = redactSpans(text, spans)
	if nextCut(text) < 0 {
		return text
	}
	spans = nil
	cuts := nearWindows(text, nextCut, reach)
	for _, v := range s.values {
		spans = append(spans, matchSpans(text, cuts, v.cuts.get)...)
	}
	text = redactSpans(text, spans)
	for _, v := range s.values {
		for _, f := range v.cuttable {
			text = scrubCut(text, f)
		}
	}
	return text
}

// indexAll returns where sub is found in text, overlaps included.
func indexAll(text, sub string) []span {
	var spans []span
	for from := 0; ; {
		i := strings.Index(text[from:], sub)
		if i < 0 {
			return spans
		}
		spans = append(spans, span{from + i, from + i + len(sub)})
		from += i + 1
	}
}

// scrubCut redacts the longest beginning of secret (of minSecretLen bytes
// or more) that ends right before a "..." or "…" in text.
func scrubCut(text, secret string) string {
	for _, mark := range []string{"...", "…"} {
		text = scrubCutAt(text, secret, mark)
	}
	return text
}

func scrubCutAt(text, secret, mark string) string {
	for from := 0; ; {
		i := strings.Index(text[from:], mark)
		if i < 0 {
			return text
		}
		cut := from + i
		for l := min(len(secret)-1, cut); l >= minSecretLen; l-- {
			if foldEqual(text[cut-l:cut], secret[:l]) {
				text = text[:cut-l] + "[redacted]" + text[cut:]
				cut += len("[redacted]") - l
				break
			}
		}
		from = cut + len(mark)
	}
}

// safeCut moves cut back, if need be, so that no secret straddles it: no
// whole secret, and no secret's beginning at the end of b whose rest has not
// arrived yet, in any of its literal forms (the value, its encodings, its
// base64 cores). A cut that is not at a line's end may also fall inside a
// form that mixes escapes, which cannot be listed: it goes back to the first
// escape character within a secret's reach. The text before the cut can
// then be scrubbed on its own.
func (s *Secrets) safeCut(b []byte, cut int) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for moved := true; moved; {
		moved = false
		for _, v := range s.values {
			for _, f := range v.cuttable {
				if i := straddles(b, cut, f); i >= 0 {
					cut, moved = i, true
				}
			}
		}
	}
	if cut > 0 && b[cut-1] != '\n' && b[cut-1] != '\r' && len(s.values) > 0 {
		n := 0
		for _, v := range s.values {
			n = max(n, v.maxLen)
		}
		from := max(0, cut-n+1)
		if i := bytes.IndexAny(b[from:cut], "%\\&+"); i >= 0 {
			cut = from + i
		}
	}
	return cut
}

// straddles returns where the first occurrence of f (or of its beginning,
// at the end of b) that starts before cut and ends after it starts, or -1.
// f is case-folded (see foldCase).
func straddles(b []byte, cut int, f string) int {
	for i := max(0, cut-len(f)+1); i < cut; i++ {
		n := min(len(f), len(b)-i)
		if foldEqual(b[i:i+n], f[:n]) {
			return i
		}
	}
	return -1
}

// identityKeys name credentials that say who, not what proves it: a user
// name or a service CRN is no secret, and scrubbing a user named "bridge"
// would mangle every log line that mentions a bridge-cm.
// Public SSH material (host keys, a user certificate) is no secret either.
var identityKeys = map[string]bool{"username": true, "user": true, "crn": true, "servicecrn": true, "service_crn": true,
	"known_hosts": true, "ssh-known-hosts": true, "ssh-certificate": true}

// baseKey is a credential's name as the tables here know it: lower-case,
// and without the jumpN- prefix of a jump host's own credentials
// (jump1-ssh-privatekey, jump1-known_hosts, see package sshexec), which
// are what the unprefixed key is.
func baseKey(name string) string {
	n := strings.ToLower(name)
	if rest, ok := strings.CutPrefix(n, "jump"); ok {
		if i := strings.IndexByte(rest, '-'); i > 0 && strings.Trim(rest[:i], "0123456789") == "" {
			n = rest[i+1:]
		}
	}
	return n
}

func isIdentityKey(name string) bool { return identityKeys[baseKey(name)] }

// DirCredentials reads credentials from a mounted Secret directory: one file
// per key. Files are read on every call, so a rotated Secret (the kubelet
// swaps the files) is picked up without a restart.
type DirCredentials struct {
	Dir     string
	Secrets *Secrets
	// Flag is the flag that sets Dir, for messages (default --credentials-dir).
	Flag string
}

// Get returns the first of names present in the directory, trimmed (a Secret
// made with `echo` ends in a newline). It errors, naming the directory and the
// expected keys, when none is present or the directory cannot be read.
func (c DirCredentials) Get(names ...string) (string, error) {
	if c.Dir == "" {
		return "", backends.Invalid("credentials", "no credentials directory is set; mount the Secret and pass %s", c.flag())
	}
	for _, n := range names {
		b, err := readCredentialFile(filepath.Join(c.Dir, n))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil && record.FaultClass(err) != "" {
			return "", err
		}
		if err != nil {
			return "", backends.Invalid("credentials", "cannot read %s: %v; check the Secret's mount and file permissions", filepath.Join(c.Dir, n), unwrapPathErr(err))
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			continue
		}
		if err := checkCredentialText(filepath.Join(c.Dir, n), n, v); err != nil {
			return "", err
		}
		if !isIdentityKey(n) {
			c.Secrets.Add(v)
		}
		return v, nil
	}
	if _, err := os.Stat(c.Dir); err != nil {
		return "", backends.Invalid("credentials", "cannot read the credentials directory %s: %v; mount the Secret there or pass %s", c.Dir, unwrapPathErr(err), c.flag())
	}
	return "", backends.Invalid("credentials", "none of the keys %s is in %s; add one to the Secret", strings.Join(names, ", "), c.Dir)
}

// multiLineKeys are credentials whose text has lines: SSH keys,
// certificates and known_hosts. Every other credential is one line that
// goes into a header or a form, where a newline or a NUL is refused by the
// HTTP client on every request: a fault of the Secret, not of the network.
var multiLineKeys = map[string]bool{"ssh-privatekey": true, "privatekey": true, "id_ed25519": true, "id_ecdsa": true, "id_rsa": true,
	"ssh-certificate": true, "certificate": true, "known_hosts": true, "ssh-known-hosts": true}

// checkCredentialText refuses a credential with a control character in it
// (a NUL anywhere; a newline, carriage return or other control character in
// a one-line credential), naming the file and where, never the value.
func checkCredentialText(path, key, v string) error {
	multi := multiLineKeys[baseKey(key)]
	for i, r := range v {
		if (r >= 0x20 && r != 0x7f) || r == '\t' || (multi && (r == '\n' || r == '\r')) {
			continue
		}
		return record.NewFault(record.FaultCredentials, "credentials", "%s holds the control character %U at byte %d, which no %s carries; "+
			"recreate the Secret from the value alone (kubectl create secret generic --from-literal, or printf '%%s' rather than echo -e)",
			path, r, i, key)
	}
	return nil
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// scrubHandler is a slog.Handler that scrubs secrets from messages and from
// every string-valued attribute, including errors and nested groups.
type scrubHandler struct {
	next    slog.Handler
	secrets *Secrets
}

// NewScrubHandler wraps next so that nothing it writes contains a secret.
func NewScrubHandler(next slog.Handler, secrets *Secrets) slog.Handler {
	return &scrubHandler{next: next, secrets: secrets}
}

func (h *scrubHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.secrets.Scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.scrub(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *scrubHandler) scrub(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.secrets.Scrub(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, ga := range attrs {
			out[i] = h.scrub(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.secrets.Scrub(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, h.secrets.Scrub(x.String()))
		}
		return slog.String(a.Key, h.secrets.Scrub(fmt.Sprint(v.Any())))
	}
	return a
}

func (h *scrubHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = h.scrub(a)
	}
	return &scrubHandler{next: h.next.WithAttrs(out), secrets: h.secrets}
}

func (h *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{next: h.next.WithGroup(name), secrets: h.secrets}
}
