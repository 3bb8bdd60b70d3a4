package runner

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// A secret leaves this process in the encoding of the request that carries
// it (a JSON body, an XML logon, a form, a Basic header) and comes back from a
// server that echoes the request in the encoding of its answer. Scrubbing the
// literal value alone misses all of these, so each secret is scrubbed in
// every form it can take on the wire.

// secret is one registered value with the forms Scrub looks for, in any
// letter case: a server may upper-case what it echoes.
type secret struct {
	value string
	// folded is value case-folded (see foldCase), as Scrub finds it in a
	// text folded the same way.
	folded string
	// patterns match the value with each character written literally or
	// in any escape a wire format uses for it (JSON, XML/HTML entities,
	// percent-encoding, "+" for a space), mixed freely and nested a few
	// levels deep (an echoed body escaped once more by the answer). A long
	// value (an IAM token is ~1 KB) has one pattern per chunk of it: one
	// pattern for the whole would exceed what regexp compiles, and every
	// chunk of a secret is secret itself.
	patterns *lazyRegexps
	// cuts match a chunk's beginning (minSecretLen runes or more), in the
	// same mix of encodings, right before a "..." or "…": a text cut short
	// there, perhaps in the middle of an escape.
	cuts *lazyRegexps
	// exact are fixed strings: the cores of the value's base64 encodings
	// (see base64Cores), which a pattern cannot describe.
	exact []string
	// cuttable are the whole-value forms, case-folded, whose beginning is
	// redacted when a text was cut short right after it (see scrubCut).
	cuttable []string
	// maxLen bounds the length of the longest text this secret's forms can
	// match, for the stream scrubber's hold-back.
	maxLen int
}

// Nesting bounds: an escape escaped again (&amp;lt;, %253C, \\\") is still
// recognized, up to this many extra levels.
const (
	maxNest = 3
	// maxRuneForm is the longest text one rune can match in pattern:
	// "&" + "amp;"×maxNest + "#x" + 8 digits + ";", or a 4-byte UTF-8
	// rune percent-encoded with "25"×maxNest each.
	maxRuneForm = 4 * (3 + 2*maxNest)
	// minBase64Core: shorter base64 cores are not scrubbed; they would
	// match ordinary words in a base64-heavy text.
	minBase64Core = 6
	// chunkRunes: values longer than this get one pattern per chunk of at
	// most this many runes (regexp refuses a program for ~500 runes).
	chunkRunes = 96
)

// newSecret makes the forms of v, with the cores of its base64 encodings
// if cores is set.
func newSecret(v string, cores bool) secret {
	s := secret{value: v, folded: foldCase(v), patterns: &lazyRegexps{build: runePatterns, value: v}, cuts: &lazyRegexps{build: cutPattern, value: v}}
	s.maxLen = maxRuneForm * utf8.RuneCountInString(v)
	if cores {
		s.exact = base64Cores(v)
	}
	for _, f := range append(append([]string{v}, encodedForms(v)...), s.exact...) {
		s.cuttable = append(s.cuttable, foldCase(f))
		s.maxLen = max(s.maxLen, len(f))
	}
	return s
}

// foldCase maps every letter of s to one rune of its case-folding orbit
// (the least one whose UTF-8 encoding is as long as the letter's), so that
// two texts that differ only in letter case fold to the same bytes, and a
// match in the folded text is at the same offsets in s.
func foldCase(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			b[i] = asciiUpper[c]
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if f := foldRune(r); f != r {
			utf8.EncodeRune(b[i:], f)
		}
		i += n
	}
	return string(b)
}

// asciiUpper maps each ASCII byte to its upper case, for foldCase's loop.
var asciiUpper = func() (t [utf8.RuneSelf]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'a' <= i && i <= 'z' {
			t[i] = byte(i - 'a' + 'A')
		}
	}
	return t
}()

// foldRune is r's representative in foldCase.
func foldRune(r rune) rune {
	if r == utf8.RuneError {
		return r
	}
	best := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < best && utf8.RuneLen(f) == utf8.RuneLen(r) {
			best = f
		}
	}
	return best
}

// foldEqual reports whether foldCase(s) == folded, without copying s.
func foldEqual[T string | []byte](s T, folded string) bool {
	if len(s) != len(folded) {
		return false
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if asciiUpper[c] != folded[i] {
				return false
			}
			i++
			continue
		}
		var buf [utf8.UTFMax]byte
		r, n := utf8.DecodeRune(buf[:copy(buf[:], s[i:])])
		if f := foldRune(r); f != r && r != utf8.RuneError {
			utf8.EncodeRune(buf[:], f)
		}
		if string(buf[:n]) != folded[i:i+n] {
			return false
		}
		i += n
	}
	return true
}

