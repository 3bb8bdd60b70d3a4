package slurm

// The script's #SBATCH directives, read as sbatch reads them: lines that
// start exactly with #SBATCH, up to the first line that is neither blank
// nor a comment; each line split into words (whitespace separates, quotes
// group, a backslash escapes, an unquoted # starts a comment); the words
// parsed as sbatch's command line (long options with =value or a separate
// value, unique prefixes of long options, bundled short options).
//
// Over SSH sbatch reads them itself; the parser tells the SSH flavour which
// of its own defaults (--chdir, --output, --job-name) the script overrides.
// Over REST slurmrestd ignores them, so they become job fields
// (directiveFields), beneath jobproperties.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

type argKind uint8

const (
	noArg argKind = iota
	reqArg
	optArg // only as --opt=value, as getopt_long takes it
)

type sbatchOpt struct {
	long  string
	short byte
	arg   argKind
}

// sbatchOpts are sbatch's options (22.05 to 24.11), all of them, so that a
// prefix is resolved as sbatch resolves it.
var sbatchOpts = []sbatchOpt{
	{"account", 'A', reqArg}, {"acctg-freq", 0, reqArg}, {"array", 'a', reqArg}, {"batch", 0, reqArg},
	{"bb", 0, reqArg}, {"bbf", 0, reqArg}, {"begin", 'b', reqArg}, {"chdir", 'D', reqArg},
	{"cluster-constraint", 0, reqArg}, {"clusters", 'M', reqArg}, {"cluster", 0, reqArg}, {"comment", 0, reqArg},
	{"constraint", 'C', reqArg}, {"container", 0, reqArg}, {"container-id", 0, reqArg}, {"contiguous", 0, noArg},
	{"core-spec", 'S', reqArg}, {"cores-per-socket", 0, reqArg}, {"cpu-freq", 0, reqArg}, {"cpus-per-gpu", 0, reqArg},
	{"cpus-per-task", 'c', reqArg}, {"deadline", 0, reqArg}, {"delay-boot", 0, reqArg}, {"dependency", 'd', reqArg},
	{"distribution", 'm', reqArg}, {"error", 'e', reqArg}, {"exclude", 'x', reqArg}, {"exclusive", 0, optArg},
	{"export", 0, reqArg}, {"export-file", 0, reqArg}, {"extra", 0, reqArg}, {"extra-node-info", 'B', reqArg},
	{"get-user-env", 0, optArg}, {"gid", 0, reqArg}, {"gpu-bind", 0, reqArg}, {"gpu-freq", 0, reqArg},
	{"gpus", 'G', reqArg}, {"gpus-per-node", 0, reqArg}, {"gpus-per-socket", 0, reqArg}, {"gpus-per-task", 0, reqArg},
	{"gres", 0, reqArg}, {"gres-flags", 0, reqArg}, {"help", 'h', noArg}, {"hint", 0, reqArg},
	{"hold", 'H', noArg}, {"ignore-pbs", 0, noArg}, {"immediate", 'I', optArg}, {"input", 'i', reqArg},
	{"job-name", 'J', reqArg}, {"kill-on-invalid-dep", 0, reqArg}, {"licenses", 'L', reqArg}, {"mail-type", 0, reqArg},
	{"mail-user", 0, reqArg}, {"mcs-label", 0, reqArg}, {"mem", 0, reqArg}, {"mem-bind", 0, reqArg},
	{"mem-per-cpu", 0, reqArg}, {"mem-per-gpu", 0, reqArg}, {"mincpus", 0, reqArg}, {"network", 0, reqArg},
	{"nice", 0, optArg}, {"no-kill", 'k', optArg}, {"no-requeue", 0, noArg}, {"nodefile", 'F', reqArg},
	{"nodelist", 'w', reqArg}, {"nodes", 'N', reqArg}, {"ntasks", 'n', reqArg}, {"ntasks-per-core", 0, reqArg},
	{"ntasks-per-gpu", 0, reqArg}, {"ntasks-per-node", 0, reqArg}, {"ntasks-per-socket", 0, reqArg}, {"open-mode", 0, reqArg},
	{"output", 'o', reqArg}, {"overcommit", 'O', noArg}, {"oversubscribe", 's', noArg}, {"parsable", 0, noArg},
	{"partition", 'p', reqArg}, {"power", 0, reqArg}, {"prefer", 0, reqArg}, {"priority", 0, reqArg},
	{"profile", 0, reqArg}, {"propagate", 0, optArg}, {"qos", 'q', reqArg}, {"quiet", 'Q', noArg},
	{"reboot", 0, noArg}, {"requeue", 0, noArg}, {"reservation", 0, reqArg}, {"resv-ports", 0, optArg},
	{"segment", 0, reqArg}, {"signal", 0, reqArg}, {"sockets-per-node", 0, reqArg}, {"spread-job", 0, noArg},
	{"switches", 0, reqArg}, {"test-only", 0, noArg}, {"thread-spec", 0, reqArg}, {"threads-per-core", 0, reqArg},
	{"time", 't', reqArg}, {"time-min", 0, reqArg}, {"tmp", 0, reqArg}, {"tres-bind", 0, reqArg},
	{"tres-per-task", 0, reqArg}, {"uid", 0, reqArg}, {"usage", 0, noArg}, {"use-min-nodes", 0, noArg},
	{"verbose", 'v', noArg}, {"version", 'V', noArg}, {"wait", 'W', noArg}, {"wait-all-nodes", 0, reqArg},
	{"wckey", 0, reqArg}, {"wrap", 0, reqArg},
}

