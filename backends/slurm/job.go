package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Defaults for what Slurm needs but jobproperties may leave out.
const (
	// DefaultWorkingDirectory is where a job runs unless jobproperties says
	// otherwise (slurmrestd would run it in /). /tmp exists and is writable
	// everywhere; on a real cluster it is node-local, so set
	// current_working_directory to a shared directory to find the output.
	DefaultWorkingDirectory = "/tmp"
	// DefaultPath is the job's PATH unless jobproperties gives one: a job
	// submitted over REST inherits no environment, and Slurm requires one.
	DefaultPath = "/usr/local/bin:/usr/bin:/bin"
)

// alias maps a jobproperties key of IBM's Bridge Operator samples onto a
// native Slurm job field.
type alias struct {
	ibm, native string
	number      bool // a numeric string becomes a JSON number
}

var aliases = []alias{
	{"NodesNumber", "nodes", true},
	{"Queue", "partition", false},
	{"Tasks", "tasks", true},
	{"slurmJobName", "name", false},
	{"currentWorkingDir", "current_working_directory", false},
	{"ErrorFileName", "standard_error", false},
	{"OutputFileName", "standard_output", false},
}

// envAliases are IBM keys that set one environment variable each.
var envAliases = []struct{ ibm, variable string }{
	{"envPath", "PATH"},
	{"envLibPath", "LD_LIBRARY_PATH"},
}

// jobSpec is a validated job, ready to be encoded for any API version.
type jobSpec struct {
	fields    map[string]json.RawMessage // native job fields, passed through as given
	env       map[string]string
	timeLimit *timeLimit
	script    string
	versioned []versioned // #SBATCH directives encoded once the API version is known
	notes     []string    // said once at submit (Info)
	warnings  []string    // said once at submit (Warn)
}

// buildJob turns a backends.Job into a jobSpec. Errors wrap ErrInvalid and
// name the ConfigMap field at fault.
func buildJob(job backends.Job) (*jobSpec, error) {
	s := &jobSpec{fields: map[string]json.RawMessage{}, env: map[string]string{}}
	script, err := jobScript(job)
	if err != nil {
		return nil, err
	}
	s.script = script
	props, err := parseProperties(job.Properties)
	if err != nil {
		return nil, err
	}
	sj, err := inlineDirectives(job)
	if err != nil {
		return nil, err
	}
	s.mergeScript(sj, props)
	userEnv, err := s.takeProperties(props)
	if err != nil {
		return nil, err
	}
	userEnv = scriptEnv(sj, userEnv)
	if err := s.takeAliases(props); err != nil {
		return nil, err
	}
	if err := s.setEnvironment(job, props, userEnv); err != nil {
		return nil, err
	}
	if err := s.stampKey(job); err != nil {
		return nil, err
	}
	return s, nil
}

// inlineDirectives reads the #SBATCH lines of an inline or S3 script. A
// script on the cluster (scriptLocation=remote) is not read: the wrapper
// that runs it is what Slurm sees, over REST and over SSH alike.
func inlineDirectives(job backends.Job) (*scriptJob, error) {
	if job.ScriptPath != "" {
		return restDirectives(nil)
	}
	ds, err := scriptDirectives(job.Script)
	if err != nil {
		return nil, err
	}
	return restDirectives(ds)
}

// parseProperties reads jobproperties as an object of Slurm job fields and
// refuses the fields bridge-runner sets itself.
func parseProperties(raw json.RawMessage) (map[string]json.RawMessage, error) {
	props := map[string]json.RawMessage{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &props); err != nil {
			return nil, backends.Invalid("jobproperties", "must be a JSON object of Slurm job fields (partition, nodes, time_limit, ...): %v", err)
		}
	}
	// Matched ignoring case: some slurmrestd versions look fields up that
	// way, and a "Comment" must not overwrite the key stamped into comment.
	for k := range props {
		for _, reserved := range []string{"script", "comment", "array"} {
			if strings.EqualFold(k, reserved) {
				what := map[string]string{
					"script":  "the script comes from jobdata.jobScript",
					"comment": "bridge-runner stores the job's idempotency key there, to find the job again after a restart",
					"array":   "an array is the step's own array key (e.g. array: \"0-99%10\"), which also gives each task BRIDGE_TASK_INDEX",
				}[reserved]
				return nil, backends.Invalid("jobproperties", "%q cannot be set: %s", k, what)
			}
		}
	}
	return props, nil
}

