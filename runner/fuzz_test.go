package runner

// Fuzz targets for the runner's parsers of outside input: the state keys a
// person may edit by hand (submit intent) and secret scrubbing (the job
// description's are package record's). Each asserts invariants, not just "no panic". Run one with
//
//	go test -run='^$' -fuzz='^FuzzParseIntent$' -fuzztime=30s ./runner
//
// (hack/fuzz.sh runs them all briefly).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzParseIntent: status.submitIntent may be edited by hand; a parsed
// intent must survive String and parse again.
func FuzzParseIntent(f *testing.F) {
	f.Add("host/123/456@2025-01-01T00:00:00.123456789Z")
	f.Add(intent{holder: "pod-x/1/2", at: time.Unix(1700000000, 5).UTC()}.String())
	f.Add("nohost")
	f.Add("a@b@c")
	f.Add("@2025-01-01T00:00:00+02:00")
	f.Fuzz(func(t *testing.T, v string) {
		in, ok := parseIntent(v)
		if !ok {
			return
		}
		if strings.Contains(in.holder, "@") {
			t.Fatalf("holder %q contains @", in.holder)
		}
		back, ok := parseIntent(in.String())
		if !ok || back.holder != in.holder || !back.at.Equal(in.at) {
			t.Fatalf("%q → %+v → %q → %+v %v", v, in, in.String(), back, ok)
		}
		_ = holderGone(in.holder) // must not panic on any holder
	})
}

// fzSecretOK: secrets as they appear in Secrets (tokens, keys, passwords):
// the scrubber replaces them with "[redacted]", so a secret made of that
// text's characters could be recreated by the replacement itself.
func fzSecretOK(s string) bool {
	return len(s) >= minSecretLen && !strings.ContainsAny(s, "[]\"\\") && !strings.Contains("[redacted]", s) &&
		strings.TrimSpace(s) == s && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r > 0x7e })
}

// FuzzScrub: no registered secret survives Scrub, nor the scrubbing log
// handler (message, string attributes, errors, groups), in text or JSON.
func FuzzScrub(f *testing.F) {
	f.Add("SECRET-slurm-token-9f8e7d", "", "HTTP 401: token SECRET-slurm-token-9f8e7d refused")
	f.Add("eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.sig", "hunter22", "user=root pass=hunter22 jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.sig")
	f.Add("abcd", "abcdabcd", "abcdabcdabcd")
	f.Add("aaaa", "aaa", "aaaaaaaaa")
	f.Add("x", "", "x")
	f.Fuzz(func(t *testing.T, s1, s2, text string) {
		var sec Secrets
		var secrets []string
		for _, s := range []string{s1, s2} {
			sec.Add(s)
			if fzSecretOK(s) {
				secrets = append(secrets, s)
			}
		}
		out := sec.Scrub(text)
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Fatalf("secret %q survives Scrub(%q) = %q", s, text, out)
			}
		}
		// Every wire form of a secret, inserted into the text, is gone.
		for _, s := range secrets {
			for name, form := range fzWireForms(s) {
				if strings.HasPrefix(name, "basic") && len(s) < 8 {
					continue // shorter: too few base64 characters are its own
				}
				in := text + " " + form + " " + text
				if out := sec.Scrub(in); strings.Contains(out, form) {
					t.Fatalf("the %s form %q of secret %q survives Scrub(%q) = %q", name, form, s, in, out)
				}
			}
		}
		if fzClean(text, s1, s2) && out != text {
			t.Fatalf("Scrub changed a text without secrets: %q → %q", text, out)
		}
		fzCheckScrubLog(t, &sec, secrets, text)
	})
}

// fzClean: text holds no secret in any form, and no beginning of one cut
// short (which Scrub redacts on purpose: see scrubCut). Texts with escape
// characters may hold an encoded form; they are not judged clean.
func fzClean(text string, candidates ...string) bool {
	clean := !strings.ContainsAny(text, "%&\\+…")
	// Scrub matches every secret in any letter case, reversed, a value's
	// lines and a passphrase's words on their own (Secrets.Add): each is a
	// form of it.
	var forms []string
	for _, s := range candidates {
		parts := append([]string{s}, passphraseWords(s)...)
		for _, line := range strings.Split(s, "\n") {
			parts = append(parts, strings.TrimSpace(line))
		}
		for _, f := range parts {
			forms = append(forms, f, reversed(f))
		}
	}
	folded := []string{strings.ToUpper(text), foldCase(text)}
	for _, s := range forms {
		for _, t := range folded {
			if len(s) >= minSecretLen && (strings.Contains(t, strings.ToUpper(s)) || strings.Contains(t, foldCase(s))) {
				clean = false
			}
			for l := minSecretLen; l < len(s); l++ {
				if strings.Contains(t, strings.ToUpper(s[:l])+"...") || strings.Contains(t, foldCase(s[:l])+"...") {
					clean = false
				}
			}
		}
	}
	for _, s := range candidates {
		if len(s) >= minSecretLen && fzHasBase64Of(text, s) {
			clean = false
		}
	}
	return clean
}

// fzCheckScrubLog: no secret reaches the scrubbing log handler's output
// through the message, attributes, errors or groups.
func fzCheckScrubLog(t *testing.T, sec *Secrets, secrets []string, text string) {
	t.Helper()
	rec := &fzRecorder{}
	log := slog.New(NewScrubHandler(rec, sec)).With("pre", text, "pre_err", errors.New(text)).WithGroup("g")
	log.Info(text, "s", text, "err", errors.New(text), slog.Group("grp", slog.String("in", text)), "any", []string{text})
	if len(rec.out) == 0 {
		t.Fatal("nothing was logged")
	}
	for _, s := range secrets {
		for _, v := range rec.out {
			if strings.Contains(v, s) {
				t.Fatalf("secret %q reached the log: %q", s, rec.out)
			}
		}
	}
}

// fzWireForms: the secret as servers echo it: JSON, XML, URL-encoded, and
// inside the base64 of a Basic auth header.
func fzWireForms(s string) map[string]string {
	j, _ := json.Marshal(s)
	var x strings.Builder
	_ = xml.EscapeText(&x, []byte(s))
	return map[string]string{
		"json": strings.Trim(string(j), `"`), "xml": x.String(), "query": url.QueryEscape(s), "path": url.PathEscape(s),
		"basic": base64.StdEncoding.EncodeToString([]byte("user:" + s)), "basic url": base64.URLEncoding.EncodeToString([]byte("u:" + s)),
	}
}

// fzHasBase64Of: text holds 6 characters or more that base64 encodings of s
// produce (Scrub may redact those, rightly or not).
func fzHasBase64Of(text, s string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pad := 0; pad < 3; pad++ {
			e := enc.EncodeToString(append(make([]byte, pad), s...))
			for i := 0; i+6 <= len(e); i++ {
				if strings.Contains(text, e[i:i+6]) {
					return true
				}
			}
		}
	}
	return false
}

// fzRecorder is a slog.Handler that keeps every message and attribute value
// as text, before any encoding (which could hide or fake a secret).
type fzRecorder struct{ out []string }

func (r *fzRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *fzRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.out = append(r.out, rec.Message)
	rec.Attrs(func(a slog.Attr) bool { r.attr(a); return true })
	return nil
}
func (r *fzRecorder) attr(a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			r.attr(g)
		}
		return
	}
	r.out = append(r.out, v.String())
}
func (r *fzRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		r.attr(a)
	}
	return r
}
func (r *fzRecorder) WithGroup(string) slog.Handler { return r }
