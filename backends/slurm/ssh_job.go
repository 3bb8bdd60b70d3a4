package slurm

import (
	"bytes"
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
	"array": "one job per step", "hold": "a held job would never start",
}

var sbatchOption = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*$`) })

// sshJob is a job turned into sbatch's command line.
type sshJob struct {
	args    []string // sbatch options
	env     []string // NAME=VALUE for env(1) in front of sbatch
	script  string
	chdir   bool // jobproperties chose the working directory
	output  bool // jobproperties chose the output file
	jobName string
	nameSet bool // jobproperties named the job
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
	name := job.Name
	if s.jobName != "" {
		name = s.jobName
	}
	s.args = append(s.args, "--comment="+job.Key, "--job-name="+job.Key+"-"+name)
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
			m[a.native] = v
		}
	}
	for _, a := range envAliases {
		if _, ok := m[a.ibm]; ok {
			return nil, backends.Invalid("jobproperties", "%s is not supported over SSH: the job gets the login environment; set %s in the script", a.ibm, a.variable)
		}
	}
	return m, nil
}

func (s *sshJob) addOption(k string, raw json.RawMessage) error {
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
			if !s.nameSet {
				s.jobName = d.val
			}
		}
	}
	return nil
}
