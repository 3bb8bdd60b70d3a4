package testutil

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
)

// HostileForm is a secret written the way a hostile or echoing server
// might write it back, in an encoding no scrubber is sure to know.
type HostileForm struct {
	Name string
	Text string
}

// HostileForms are secret's forms that the outside sweep found the
// scrubber missing: hex (both cases), base32, MIME base64 broken into
// lines, quoted-printable, decimal entities without ';', \xHH, octal,
// doubled quotes, reversed, upper-cased, UTF-16 (both byte orders); and
// for a passphrase, its words split apart, lower-, title- and upper-cased,
// and reversed word by word.
func HostileForms(secret string) []HostileForm {
	var qp, ent, hx, oct, dq strings.Builder
	for i := 0; i < len(secret); i++ {
		fmt.Fprintf(&qp, "=%02X", secret[i])
		fmt.Fprintf(&ent, "&#%d", secret[i])
		fmt.Fprintf(&hx, `\x%02x`, secret[i])
		fmt.Fprintf(&oct, `\%03o`, secret[i])
		dq.WriteByte(secret[i])
		if i%4 == 1 {
			dq.WriteString(`""`)
		}
	}
	// MIME base64: the secret within a longer echo, in lines of 76.
	b64 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("Authorization: Bearer "+secret+"\r\n", 3)))
	var mime strings.Builder
	for len(b64) > 76 {
		mime.WriteString(b64[:76] + "\r\n")
		b64 = b64[76:]
	}
	mime.WriteString(b64)
	forms := []HostileForm{
		{"hex", hex.EncodeToString([]byte(secret))},
		{"HEX", strings.ToUpper(hex.EncodeToString([]byte(secret)))},
		{"base32", base32.StdEncoding.EncodeToString([]byte(secret))},
		{"MIME base64", mime.String()},
		{"quoted-printable", qp.String()},
		{"entities without ;", ent.String()},
		{`\xHH`, hx.String()},
		{"octal", oct.String()},
		{"doubled quotes", dq.String()},
		{"reversed", reverse(secret)},
		{"upper-cased", strings.ToUpper(secret)},
		{"UTF-16LE", utf16String(secret, false)},
		{"UTF-16BE", utf16String(secret, true)},
		{"plain", secret},
	}
	// A passphrase's words, as a server that splits, re-cases or reverses
	// them shows them.
	if words := strings.Fields(secret); len(words) > 1 {
		var rw []string
		for _, w := range words {
			rw = append(rw, reverse(w))
		}
		forms = append(forms,
			HostileForm{"words split", "word '" + strings.Join(words, "' is wrong; word '") + "' is wrong"},
			HostileForm{"lower-cased", strings.ToLower(secret)},
			HostileForm{"title-cased", titleCase(secret)},
			HostileForm{"words reversed", strings.Join(rw, " ")},
			HostileForm{"reversed upper-cased", strings.ToUpper(reverse(secret))})
	}
	return forms
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func titleCase(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		r := []rune(strings.ToLower(w))
		r[0] = unicode.ToUpper(r[0])
		words[i] = string(r)
	}
	return strings.Join(words, " ")
}

func utf16String(s string, bigEndian bool) string {
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(s)) {
		if bigEndian {
			b.WriteByte(byte(u >> 8))
			b.WriteByte(byte(u))
		} else {
			b.WriteByte(byte(u))
			b.WriteByte(byte(u >> 8))
		}
	}
	return b.String()
}

// Leaks returns the names of the forms of secret found in text, and
// whether a line of the MIME form, secret's halves or, for a passphrase,
// one of its words survived.
func Leaks(text, secret string) []string {
	var found []string
	for _, f := range HostileForms(secret) {
		parts := []string{f.Text}
		if f.Name == "MIME base64" {
			parts = strings.Split(f.Text, "\r\n")
		}
		for _, p := range parts {
			if len(p) >= 8 && strings.Contains(text, p) {
				found = append(found, f.Name)
				break
			}
		}
	}
	// A passphrase leaks word by word: any word of 4 letters or more, in
	// any case, reversed or not.
	if words := strings.Fields(secret); len(words) > 1 {
		lower := strings.ToLower(text)
		for _, w := range words {
			w = strings.ToLower(w)
			if len([]rune(w)) >= 4 && (strings.Contains(lower, w) || strings.Contains(lower, reverse(w))) {
				found = append(found, "word "+w)
			}
		}
	}
	// A secret cut in two still leaks its halves.
	if h := len(secret) / 2; h >= 6 && (strings.Contains(text, secret[:h]) || strings.Contains(text, secret[h:])) {
		found = append(found, "half")
	}
	return found
}

// HostileBody is a failed answer's body that carries a secret.
type HostileBody struct {
	Name, ContentType, Body string
}

// HostileBodies are, for each of secret's HostileForms, the form as a bare
// text body and inside each of the API's documented error shapes (each a
// function of the reason, which it must escape as its format needs).
func HostileBodies(secret string, shapes map[string]func(reason string) (ctype, body string)) []HostileBody {
	var out []HostileBody
	for _, f := range HostileForms(secret) {
		text := "echo of your request: " + f.Text
		out = append(out, HostileBody{f.Name + "/text", "text/plain", text},
			HostileBody{f.Name + "/html", "text/html", "<html><body><pre>" + text + "</pre></body></html>"})
		for name, shape := range shapes {
			ct, body := shape("invalid credential " + f.Text)
			out = append(out, HostileBody{f.Name + "/" + name, ct, body})
		}
	}
	return out
}

// JSONString is s as a JSON string literal.
func JSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
