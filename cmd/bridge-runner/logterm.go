package main

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// At a terminal, the text log is for a person: the time of day instead of
// the full timestamp, and each line wrapped to the terminal's width under
// a hanging indent, so that the terminal never breaks a line in the middle
// of a word (a pending job's heartbeat ran to 200 columns). Piped or
// redirected, the log is the same text format as ever, one record a line.

// logIndent starts a log line's continuation lines at a terminal.
const logIndent = "    "

// terminalLog returns the writer and the handler options of the text log
// on w: w itself, unless w is a terminal.
func terminalLog(w io.Writer, opts *slog.HandlerOptions) (io.Writer, *slog.HandlerOptions) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return w, opts
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width < 40 {
		width = 80
	}
	o := *opts
	o.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
			return slog.String(slog.TimeKey, a.Value.Time().Format(time.TimeOnly))
		}
		return a
	}
	return &wrapWriter{w: w, width: width}, &o
}

// wrapWriter writes each log line (the text handler writes one a call)
// wrapped to width.
type wrapWriter struct {
	mu    sync.Mutex
	w     io.Writer
	width int
}

func (ww *wrapWriter) Write(p []byte) (int, error) {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			b.WriteString(wrapLine(strings.TrimSuffix(line, "\n"), ww.width, logIndent))
			b.WriteString("\n")
		}
	}
	if _, err := io.WriteString(ww.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// wrapLine breaks line at spaces into lines of at most width columns, the
// ones after the first under indent; a word longer than a line is cut.
func wrapLine(line string, width int, indent string) string {
	var out []string
	cur := ""
	for _, word := range strings.Split(line, " ") {
		switch {
		case cur == "":
			cur = word
		case len([]rune(cur))+1+len([]rune(word)) <= width:
			cur += " " + word
		default:
			out = append(out, cur)
			cur = indent + word
		}
		for len([]rune(cur)) > width {
			r := []rune(cur)
			out = append(out, string(r[:width]))
			cur = indent + string(r[width:])
		}
	}
	return strings.Join(append(out, cur), "\n")
}
