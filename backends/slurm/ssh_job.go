package slurm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// restToSbatch maps the REST API's job field names (which jobproperties
// uses with either flavour) onto sbatch's long options where they differ.
var restToSbatch = map[string]string{
	"name": "job-name", "tasks": "ntasks", "memory_per_node": "mem", "memory_per_cpu": "mem-per-cpu",
	"time_limit": "time", "standard_output": "output", "standard_error": "error", "standard_input": "input",
	"current_working_directory": "chdir", "cpus_per_task": "cpus-per-task", "tasks_per_node": "ntasks-per-node",
	"minimum_cpus_per_node": "mincpus",
}

// sbatchReserved are options bridge-runner sets itself.
var sbatchReserved = map[string]string{
	"comment": "it holds the idempotency key", "parsable": "set by bridge-runner", "wrap": "the job script is sent instead",
	"export": "the job gets the login environment plus BRIDGE_*", "wait": "invoke follows the job itself",
	"array": "an array is the step's own array key (e.g. array: \"0-99%10\")", "hold": "a held job would never start",
}

func envAlias(k string) (string, bool) {
	for _, a := range envAliases {
		if a.ibm == k {
			return a.variable, true
		}
	}
	return "", false
}

var sbatchOption = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*$`) })

// sshJob is a job turned into sbatch's command line.
type sshJob struct {
	args    []string // sbatch options
	env     []string // NAME=VALUE, exported (from job.env) to sbatch
	script  string
	chdir   bool // jobproperties chose the working directory
	output  bool // jobproperties chose the output file
	jobName string
	array   string // sbatch --array, for SubmitArray
	nameSet bool   // jobproperties named the job
	// the script has #SBATCH lines for these
	scriptName, scriptExport bool
}

// buildSbatch checks the job and turns jobproperties into sbatch options:
// each key is an sbatch long option (with "_" for "-" allowed, and the REST
// API's field names and the Bridge Operator's aliases accepted); a string or
// number is its value, true a bare flag, false leaves it out.
func buildSbatch(job backends.Job) (*sshJob, error) {
	s := &sshJob{script: job.Script}
	if job.ScriptPath != "" {
		s.script = "#!/bin/sh\nexec " + sshexec.Quote(job.ScriptPath) + "\n"
	} else if !strings.HasPrefix(job.Script, "#!") {
		return nil, backends.Invalid("jobdata.jobScript", "the script must start with #! (e.g. #!/bin/bash); Slurm would accept it and then fail the job")
	}
	props, err := propertyMap(job.Properties)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := s.addOption(k, props[k]); err != nil {
			return nil, err
		}
	}
	if err := s.readScript(job); err != nil {
		return nil, err
	}
	s.args = append(s.args, "--comment="+job.Key)
	switch name := cmp.Or(job.Name, job.Key); {
	case s.nameSet:
		s.args = append(s.args, "--job-name="+s.jobName)
	case !s.scriptName: // else sbatch takes the script's #SBATCH --job-name
		s.args = append(s.args, "--job-name="+name)
	}
	if err := s.exportEnv(props); err != nil {
		return nil, err
	}
	s.env = []string{"BRIDGE_JOB_NAME=" + job.Name, "BRIDGE_JOB_KEY=" + job.Key}
	if len(bytes.TrimSpace(job.Parameters)) > 0 {
		s.env = append(s.env, "BRIDGE_JOB_PARAMETERS="+string(job.Parameters))
	}
	if len(bytes.TrimSpace(job.Metadata)) > 0 {
		s.env = append(s.env, "BRIDGE_SCRIPT_METADATA="+string(job.Metadata))
	}
	return s, nil
}

// propertyMap reads jobproperties, with the Bridge Operator's keys renamed.
func propertyMap(raw json.RawMessage) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, backends.Invalid("jobproperties", "is not a JSON object of sbatch options (%v), e.g. {\"partition\": \"debug\", \"time\": \"10:00\", \"exclusive\": true}", err)
	}
	for _, a := range aliases {
		if v, ok := m[a.ibm]; ok {
			delete(m, a.ibm)
			if !isEmptyString(v) { // the samples leave unused keys "", as over REST
				m[a.native] = v
			}
		}
	}
	return m, nil
}

// exportEnv gives the job the IBM keys' PATH and LD_LIBRARY_PATH (envPath,
// envLibPath), as over REST: sbatch --export=ALL,NAME=value, which keeps
// the login environment sbatch passes on by default and sets those.
func (s *sshJob) exportEnv(props map[string]json.RawMessage) error {
	var set []string
	for _, a := range envAliases {
		raw, ok := props[a.ibm]
		if !ok {
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return backends.Invalid("jobproperties", "%q must be a string", a.ibm)
		}
		switch {
		case v == "":
			continue // the samples leave unused keys ""
		case strings.ContainsAny(v, ",\x00\n"):
			return backends.Invalid("jobproperties", "%s: sbatch --export cannot carry a value with a comma or line break; set %s in the script", a.ibm, a.variable)
		case s.scriptExport:
			return backends.Invalid("jobproperties", "%s: the script's #SBATCH --export would be overridden by the --export that carries %s; set %s in the script, or drop its --export line", a.ibm, a.variable, a.variable)
		}
		set = append(set, a.variable+"="+v)
	}
	if len(set) > 0 {
		s.args = append(s.args, "--export=ALL,"+strings.Join(set, ","))
	}
	return nil
}

func (s *sshJob) addOption(k string, raw json.RawMessage) error {
	if _, env := envAlias(k); env {
		return nil // exportEnv
	}
	if !sbatchOption().MatchString(k) {
		return backends.Invalid("jobproperties", "%q is not an sbatch option name", k)
	}
	opt := restToSbatch[k]
	if opt == "" {
		opt = strings.ReplaceAll(k, "_", "-")
	}
	if why, ok := sbatchReserved[opt]; ok {
		return backends.Invalid("jobproperties", "%s cannot be set: %s", k, why)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return backends.Invalid("jobproperties", "%s: %v", k, err)
	}
	var val string
	switch x := v.(type) {
	case bool:
		if x {
			s.args = append(s.args, "--"+opt)
		}
		return nil
	case string:
		val = x
	case json.Number:
		val = x.String()
	default:
		return backends.Invalid("jobproperties", "%s: give a string, a number or a boolean", k)
	}
	switch opt {
	case "chdir":
		s.chdir = true
	case "output":
		s.output = true
	case "job-name":
		s.jobName, s.nameSet = val, true
		return nil
	}
	s.args = append(s.args, "--"+opt+"="+val)
	return nil
}

// readScript notes the script's #SBATCH lines that bridge-runner's own
// defaults would override (sbatch lets the command line win): the working
// directory, the output file and the job name, which then stand as the
// script says unless jobproperties sets them. The directives refused over
// REST for reasons of their own (--array, --hold, ...) are refused here too.
func (s *sshJob) readScript(job backends.Job) error {
	if job.ScriptPath != "" {
		return nil
	}
	ds, err := scriptDirectives(job.Script)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if why, ok := directiveRefused[d.opt]; ok {
			return backends.Invalid("jobdata.jobScript", "line %d: %s: %s", d.line, d, why)
		}
		switch d.opt {
		case "chdir":
			s.chdir = true
		case "output":
			s.output = true
		case "job-name":
			s.scriptName = true
		case "export":
			s.scriptExport = true
		}
	}
	return nil
}
