package sshexec

import (
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Quote returns s as one word of a POSIX shell command line. Words made only
// of characters no shell treats specially are left as they are (readable
// logs); everything else is single-quoted, each ' written as '\”. Inside
// single quotes a POSIX shell expands nothing: $, `, \, ", !, *, newlines
// and the rest arrive as they are.
func Quote(s string) string {
	if s != "" && strings.Trim(s, safeChars) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// safeChars never need quoting. "=" is not among them: a first word with
// one would be read as an assignment; "~" would expand at a word's start.
const safeChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:,+@%"

// Join quotes each argument and joins them into a command line for the
// login shell (which sshd runs as `$SHELL -c LINE`; it must be a POSIX
// shell: sh, bash, dash, ksh or zsh). A NUL byte cannot be passed in an
// argument at all, so an argument holding one is refused.
func Join(args ...string) (string, error) {
	if len(args) == 0 {
		return "", backends.Invalid("command", "empty command")
	}
	q := make([]string, len(args))
	for i, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return "", backends.Invalid("command", "argument %d holds a NUL byte, which no remote command can receive", i)
		}
		q[i] = Quote(a)
	}
	return strings.Join(q, " "), nil
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