// takeProperties passes the native fields through, parsing the two that are
// encoded per API version; it returns the user's environment.
func (s *jobSpec) takeProperties(props map[string]json.RawMessage) (map[string]string, error) {
	var userEnv map[string]string
	var err error
	for k, v := range props {
		switch k {
		case "environment":
			if userEnv, err = parseEnvironment(v); err != nil {
				return nil, err
			}
		case "time_limit":
			if s.timeLimit, err = parseTimeLimit(v); err != nil {
				return nil, err
			}
		default:
			s.fields[k] = v
		}
	}
	return userEnv, nil
}

// takeAliases renames the Bridge Operator's field names to Slurm's.
func (s *jobSpec) takeAliases(props map[string]json.RawMessage) error {
	for _, a := range aliases {
		raw, ok := props[a.ibm]
		if !ok {
			continue
		}
		delete(s.fields, a.ibm)
		if isEmptyString(raw) {
			continue // the samples leave unused keys ""
		}
		if _, dup := props[a.native]; dup {
			return backends.Invalid("jobproperties", "both %q and %q are set; %q is the Bridge Operator's name for %q, give only one", a.ibm, a.native, a.ibm, a.native)
		}
		if a.number {
			raw = numericString(raw)
		}
		s.fields[a.native] = raw
	}
	return nil
}

// setEnvironment layers the job's environment: defaults, then
// jobproperties, then ours.
func (s *jobSpec) setEnvironment(job backends.Job, props map[string]json.RawMessage, userEnv map[string]string) error {
	s.env["PATH"] = DefaultPath
	// slurmstepd creates the job's output and error files, and the job its
	// own, with the umask in SLURM_UMASK (sbatch passes its caller's; a job
	// submitted over REST has none, and got slurmd's 022: output readable
	// by every user of the node). Owner only, unless the job's environment
	// says otherwise.
	s.env["SLURM_UMASK"] = "0077"
	s.setSbatchEnv(userEnv)
	for _, ea := range envAliases {
		raw, ok := props[ea.ibm]
		if !ok {
			continue
		}
		delete(s.fields, ea.ibm)
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return backends.Invalid("jobproperties", "%q must be a string", ea.ibm)
		}
		if v != "" {
			s.env[ea.variable] = v
		}
	}
	for k, v := range userEnv {
		s.env[k] = v
	}
	s.env["BRIDGE_JOB_NAME"] = job.Name
	s.env["BRIDGE_JOB_KEY"] = job.Key
	if p := bytes.TrimSpace(job.Parameters); len(p) > 0 {
		s.env["BRIDGE_JOB_PARAMETERS"] = string(p)
	}
	if m := bytes.TrimSpace(job.Metadata); len(m) > 0 {
		s.env["BRIDGE_SCRIPT_METADATA"] = string(m)
	}
	return nil
}

// stampKey puts the key into comment (what FindByKey matches), names the
// job as its user does (jobproperties' name, else the script's #SBATCH
// --job-name, else the step's name) so that squeue -n finds it, and
// defaults the working directory.
func (s *jobSpec) stampKey(job backends.Job) error {
	name := job.Name
	if raw, ok := s.fields["name"]; ok {
		if err := json.Unmarshal(raw, &name); err != nil {
			return backends.Invalid("jobproperties", "name must be a string")
		}
	}
	if name == "" {
		name = job.Key
	}
	s.fields["name"] = mustJSON(name)
	s.fields["comment"] = mustJSON(job.Key)
	if _, ok := s.fields["current_working_directory"]; !ok {
		s.fields["current_working_directory"] = mustJSON(DefaultWorkingDirectory)
	}
	return nil
}

// carriesKey: the job was submitted with key; by its comment, or by its
// name, which earlier versions of bridge-runner made "<key>-<name>" (a job of an
// older version is still adopted after an upgrade).
func carriesKey(comment, name, key string) bool {
	return comment == key || name == key || strings.HasPrefix(name, key+"-")
}

// body is the POST job/submit request for version v.
func (s *jobSpec) body(v apiVersion) map[string]any {
	job := make(map[string]any, len(s.fields)+3)
	for k, raw := range s.fields {
		job[k] = raw
	}
	if v.envAsObject() {
		job["environment"] = s.env
	} else {
		env := make([]string, 0, len(s.env))
		for k, val := range s.env {
			env = append(env, k+"="+val)
		}
		sort.Strings(env)
		job["environment"] = env
	}
	if s.timeLimit != nil {
		job["time_limit"] = s.timeLimit.encode(v)
	}
	if !v.dataParser() && bytes.Equal(bytes.TrimSpace(s.fields["requeue"]), []byte("false")) {
		// v0.0.38 reads requeue as sbatch's --requeue, which has no "off";
		// sbatch's --no-requeue is no_requeue there (checked on 22.05).
		delete(job, "requeue")
		job["no_requeue"] = true
	}
	if v.dataParser() {
		if raw, ok := s.fields["nodes"]; ok {
			job["nodes"] = nodeCount(raw)
		}
		for _, f := range noValFields {
			if raw, ok := s.fields[f]; ok {
				job[f] = noValNumber(raw)
			}
		}
	}
	body := map[string]any{"job": job}
	if v.scriptInJob() {
		job["script"] = s.script
	} else {
		body["script"] = s.script
	}
	return body
}

