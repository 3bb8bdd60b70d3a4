package httpx

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A failed answer's body is the server's to write. A server that echoes
// the request (a proxy's error page, a debugging handler, a hostile host)
// writes our credentials back in whatever encoding it likes: hex, base32,
// base64 broken into lines, quoted-printable, entities without ';', \xHH,
// octal, reversed, upper-cased, UTF-16. No scrubber can know them all. So
// a body goes into no message, record or output, except the one field of
// the API's documented error shape that carries the reason, and that only
// as words: Reason drops every token that could be an encoded value.

// NotShown stands in a message for a body that is not in the API's
// documented error shape.
const NotShown = "body not in the documented error shape, not shown"

// MaxReason bounds the reason a message repeats.
const MaxReason = 200

// Reason makes a reason parsed from a documented error field fit for a
// message: each token that could carry an encoded value becomes "…", and
// the rest is clipped to MaxReason bytes, the cut marked with "…". It
// returns "" when no word is left.
func Reason(s string) string {
	var words []string
	kept := 0
	for _, w := range strings.Fields(s) {
		if encodedLooking(w) {
			if len(words) == 0 || words[len(words)-1] != "…" {
				words = append(words, "…")
			}
			continue
		}
		words = append(words, w)
		kept++
	}
	if kept == 0 {
		return ""
	}
	r := strings.Join(words, " ")
	if len(r) > MaxReason {
		n := MaxReason
		for n > 0 && !utf8.RuneStart(r[n]) {
			n--
		}
		r = r[:n] + "…"
	}
	return r
}

// encodedLooking reports whether a token of a reason could be a value
// rather than a word: anything unprintable (UTF-16 is full of NULs), an
// escape (\, &#, %XX, =XX twice), a double quote inside it, letters mixed
// with digits over 8 bytes or more (hex, base32, base64, a token reversed
// or upper-cased; "JobId=42" is two parts), more than 20 digits, or a long
// run of base64's alphabet.
func encodedLooking(w string) bool {
	if !utf8.ValidString(w) || strings.ContainsFunc(w, func(r rune) bool { return !unicode.IsPrint(r) || r == utf8.RuneError }) {
		return true
	}
	if strings.ContainsAny(w, `\`) || strings.Contains(w, "&#") || hexEscapes(w, '%') > 0 || hexEscapes(w, '=') > 1 {
		return true
	}
	core := strings.Trim(w, `.,;:!?()[]{}"'<>`)
	if strings.Contains(core, `"`) {
		// A quote inside a word: no word has one; CSV-style doubled
		// quotes break a value into pieces no scrubber recognizes.
		return true
	}
	for _, part := range strings.FieldsFunc(core, func(r rune) bool { return r == '=' || r == ':' }) {
		if valueLooking(part) {
			return true
		}
	}
	return len(core) >= 24 && !strings.ContainsFunc(core, notBase64)
}

// valueLooking: letters mixed with digits over 8 bytes or more, or more
// than 20 digits.
func valueLooking(part string) bool {
	letters := strings.IndexFunc(part, unicode.IsLetter) >= 0
	digits := strings.IndexFunc(part, unicode.IsDigit) >= 0
	return len(part) >= 8 && letters && digits || len(part) > 20 && !letters
}

func notBase64(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '/' || r == '=')
}

// hexEscapes counts mark followed by two hex digits in w.
func hexEscapes(w string, mark byte) int {
	n := 0
	for i := 0; i+2 < len(w); i++ {
		if w[i] == mark && isHex(w[i+1]) && isHex(w[i+2]) {
			n++
		}
	}
	return n
}

func isHex(b byte) bool { return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' }

// Failure words a failed answer for a message: "HTTP 502 from slurmrestd:
// reason" with the reason made by Reason, or, when the body gave none, the
// status alone and that the body is not shown. where says where to look
// for more ("slurmrestd's log"); it may be empty.
func Failure(status int, server, reason, where string) string {
	s := "HTTP " + strconv.Itoa(status) + " from " + server
	if r := Reason(reason); r != "" {
		s += ": " + r
	} else {
		s += " (" + NotShown + ")"
	}
	if where != "" {
		s += "; " + where + " says more"
	}
	return s
}
