package runner_test

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"html"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/runner"
)

// hostileSecret has every character that some wire encoding changes.
const hostileSecret = `p<a&s>s"w\o/r+d%x=y z'Ünï`

// wireForms are the secret as servers echo it back: each encoder as a
// server would run it, and nested (an echoed request escaped once more).
func wireForms(secret string) map[string]string {
	jsonOf := func(s string) string { b, _ := json.Marshal(s); return strings.Trim(string(b), `"`) }
	jsonRaw := func(s string) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.Trim(strings.TrimSpace(b.String()), `"`)
	}
	xmlOf := func(s string) string { var b strings.Builder; _ = xml.EscapeText(&b, []byte(s)); return b.String() }
	basic := "alice:" + secret
	return map[string]string{
		"literal":           secret,
		"json":              jsonOf(secret),
		"json no html":      jsonRaw(secret),
		"json slashes":      strings.ReplaceAll(jsonRaw(secret), "/", `\/`),
		"json in json":      jsonOf(jsonOf(secret)),
		"xml":               xmlOf(secret),
		"html":              html.EscapeString(secret),
		"xml in xml":        xmlOf(xmlOf(secret)),
		"python html":       strings.ReplaceAll(html.EscapeString(secret), "&#39;", "&#x27;"),
		"query":             url.QueryEscape(secret),
		"path":              url.PathEscape(secret),
		"query lower hex":   strings.ToLower(url.QueryEscape(secret)),
		"query twice":       url.QueryEscape(url.QueryEscape(secret)),
		"basic std":         base64.StdEncoding.EncodeToString([]byte(basic)),
		"basic url":         base64.URLEncoding.EncodeToString([]byte(basic)),
		"basic raw url":     base64.RawURLEncoding.EncodeToString([]byte(basic)),
		"base64 std offset": base64.StdEncoding.EncodeToString([]byte("ab:" + secret + ":cd")),
		"base64 alone":      base64.StdEncoding.EncodeToString([]byte(secret)),
	}
}

func TestScrubEveryWireForm(t *testing.T) {
	secrets := &runner.Secrets{}
	secrets.Add(hostileSecret)
	for name, form := range wireForms(hostileSecret) {
		for _, text := range []string{
			"error: " + form + " refused",
			form,
			`{"detail":"` + form + `"}`,
			"echo: " + form[:len(form)*2/3] + "...",
			"echo: " + form[:len(form)*2/3] + "…",
		} {
			out := secrets.Scrub(text)
			assert.NotContains(t, out, form, "%s: %q → %q", name, text, out)
			if strings.HasSuffix(text, "...") || strings.HasSuffix(text, "…") {
				cut := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(text, "echo: "), "..."), "…")
				assert.NotContains(t, out, cut[:len(cut)*3/4], "%s cut short: %q → %q", name, text, out)
			} else {
				assert.Contains(t, out, "[redacted]", "%s: %q", name, text)
			}
		}
	}
}

func TestScrubLeavesOrdinaryText(t *testing.T) {
	secrets := &runner.Secrets{}
	secrets.Add("hunter2-long")
	secrets.Add(hostileSecret)
	for _, text := range []string{
		"HTTP 401: Unauthorized; check the key token",
		"a+b=c %20 &amp; &lt; \\u003c dGhpcyBpcyBiYXNlNjQ=",
		"hunter2-lon and hunter2_long",
	} {
		assert.Equal(t, text, secrets.Scrub(text))
	}
}

// BenchmarkScrub: the cost of scrubbing a 64 KiB log chunk with four
// registered secrets (every encoding is looked for).
func BenchmarkScrub(b *testing.B) {
	secrets := &runner.Secrets{}
	for _, s := range []string{hostileSecret, "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.c2lnbmF0dXJl", "hunter2-long-password", "AKIAEXAMPLEKEY0001"} {
		secrets.Add(s)
	}
	line := "2026-01-01T00:00:00Z INFO step 42 of 100: processed 1234 records from s3://bucket/key.json (ok)\n"
	text := strings.Repeat(line, 64<<10/len(line))
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = secrets.Scrub(text)
	}
}

// An IAM access token is about 1 KB: a secret that long must register
// without a panic and be scrubbed in every wire form, whole or cut short.
func TestScrubLongSecrets(t *testing.T) {
	hostile := []rune(hostileSecret)
	for _, n := range []int{400, 512, 1100, 4096} {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			b.WriteRune(hostile[i%len(hostile)])
			b.WriteString(strconv.Itoa(i))
		}
		secret := b.String()
		secrets := &runner.Secrets{}
		assert.NotPanics(t, func() { secrets.Add(secret) }, "len %d", n)
		for name, form := range wireForms(secret) {
			got := secrets.Scrub("error: " + form + " refused")
			if strings.Contains(name, "base64") || strings.Contains(name, "basic") {
				// The edges of a base64 text also encode what surrounds
				// the secret; its middle must be gone.
				assert.NotContains(t, got, form[len(form)/2-20:len(form)/2+20], "len %d, form %s", n, name)
				continue
			}
			// What is left between the redactions may be a stray escape
			// character of a chunk boundary, never a character of the value.
			left := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(got, "error: "), " refused"), "[redacted]", "")
			assert.Empty(t, strings.Trim(left, `\%&;#+`), "len %d, form %s: %q", n, name, got)
			cut := secrets.Scrub("error: " + form[:len(form)/2] + "...")
			assert.NotContains(t, cut, form[len(form)/2-40:len(form)/2], "len %d, form %s cut", n, name)
		}
	}
}