// jobScript returns the batch script to submit: the inline script as given,
// or for scriptLocation=remote a small wrapper that runs the script at that
// path on the cluster.
func jobScript(job backends.Job) (string, error) {
	if job.ScriptPath != "" {
		if strings.ContainsAny(job.ScriptPath, "\x00\n\r") {
			return "", backends.Invalid("jobdata.jobScript", "the remote script path contains a NUL or line break")
		}
		return remoteWrapper(job.ScriptPath), nil
	}
	s := job.Script
	switch {
	case strings.TrimSpace(s) == "":
		return "", backends.Invalid("jobdata.jobScript", "the job script is empty")
	case strings.HasPrefix(s, "\ufeff"):
		return "", backends.Invalid("jobdata.jobScript", "the script starts with a byte-order mark; Slurm needs #! as its very first bytes (save it as UTF-8 without BOM)")
	case !strings.HasPrefix(s, "#!"):
		return "", backends.Invalid("jobdata.jobScript", "a Slurm batch script must start with a #! line such as #!/bin/bash (Slurm accepts a script without one and then fails it); first line is %q", firstLine(s))
	case strings.HasSuffix(firstLine(s), "\r"):
		return "", backends.Invalid("jobdata.jobScript", "the #! line ends in a carriage return (Windows line ends): the interpreter %q would not be found; convert the script to Unix line ends", strings.TrimSpace(firstLine(s)))
	case strings.ContainsRune(s, 0):
		return "", backends.Invalid("jobdata.jobScript", "the script contains a NUL byte, which Slurm cannot store")
	case !utf8.ValidString(s):
		return "", backends.Invalid("jobdata.jobScript", "the script is not valid UTF-8; slurmrestd takes JSON, which carries only UTF-8 text")
	}
	return s, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 80 {
		line = line[:80] + "..."
	}
	return line
}

// remoteWrapper runs the script at path: directly when it is executable,
// else through its #! interpreter, else with /bin/sh.
func remoteWrapper(path string) string {
	return "#!/bin/sh\n" +
		"# bridge-runner: run the job script that is on the cluster (scriptLocation=remote)\n" +
		"script=" + shellQuote(path) + "\n" +
		`if [ -x "$script" ]; then exec "$script"; fi` + "\n" +
		`IFS= read -r first < "$script" || true` + "\n" +
		`case $first in '#!'*) exec ${first#??} "$script" ;; esac` + "\n" +
		`exec /bin/sh "$script"` + "\n"
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// parseEnvironment accepts an object {"K":"V"} or an array ["K=V"], the two
// shapes slurmrestd has used; values may be numbers or booleans.
func parseEnvironment(raw json.RawMessage) (map[string]string, error) {
	env := map[string]string{}
	var obj map[string]any
	var list []string
	switch {
	case json.Unmarshal(raw, &obj) == nil && obj != nil:
		for k, v := range obj {
			switch v := v.(type) {
			case string:
				env[k] = v
			case float64, bool:
				env[k] = fmt.Sprint(v)
			default:
				return nil, backends.Invalid("jobproperties", "environment[%q] must be a string", k)
			}
		}
	case json.Unmarshal(raw, &list) == nil:
		for _, kv := range list {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, backends.Invalid("jobproperties", "environment entry %q is not NAME=value", kv)
			}
			env[k] = v
		}
	default:
		return nil, backends.Invalid("jobproperties", `environment must be an object {"NAME":"value"} or an array ["NAME=value"]`)
	}
	for k := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, backends.Invalid("jobproperties", "environment variable name %q is not valid", k)
		}
	}
	return env, nil
}

// timeLimit is a job's time limit in minutes, or none.
type timeLimit struct {
	minutes  uint32
	infinite bool
}

// encode gives the time limit in version v's shape.
func (t *timeLimit) encode(v apiVersion) any {
	if v.timeLimitAsStruct() {
		return map[string]any{"set": !t.infinite, "infinite": t.infinite, "number": t.minutes}
	}
	if t.infinite {
		return "INFINITE"
	}
	return t.minutes
}