// directive is one option of the script's #SBATCH lines.
type directive struct {
	opt  string // the long name
	val  string
	line int // 1-based line of the script, for messages
}

func (d directive) String() string {
	if d.val == "" {
		return "#SBATCH --" + d.opt
	}
	return "#SBATCH --" + d.opt + "=" + d.val
}

// word is one word of a #SBATCH line.
type word struct {
	text string
	line int
}

// scriptDirectives reads the script's #SBATCH directives. Errors name
// jobdata.jobScript; sbatch refuses the same scripts.
func scriptDirectives(script string) ([]directive, error) {
	words, err := directiveWords(script)
	if err != nil {
		return nil, err
	}
	var out []directive
	for i := 0; i < len(words); i++ {
		w := words[i]
		var ds []directive
		var used int
		switch {
		case strings.HasPrefix(w.text, "--") && len(w.text) > 2:
			ds, used, err = longDirective(words[i:])
		case strings.HasPrefix(w.text, "-") && len(w.text) > 1 && w.text != "--":
			ds, used, err = shortDirectives(words[i:])
		default:
			return nil, backends.Invalid("jobdata.jobScript", "line %d: %q in a #SBATCH line is not an option (sbatch refuses it too: \"Invalid directive\"); write #SBATCH --option=value", w.line, w.text)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
		i += used - 1
	}
	return out, nil
}

// directiveWords collects the words of the #SBATCH lines, up to the first
// line that is neither blank nor a comment.
func directiveWords(script string) ([]word, error) {
	var words []word
	for n, line := range strings.Split(script, "\n") {
		rest, ok := strings.CutPrefix(line, "#SBATCH")
		if !ok {
			t := strings.TrimSpace(line)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			break
		}
		for _, w := range splitDirective(rest) {
			if w == "hetjob" || w == "packjob" {
				return nil, backends.Invalid("jobdata.jobScript", "line %d: #SBATCH %s starts a heterogeneous job, which bridge-runner does not submit; split it into jobs of their own", n+1, w)
			}
			words = append(words, word{w, n + 1})
		}
	}
	return words, nil
}

// splitDirective splits what follows #SBATCH into words as sbatch does.
func splitDirective(s string) []string {
	var words []string
	var w strings.Builder
	inWord, esc := false, false
	var quote byte
	flush := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
			w.WriteByte(c)
		case c == '\\':
			esc, inWord = true, true
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(c)
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == '#':
			flush()
			return words
		case c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f':
			flush()
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}

// findLong resolves a long option name as getopt_long does: exactly, or
// as the unique prefix of one.
func findLong(name string) (*sbatchOpt, error) {
	var found []*sbatchOpt
	for i := range sbatchOpts {
		o := &sbatchOpts[i]
		if o.long == name {
			return o, nil
		}
		if strings.HasPrefix(o.long, name) {
			found = append(found, o)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("--%s is not an sbatch option", name)
	}
	names := make([]string, len(found))
	for i, o := range found {
		names[i] = "--" + o.long
	}
	return nil, fmt.Errorf("--%s is ambiguous (%s); write the option in full", name, strings.Join(names, ", "))
}

// longDirective parses --name[=value] [value] at words[0].
func longDirective(words []word) ([]directive, int, error) {
	w := words[0]
	name, val, hasVal := strings.Cut(w.text[2:], "=")
	o, err := findLong(name)
	if err != nil {
		return nil, 0, backends.Invalid("jobdata.jobScript", "line %d: #SBATCH %s: %v", w.line, w.text, err)
	}
	used := 1
	switch {
	case o.arg == noArg && hasVal:
		return nil, 0, backends.Invalid("jobdata.jobScript", "line %d: #SBATCH --%s takes no value", w.line, o.long)
	case o.arg == reqArg && !hasVal:
		if len(words) < 2 {
			return nil, 0, backends.Invalid("jobdata.jobScript", "line %d: #SBATCH --%s needs a value", w.line, o.long)
		}
		val, used = words[1].text, 2
	}
	return []directive{{opt: o.long, val: val, line: w.line}}, used, nil
}

// shortDirectives parses -x, -xVALUE, -x VALUE and bundles like -Qc2.
func shortDirectives(words []word) ([]directive, int, error) {
	w := words[0]
	var out []directive
	for j := 1; j < len(w.text); j++ {
		var o *sbatchOpt
		for i := range sbatchOpts {
			if sbatchOpts[i].short == w.text[j] {
				o = &sbatchOpts[i]
			}
		}
		if o == nil {
			return nil, 0, backends.Invalid("jobdata.jobScript", "line %d: #SBATCH %s: -%c is not an sbatch option", w.line, w.text, w.text[j])
		}
		switch o.arg {
		case noArg:
			out = append(out, directive{opt: o.long, line: w.line})
			continue
		case optArg: // -I60: the rest of the word, if any
			return append(out, directive{opt: o.long, val: w.text[j+1:], line: w.line}), 1, nil
		}
		if val := w.text[j+1:]; val != "" {
			return append(out, directive{opt: o.long, val: val, line: w.line}), 1, nil
		}
		if len(words) < 2 {
			return nil, 0, backends.Invalid("jobdata.jobScript", "line %d: #SBATCH -%c needs a value", w.line, o.short)
		}
		return append(out, directive{opt: o.long, val: words[1].text, line: w.line}), 2, nil
	}
	return out, 1, nil
}

// restDirective is what one sbatch option becomes in slurmrestd's job.
type restDirective struct {
	field string
	conv  func(val string) (any, error) // nil: the value as a string
}

// directiveFields maps sbatch's options onto slurmrestd's job fields that
// are the same in v0.0.38 to v0.0.42. Values take the shapes jobproperties
// takes, so that both go through the same encoding per API version
// (time_limit, nodes, ...). The options whose field differs by version are
// in versionedDirectives.
var directiveFields = map[string]restDirective{
	"account": {"account", nil}, "job-name": {"name", nil}, "partition": {"partition", nil},
	"qos": {"qos", nil}, "reservation": {"reservation", nil}, "wckey": {"wckey", nil},
	"constraint": {"constraints", nil}, "dependency": {"dependency", nil}, "licenses": {"licenses", nil},
	"output": {"standard_output", nil}, "error": {"standard_error", nil}, "input": {"standard_input", nil},
	"chdir": {"current_working_directory", nil}, "mail-user": {"mail_user", nil},
	"nodes": {"nodes", nil}, "time": {"time_limit", nil}, "time-min": {"time_minimum", minutesValue},
	"ntasks": {"tasks", wholeNumber}, "cpus-per-task": {"cpus_per_task", wholeNumber},
	"ntasks-per-node": {"tasks_per_node", wholeNumber}, "mincpus": {"minimum_cpus_per_node", wholeNumber},
	"threads-per-core": {"threads_per_core", wholeNumber}, "nice": {"nice", niceValue},
	"mem": {"memory_per_node", megabytes}, "mem-per-cpu": {"memory_per_cpu", megabytes},
	"requeue": {"requeue", constant(true)}, "no-requeue": {"requeue", constant(false)},
}

// directiveIgnored change nothing about the job that runs.
var directiveIgnored = map[string]string{
	"parsable": "", "quiet": "", "verbose": "", "ignore-pbs": "",
	"wait": "invoke follows the job itself",
}

// directiveRefused are refused whatever the flavour, with the fix.
var directiveRefused = map[string]string{
	"array":     "an array is the step's own array key (e.g. array: \"0-99%10\"), which also gives each task BRIDGE_TASK_INDEX; remove the line and set that key",
	"hold":      "a held job would never start; remove the line",
	"wrap":      "the script is the job; remove the line",
	"test-only": "nothing would run; remove the line",
	"uid":       "the job runs as the credentials' user; remove the line",
	"gid":       "the job runs as the credentials' user; remove the line",
	"clusters":  "resourceURL names one cluster; remove the line and point resourceURL at that cluster",
	"cluster":   "resourceURL names one cluster; remove the line and point resourceURL at that cluster",
	"help":      "remove the line",
	"usage":     "remove the line",
	"version":   "remove the line",
}

func constant(v any) func(string) (any, error) { return func(string) (any, error) { return v, nil } }

func wholeNumber(s string) (any, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%q is not a whole number", s)
	}
	return n, nil
}

func niceValue(s string) (any, error) {
	if s == "" {
		return 100, nil // sbatch's default for a bare --nice
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%q is not a whole number", s)
	}
	return n, nil
}

func minutesValue(s string) (any, error) {
	m, inf, ok := parseSlurmTime(s)
	if !ok || inf {
		return nil, fmt.Errorf("%q is not a Slurm time (minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S)", s)
	}
	return m, nil
}

// megabytes reads sbatch's memory sizes: a number with an optional unit
// K, M, G or T (M when none), in megabytes, rounding up as sbatch does.
func megabytes(s string) (any, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	shift := map[byte]int{'K': -10, 'M': 0, 'G': 10, 'T': 20}
	unit := 0
	if n := len(t); n > 0 {
		if sh, ok := shift[t[n-1]]; ok {
			unit, t = sh, t[:n-1]
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || (unit > 0 && n > (1<<(63-unit))) {
		return nil, fmt.Errorf("%q is not a memory size (a number with an optional unit K, M, G or T)", s)
	}
	if unit < 0 {
		return (n + 1023) >> 10, nil
	}
	return n << unit, nil
}
