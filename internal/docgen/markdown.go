// Package docgen renders the reference that `make docs` writes into
// docs/reference (the cobra command tree, the record package's tables, the
// metrics registries) and reads the project's markdown for the tests that keep
// the docs true: links and anchors that resolve, snippets that are run or say
// why not. Only tests and `make docs` import it; the binary does not.
package docgen

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Block is one fenced code block of a markdown file.
type Block struct {
	Lang string // the fence's info string, "" when none
	Body string // the lines between the fences
	Line int    // the opening fence's line, from 1
	// NotRun is the reason of a `<!-- not run: reason -->` comment on the
	// line before the fence, "" when there is none.
	NotRun string
}

var notRunRE = regexp.MustCompile(`^<!-- not run: (.*\S)\s*-->$`)

// Blocks returns the fenced (```) code blocks of a markdown text, in order.
func Blocks(text string) []Block {
	var out []Block
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if !isFence(lines[i]) {
			continue
		}
		b := Block{Lang: strings.TrimPrefix(strings.TrimSpace(lines[i]), "```"), Line: i + 1}
		if i > 0 {
			if m := notRunRE.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.NotRun = m[1]
			}
		}
		var body []string
		for i++; i < len(lines) && !isFence(lines[i]); i++ {
			body = append(body, lines[i])
		}
		b.Body = strings.Join(body, "\n")
		out = append(out, b)
	}
	return out
}

// isFence tells a fence line: ``` with an info string or none, indented
// too (a block inside a list item).
func isFence(line string) bool { return strings.HasPrefix(strings.TrimSpace(line), "```") }

// Prose is the text without its fenced blocks (each fence line and body
// replaced by an empty line, so line numbers stay) and without inline code.
func Prose(text string) string {
	return inlineCodeRE.ReplaceAllString(stripFences(text), "")
}

var inlineCodeRE = regexp.MustCompile("`[^`\n]*`")

var headingRE = regexp.MustCompile(`^#{1,6} +(.*?)#*\s*$`)

// Anchors returns the anchors GitHub gives the headings of a markdown text:
// the heading's text as rendered, lower-cased, with every character but
// letters, digits, marks, connectors (_), spaces and hyphens removed and each
// space made a hyphen; a repeated anchor gets -1, -2, ...
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range strings.Split(stripFences(text), "\n") {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := Anchor(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Anchor is the GitHub anchor of one heading's markdown text.
func Anchor(heading string) string {
	heading = linkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// stripFences blanks the fenced blocks, whose lines are no headings.
func stripFences(text string) string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		fence := isFence(l)
		if fence || in {
			lines[i] = ""
		}
		if fence {
			in = !in
		}
	}
	return strings.Join(lines, "\n")
}

var linkRE = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)

// Link is one markdown link of a file.
type Link struct {
	Target string // as written: a path, path#anchor or #anchor
	Line   int
}

// Links returns the links of a markdown text outside code, in order.
func Links(text string) []Link {
	var out []Link
	for i, l := range strings.Split(Prose(text), "\n") {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			out = append(out, Link{Target: m[2], Line: i + 1})
		}
	}
	return out
}

// Files returns the project's markdown files under root, relative to it and
// sorted: README.md, BENCHMARKS.md and everything under docs/.
func Files(root string) ([]string, error) {
	files := []string{"README.md", "BENCHMARKS.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
			return err
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// Read returns the text of root's file rel.
func Read(root, rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	return string(b), err
}
