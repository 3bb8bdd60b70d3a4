package htcondor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// Files in the job's directory on the login node.
const (
	scriptFile = "job.sh"
	runFile    = "job.run"
	outFile    = "job.out"
	errFile    = "job.err"
	logFile    = "job.log"
	paramsFile = "parameters.json"
	metaFile   = "metadata.json"
	keyAttr    = "BridgeRunnerKey"
)

// reserved are submit commands bridge-runner writes itself; jobproperties
// may not set them.
var reserved = map[string]string{
	"executable": "the job script is the executable", "arguments": "the script takes no arguments",
	"output": "the output goes to " + outFile, "error": "errors go to " + errFile, "log": "the event log is " + logFile,
	"initialdir": "the job runs in its own directory", "queue": "one job is queued, or the array's tasks",
	"max_materialize": "set by the array's %M", "+" + strings.ToLower(taskAttr): "the array's task index",
	"my." + strings.ToLower(taskAttr): "the array's task index", "+" + strings.ToLower(countAttr): "the array's size",
	"transfer_executable": "set by bridge-runner", "+" + strings.ToLower(keyAttr): "the idempotency key",
	"my." + strings.ToLower(keyAttr): "the idempotency key", "environment": "use BRIDGE_* and the script itself",
	"env": "use BRIDGE_* and the script itself", "getenv": "a job must not inherit the login session's environment",
}

// defaults are written unless jobproperties sets the same command. Output
// files are transferred back (no shared file system is assumed), and the
// output is streamed so that it can be read while the job runs.
var defaults = [][2]string{
	{"universe", "vanilla"},
	{"should_transfer_files", "YES"},
	{"when_to_transfer_output", "ON_EXIT_OR_EVICT"},
	{"stream_output", "true"},
	{"stream_error", "true"},
}

