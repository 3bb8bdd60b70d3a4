package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/builtin"
)

// allCommands is root and every command beneath it.
func allCommands(root *cobra.Command) []*cobra.Command {
	all := []*cobra.Command{root}
	for _, c := range root.Commands() {
		all = append(all, allCommands(c)...)
	}
	return all
}

// exampleCommands is each command line of a help's examples: the lines
// that start with "bridge-runner", joined with their continuation lines
// (a trailing backslash); comments are left out.
func exampleCommands(example string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(example, "\n") {
		line = strings.TrimSpace(line)
		if cur.Len() == 0 && !strings.HasPrefix(line, "bridge-runner ") {
			continue
		}
		cont := strings.HasSuffix(line, `\`)
		cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
		if !cont {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	return out
}

// shellWords splits a command line as sh would for the quoting the
// examples use: single quotes, double quotes (what is in them, "$(cat
// job.sh)" too, is one word) and blanks.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	require.Zero(t, quote, "an unclosed quote in %q", line)
	if in {
		words = append(words, w.String())
	}
	return words
}

// TestEveryHelpExampleParses: every example of every command's help goes
// through the real command tree and flag parser: it names its own command,
// only flags that exist, with values they take, a backend the registry
// has, and arguments the command accepts. An example with a flag renamed
// or removed fails here, not in a person's terminal.
func TestEveryHelpExampleParses(t *testing.T) {
	backendNames := builtin.Registry().Names()
	n := 0
	for _, c := range allCommands((&app{}).newRootCmd()) {
		for _, ex := range exampleCommands(c.Example) {
			n++
			args := shellWords(t, ex)
			root := (&app{}).newRootCmd()
			cmd, rest, err := root.Find(args[1:])
			require.NoError(t, err, "%s: %q", c.CommandPath(), ex)
			assert.Equal(t, c.CommandPath(), cmd.CommandPath(), "an example in %s's help runs another command: %q", c.CommandPath(), ex)
			if !assert.NoError(t, cmd.ParseFlags(rest), "%s's example %q", c.CommandPath(), ex) {
				continue
			}
			assert.NoError(t, cmd.ValidateArgs(cmd.Flags().Args()), "%s's example %q", c.CommandPath(), ex)
			if b := cmd.Flags().Lookup("backend"); b != nil && b.Changed {
				assert.Contains(t, backendNames, b.Value.String(), "%s's example %q names no backend there is", c.CommandPath(), ex)
			}
		}
	}
	assert.GreaterOrEqual(t, n, 15, "the examples were found")
}

// TestHelpNamesOnlyRealFlags: every --flag a command's help text names
// (its description, long text and the shared help texts) is a flag of
// that command, or of the command it names in the same breath.
func TestHelpNamesOnlyRealFlags(t *testing.T) {
	flagRef := regexp.MustCompile(`--([a-z0-9][a-z0-9-]*[a-z0-9])(-\*)?`)
	for _, c := range allCommands((&app{}).newRootCmd()) {
		text := c.Short + "\n" + c.Long + "\n" + c.Example
		if c.Annotations[helpCredentials] != "" {
			text += credentialsHelp
			if c.Flags().Lookup("s3-credentials-dir") != nil {
				text += s3CredentialsHelp
			}
		}
		if c.Annotations[helpExitCodes] != "" {
			text += exitCodesHelp
		}
		for _, m := range flagRef.FindAllStringSubmatch(text, -1) {
			name := m[1]
			if m[2] != "" { // --output-*: the flags with that prefix
				found := false
				c.Flags().VisitAll(func(f *pflag.Flag) { found = found || strings.HasPrefix(f.Name, name+"-") })
				assert.True(t, found, "%s's help names --%s-*, and it has no such flag", c.CommandPath(), name)
				continue
			}
			if c.Flags().Lookup(name) != nil || c.InheritedFlags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil {
				continue
			}
			if slices.ContainsFunc(c.Commands(), func(sub *cobra.Command) bool { return sub.Flags().Lookup(name) != nil }) {
				continue // the root's text on a subcommand's flag
			}
			t.Errorf("%s's help names --%s, which it does not have", c.CommandPath(), name)
		}
	}
}

// TestEveryHelpFits: the help of every command (the root, operator,
// version, completion and its shells too) fits 80 and 120 columns.
func TestEveryHelpFits(t *testing.T) {
	for _, c := range allCommands((&app{}).newRootCmd()) {
		args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "bridge-runner")), "--help")
		for _, width := range []int{80, 120} {
			out := helpScreen(t, width, args...)
			for i, line := range strings.Split(out, "\n") {
				assert.LessOrEqual(t, len([]rune(line)), width, "%s --help line %d is wider than %d columns: %q", c.CommandPath(), i+1, width, line)
			}
		}
	}
}