// lazyRegexps are a secret's patterns, compiled on first use: they take
// about a megabyte per secret, and most runs never see a text that holds an
// escape or a cut near where a secret could be.
type lazyRegexps struct {
	once  sync.Once
	build func(chunk string) string
	value string
	res   []*regexp.Regexp
}

func (l *lazyRegexps) get() []*regexp.Regexp {
	l.once.Do(func() {
		// A regular expression reads every byte that is no UTF-8 as
		// U+FFFD, so one built from such a value would match any other
		// such bytes ("\xe9..." for a secret "\xeb..."): that value is
		// found byte for byte only (Scrub's plain search).
		if !utf8.ValidString(l.value) {
			return
		}
		for _, c := range chunks(l.value) {
			l.res = append(l.res, regexp.MustCompile(l.build(c)))
		}
	})
	return l.res
}

// chunks splits v into pieces of at most chunkRunes runes, none shorter than
// chunkRunes/2 unless v itself is (a short last piece joins the one before).
func chunks(v string) []string {
	runes := []rune(v)
	var out []string
	for len(runes) > chunkRunes+chunkRunes/2 {
		out = append(out, string(runes[:chunkRunes]))
		runes = runes[chunkRunes:]
	}
	return append(out, string(runes))
}

// runePatterns builds the pattern that matches v in any mix of encodings.
func runePatterns(v string) string {
	var b strings.Builder
	for _, r := range v {
		b.WriteString("(?:")
		b.WriteString(strings.Join(runeForms(r), "|"))
		b.WriteString(")")
	}
	return b.String()
}

// cutPattern matches a beginning of v in any encoding, perhaps ending in half
// an escape, followed by a mark of truncation (kept in submatch "mark").
func cutPattern(v string) string {
	runes := []rune(v)
	need := min(minSecretLen, len(runes))
	var b strings.Builder
	for i, r := range runes {
		if i >= need {
			b.WriteString("(?:")
		}
		b.WriteString("(?:" + strings.Join(runeForms(r), "|") + ")")
	}
	b.WriteString(strings.Repeat(")?", len(runes)-need))
	b.WriteString(`(?:[%&\\]+[#\w]*)?(?P<mark>\.\.\.|…)`)
	return b.String()
}

// runeForms lists the regular expressions that match r, in any letter
// case, in each encoding.
func runeForms(r rune) []string {
	forms := encodedRuneForms(r)
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		forms = append(forms, encodedRuneForms(f)...)
	}
	return forms
}

// encodedRuneForms lists the regular expressions that match r in each
// encoding.
func encodedRuneForms(r rune) []string {
	nest := "*"
	amp := "&(?:amp;)" + nest
	forms := []string{regexp.QuoteMeta(string(r))}
	// Percent-encoding, byte by byte (UTF-8), with %25 for a nested "%".
	var pct strings.Builder
	for _, c := range []byte(string(r)) {
		fmt.Fprintf(&pct, "%%(?:25)%s(?i:%02x)", nest, c)
	}
	forms = append(forms, pct.String())
	if r == ' ' {
		forms = append(forms, `\+`, `%(?:25)`+nest+`(?i:2b)`)
	}
	// JSON: \uXXXX (a surrogate pair beyond the BMP), short escapes; each
	// backslash may itself be escaped again.
	bs := `\\+`
	if r > 0xffff {
		r1, r2 := utf16Pair(r)
		forms = append(forms, fmt.Sprintf(`%su(?i:%04x)%su(?i:%04x)`, bs, r1, bs, r2))
	} else {
		forms = append(forms, fmt.Sprintf(`%su(?i:%04x)`, bs, r))
	}
	if short, ok := jsonShort[r]; ok {
		forms = append(forms, bs+regexp.QuoteMeta(short))
	}
	// XML/HTML character references and named entities.
	forms = append(forms, fmt.Sprintf(`%s#0*%d;`, amp, r), fmt.Sprintf(`%s#[xX]0*(?i:%x);`, amp, r))
	for _, name := range htmlNamed[r] {
		forms = append(forms, amp+name+";")
	}
	return forms
}