var (
	commandName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`) })
	attrName    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\+|[Mm][Yy]\.)[A-Za-z_][A-Za-z0-9_]*$`) })
	safeWord    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]*$`) })
)

// submitSpec is a job turned into what will be written on the login node.
type submitSpec struct {
	commands [][2]string // jobproperties and defaults, in order
	script   string      // "" for scriptLocation=remote
	exe      string      // remote script path, when script is ""
	inputs   []string    // base names of additionalData
	files    []file      // parameters and metadata
	env      [][2]string
}

type file struct {
	name string
	data []byte
}

// buildSubmit checks the job and turns it into a submit description's
// parts. Values may not hold a newline: it would start a submit command of
// its own.
func buildSubmit(job backends.Job) (*submitSpec, error) {
	s := &submitSpec{script: job.Script, exe: job.ScriptPath}
	switch {
	case job.ScriptPath != "":
		if strings.ContainsAny(job.ScriptPath, "\n\r\"") {
			return nil, backends.Invalid("jobdata.jobScript", "the remote script path holds a newline or a double quote")
		}
	case !strings.HasPrefix(job.Script, "#!"):
		return nil, backends.Invalid("jobdata.jobScript", "the script must start with #! (e.g. #!/bin/bash): HTCondor runs it as a program and would hold the job")
	}
	cmds, err := properties(job.Properties)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, c := range cmds {
		have[strings.ToLower(c[0])] = true
	}
	for _, d := range defaults {
		if !have[d[0]] {
			cmds = append(cmds, d)
		}
	}
	s.commands = cmds
	for _, in := range job.Inputs {
		if !safeName(in.Name) {
			return nil, backends.Invalid("jobdata.additionalData", "input file name %q cannot be staged: use letters, digits, '.', '_', '-', not %s, %s or %s", in.Name, scriptFile, paramsFile, metaFile)
		}
		s.inputs = append(s.inputs, in.Name)
	}
	for _, v := range []string{job.Name, job.Key} {
		if !safeWord().MatchString(v) {
			return nil, backends.Invalid("name", "%q: use letters, digits, '.', '_' and '-' only", v)
		}
	}
	s.env = [][2]string{{"BRIDGE_JOB_NAME", job.Name}, {"BRIDGE_JOB_KEY", job.Key}}
	// Parameters and metadata go in files beside the script, not in the
	// environment, where HTCondor would expand $(...) in them.
	for _, f := range []struct {
		name, env string
		v         []byte
	}{{paramsFile, "BRIDGE_JOB_PARAMETERS_FILE", job.Parameters}, {metaFile, "BRIDGE_SCRIPT_METADATA_FILE", job.Metadata}} {
		if len(bytes.TrimSpace(f.v)) == 0 {
			continue
		}
		s.files = append(s.files, file{f.name, f.v})
		s.env = append(s.env, [2]string{f.env, f.name})
	}
	return s, nil
}

// properties reads jobproperties: submit commands (request_cpus,
// request_memory, universe, requirements, rank, ...) and job attributes
// (+Name or MY.Name). A JSON string is a submit command's value as written;
// for an attribute it becomes a ClassAd string. Numbers and booleans are
// written as they are.
func properties(raw json.RawMessage) ([][2]string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, backends.Invalid("jobproperties", "is not a JSON object of submit commands (%v), e.g. {\"request_cpus\": 2, \"request_memory\": \"2GB\", \"+ProjectName\": \"astro\"}", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out [][2]string
	for _, k := range keys {
		isAttr := attrName().MatchString(k)
		if !isAttr && !commandName().MatchString(k) {
			return nil, backends.Invalid("jobproperties", "%q is not a submit command or a +Attribute", k)
		}
		if why, ok := reserved[strings.ToLower(k)]; ok {
			return nil, backends.Invalid("jobproperties", "%s cannot be set: %s", k, why)
		}
		v, err := value(k, m[k], isAttr)
		if err != nil {
			return nil, err
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func value(k string, raw json.RawMessage, isAttr bool) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", backends.Invalid("jobproperties", "%s: %v", k, err)
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
		if isAttr {
			s = classAdString(x)
		}
	case json.Number:
		s = x.String()
	case bool:
		s = strconv.FormatBool(x)
	default:
		return "", backends.Invalid("jobproperties", "%s: give a string, a number or a boolean", k)
	}
	if strings.ContainsAny(s, "\n\r") {
		return "", backends.Invalid("jobproperties", "%s: a value may not hold a line break (it would start another submit command)", k)
	}
	return s, nil
}

// classAdString quotes s as a ClassAd string literal.
func classAdString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// description is the submit description for the job in dir (relative to
// the login user's home, or absolute).
func (s *submitSpec) description(dir, key string) string {
	return s.arrayDescription(dir, key, nil)
}

// arrayDescription is the submit description of one job (a nil) or of an
// array: one cluster whose procs are the tasks, each with its own index.
func (s *submitSpec) arrayDescription(dir, key string, a *backends.Array) string {
	var b strings.Builder
	w := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	w("initialdir", dir)
	// The executable is bridge-runner's runFile, which runs the job's script
	// under umask 077 (see run).
	w("executable", path.Join(dir, runFile))
	w("transfer_executable", "true")
	env := s.env
	if a != nil {
		// Each task writes its own output; the event log is shared.
		w("output", taskOut)
		w("error", taskErr)
		env = append(env[:len(env):len(env)], [2]string{backends.TaskIndexVar, "$(" + taskMacro + ")"})
	} else {
		w("output", outFile)
		w("error", errFile)
	}
	w("log", logFile)
	transfer := append([]string{}, s.inputs...)
	if s.script != "" {
		transfer = append(transfer, scriptFile)
	}
	for _, f := range s.files {
		transfer = append(transfer, f.name)
	}
	if len(transfer) > 0 {
		w("transfer_input_files", strings.Join(transfer, ","))
	}
	w("environment", condorEnv(env))
	for _, c := range s.commands {
		w(c[0], c[1])
	}
	w("+"+keyAttr, classAdString(key))
	if a == nil {
		b.WriteString("queue 1\n")
		return b.String()
	}
	writeQueue(&b, *a)
	return b.String()
}

// run is the job's executable: it runs the script (transferred beside it,
// or the remote one) with umask 077. The starter gives a job umask 022, and
// HTCondor transfers the files a job writes back with the modes they had:
// without it, what the job writes would be readable by every user of the
// submit host.
func (s *submitSpec) run() string {
	exe := "./" + scriptFile
	if s.script == "" {
		exe = sshexec.Quote(s.exe)
	}
	return "#!/bin/sh\numask 077\nexec " + exe + " \"$@\"\n"
}

// condorEnv writes the environment in HTCondor's quoted syntax: the whole
// in double quotes (a " inside doubled), each value in single quotes (a '
// inside doubled).
func condorEnv(env [][2]string) string {
	parts := make([]string, len(env))
	for i, e := range env {
		parts[i] = e[0] + "='" + strings.ReplaceAll(e[1], "'", "''") + "'"
	}
	return `"` + strings.ReplaceAll(strings.Join(parts, " "), `"`, `""`) + `"`
}

// safeName: an input file name that needs no quoting in a submit
// description and does not collide with bridge-runner's own files.
func safeName(n string) bool {
	switch n {
	case "", ".", "..", scriptFile, runFile, paramsFile, metaFile, outFile, errFile, logFile:
		return false
	}
	return safeWord().MatchString(n)
}