// parseTimeLimit accepts minutes as a number, a Slurm time string ("90",
// "1:30:00", "2-00:00:00", "INFINITE", ...), or {set,infinite,number}.
func parseTimeLimit(raw json.RawMessage) (*timeLimit, error) {
	bad := func(format string, args ...any) error {
		return backends.Invalid("jobproperties", "time_limit: "+format+`; give minutes (60), a Slurm time ("1:00:00", "2-12:00:00", "INFINITE") or {"set":true,"number":60}`, args...)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, nil // unset: the partition's default
	}
	var f float64
	var s string
	var st struct {
		Set      *bool    `json:"set"`
		Infinite bool     `json:"infinite"`
		Number   *float64 `json:"number"`
	}
	switch {
	case json.Unmarshal(raw, &f) == nil:
		if f < 0 || f != math.Trunc(f) || f >= math.MaxUint32-1 {
			return nil, bad("%v is not a whole number of minutes", f)
		}
		return &timeLimit{minutes: uint32(f)}, nil
	case json.Unmarshal(raw, &s) == nil:
		m, inf, ok := parseSlurmTime(s)
		if !ok {
			return nil, bad("%q is not a Slurm time", s)
		}
		return &timeLimit{minutes: m, infinite: inf}, nil
	case json.Unmarshal(raw, &st) == nil:
		if st.Infinite {
			return &timeLimit{infinite: true}, nil
		}
		if st.Set != nil && !*st.Set {
			return nil, nil // unset: the partition's default
		}
		if st.Number == nil || *st.Number < 0 || *st.Number != math.Trunc(*st.Number) || *st.Number >= math.MaxUint32-1 {
			return nil, bad("the object needs a whole number of minutes in number")
		}
		return &timeLimit{minutes: uint32(*st.Number)}, nil
	}
	return nil, bad("unexpected %s", string(raw))
}

// parseSlurmTime parses sbatch --time formats into minutes (seconds round
// up, as Slurm does): "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S", and
// INFINITE/UNLIMITED.
func parseSlurmTime(s string) (minutes uint32, infinite, ok bool) {
	s = strings.TrimSpace(s)
	switch strings.ToUpper(s) {
	case "INFINITE", "UNLIMITED", "-1":
		return 0, true, true
	case "":
		return 0, false, false
	}
	days, hasDays := 0, false
	if d, rest, found := strings.Cut(s, "-"); found {
		hasDays = true
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, false, false
		}
		days, s = n, rest
	}
	var nums []int
	for _, p := range strings.Split(s, ":") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, false, false
		}
		nums = append(nums, n)
	}
	var h, m, sec int
	switch {
	case hasDays:
		// D-H, D-H:M, D-H:M:S
		switch len(nums) {
		case 1:
			h = nums[0]
		case 2:
			h, m = nums[0], nums[1]
		case 3:
			h, m, sec = nums[0], nums[1], nums[2]
		default:
			return 0, false, false
		}
	default:
		switch len(nums) {
		case 1:
			m = nums[0]
		case 2:
			m, sec = nums[0], nums[1]
		case 3:
			h, m, sec = nums[0], nums[1], nums[2]
		default:
			return 0, false, false
		}
	}
	total := int64(days)*24*60 + int64(h)*60 + int64(m)
	if sec > 0 {
		total += int64((sec + 59) / 60)
	}
	if total >= math.MaxUint32-1 {
		return 0, false, false
	}
	return uint32(total), false, true
}

func isEmptyString(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) == ""
}

// numericString turns "4" into 4 and leaves anything else ("1-3", 4) as is.
func numericString(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return raw
	}
	if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32); err == nil {
		return json.RawMessage(strconv.FormatUint(n, 10))
	}
	return raw
}

// nodeCount: v0.0.39+ take nodes as a string ("2", "1-3"); a number is
// read, with a warning on every submit from Slurm 24.11 ("Expected OpenAPI
// type=string ... but got OpenAPI type=integer"). v0.0.38 takes either.
func nodeCount(raw json.RawMessage) json.RawMessage {
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return mustJSON(n.String())
	}
	return raw
}

// noValFields are numbers that v0.0.39+ declare as {set,infinite,number}:
// v0.0.40 warns of a bare number on every submit ("Expected OpenAPI
// type=object ... but got OpenAPI type=integer"); all take the object.
var noValFields = []string{"time_minimum", "memory_per_node", "memory_per_cpu", "begin_time", "priority"}

// noValNumber wraps a bare number as {set,infinite,number}; anything else (an
// object already, a string) goes as given.
func noValNumber(raw json.RawMessage) json.RawMessage {
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return raw
	}
	return mustJSON(map[string]any{"set": true, "infinite": false, "number": n})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