var jsonShort = map[rune]string{'"': `"`, '\\': `\`, '/': `/`, '\n': "n", '\t': "t", '\r': "r", '\b': "b", '\f': "f"}

var htmlNamed = map[rune][]string{'<': {"lt"}, '>': {"gt"}, '&': {"amp"}, '"': {"quot"}, '\'': {"apos"}, ' ': {"nbsp"}}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// encodedForms are the whole-value encodings the usual encoders produce,
// for redacting a form cut short by "..." (the pattern cannot match half).
func encodedForms(v string) []string {
	forms := []string{
		jsonEscape(v, true), jsonEscape(v, false),
		strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(v),
		strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(v),
		strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(v),
		url.QueryEscape(v), url.PathEscape(v), strings.ReplaceAll(url.QueryEscape(v), "+", "%20"),
	}
	var out []string
	for _, f := range forms {
		if f != v && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// jsonEscape writes v as a JSON string's content, with or without the HTML
// escapes (\u003c) that Go's and other encoders add by default.
func jsonEscape(v string, html bool) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || (html && (r == '<' || r == '>' || r == '&')):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// base64Cores returns, for the standard and URL alphabets and each of the
// three alignments a value can have inside a longer encoded text (as in
// Basic auth's base64("user:" + secret)), the characters that depend on the
// value's bytes alone. Any base64 text that encodes the value at that
// alignment contains the core, whatever surrounds it.
func base64Cores(v string) []string {
	var cores []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pad := 0; pad < 3; pad++ {
			full := enc.EncodeToString(append(make([]byte, pad), v...))
			// Character j holds bits 6j..6j+5, i.e. bytes 6j/8..(6j+5)/8;
			// keep the ones whose bytes all belong to v.
			first, last := -1, -1
			for j := 0; j*6 < (pad+len(v))*8; j++ {
				if j*6/8 >= pad && (j*6+5)/8 < pad+len(v) {
					if first < 0 {
						first = j
					}
					last = j
				}
			}
			if first < 0 || last-first+1 < minBase64Core {
				continue
			}
			if core := full[first : last+1]; !slices.Contains(cores, core) && core != v {
				cores = append(cores, core)
			}
		}
	}
	return cores
}

// nextEscape finds the next character that begins an encoded form: every
// form other than the literal value holds one ("%", "\\", "&", or "+" for a
// space), so a text without them can hold the value literally only.
func nextEscape(text string) int { return strings.IndexAny(text, "%\\&+") }

// nextCut finds the next mark of a text cut short.
func nextCut(text string) int {
	i, j := strings.Index(text, "..."), strings.Index(text, "…")
	if i < 0 || (j >= 0 && j < i) {
		return j
	}
	return i
}

// spansOf returns what any of res matches in text, a submatch named
// "mark" (the "..." of a cut) cut off. All matches are found in the
// unchanged text, to be redacted at once (redactSpans): the chunks of a
// long secret may overlap (a value that repeats itself), and replacing one
// chunk's match before looking for the next would hide the next.
func spansOf(text string, res []*regexp.Regexp) []span {
	var spans []span
	for _, re := range res {
		mark := re.SubexpIndex("mark")
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			to := m[1]
			if mark > 0 && m[2*mark] >= 0 {
				to = m[2*mark]
			}
			if to > m[0] {
				spans = append(spans, span{m[0], to})
			}
		}
	}
	return spans
}

// span is text[from:to].
type span struct{ from, to int }

// redactSpans replaces each of spans in text with "[redacted]", spans that
// overlap or touch as one.
func redactSpans(text string, spans []span) string {
	if len(spans) == 0 {
		return text
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var b strings.Builder
	done := 0
	for i := 0; i < len(spans); {
		from, to := spans[i].from, spans[i].to
		for i++; i < len(spans) && spans[i].from <= to; i++ {
			to = max(to, spans[i].to)
		}
		b.WriteString(text[done:max(from, done)])
		b.WriteString("[redacted]")
		done = to
	}
	b.WriteString(text[done:])
	return b.String()
}

// nearWindows returns the parts of text within maxLen bytes of a mark that
// next finds: a match of a pattern must hold a mark, and running the
// patterns over the whole of a long job log would cost a thousand times
// more than looking for the marks.
func nearWindows(text string, next func(string) int, maxLen int) []span {
	var out []span
	for done := 0; done < len(text); {
		i := next(text[done:])
		if i < 0 {
			break
		}
		start := max(done+i-maxLen, done)
		end := min(done+i+maxLen+4, len(text))
		// Extend the window over marks that follow closely.
		for end < len(text) {
			j := next(text[end:min(end+maxLen, len(text))])
			if j < 0 {
				break
			}
			end = min(end+j+maxLen+4, len(text))
		}
		out = append(out, span{start, end})
		done = end
	}
	return out
}

// matchSpans returns what any of res matches in text within windows (see
// nearWindows), a "mark" submatch cut off. res are compiled only when there
// is a window to look in.
func matchSpans(text string, windows []span, res func() []*regexp.Regexp) []span {
	var spans []span
	for _, w := range windows {
		for _, m := range spansOf(text[w.from:w.to], res()) {
			spans = append(spans, span{w.from + m.from, w.from + m.to})
		}
	}
	return spans
}
