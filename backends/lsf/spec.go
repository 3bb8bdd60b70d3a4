package lsf

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
)

// spec is a job ready to submit.
type spec struct {
	app     string
	params  [][2]string // id, value in order
	files   []file
	jobName string
	// ignored are IBM Bridge Operator properties accepted but unused.
	ignored []string
}

type file struct {
	name string
	data []byte              // or
	in   *backends.InputFile // streamed
}

func (f file) size() int64 {
	if f.in != nil {
		return f.in.Size
	}
	return int64(len(f.data))
}

// property keys: canonical name, aliases, and the application parameter.
var propKeys = []struct {
	names []string
	param string
}{
	{[]string{"queue", "Queue", "QUEUE"}, "QUEUE"},
	{[]string{"jobName", "JOB_NAME"}, "JOB_NAME"},
	{[]string{"outputFile", "OutputFileName", "OUTPUT_FILE"}, "OUTPUT_FILE"},
	{[]string{"errorFile", "ErrorFileName", "ERROR_FILE"}, "ERROR_FILE"},
	{[]string{"runLimitHour", "RunLimitHour", "RUNLIMITHOUR"}, "RUNLIMITHOUR"},
	{[]string{"runLimitMinute", "RunLimitMinute", "RUNLIMITMINUTE"}, "RUNLIMITMINUTE"},
	{[]string{"extraParams", "EXTRA_PARAMS"}, "EXTRA_PARAMS"},
	{[]string{"numNodes", "numnodes", "NodesNumber"}, "-nnodes"},
	{[]string{"app", "AppName"}, "AppName"},
	{[]string{"params"}, "params"},
}

var reservedParams = map[string]bool{"COMMANDTORUN": true, "JOB_NAME": true, "QUEUE": true, "OUTPUT_FILE": true,
	"ERROR_FILE": true, "RUNLIMITHOUR": true, "RUNLIMITMINUTE": true, "EXTRA_PARAMS": true}

var paramID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

func knownKeys() string {
	var s []string
	for _, k := range propKeys {
		s = append(s, k.names[0])
	}
	return strings.Join(s, ", ")
}

// propAliases maps every accepted key to its application parameter.
var propAliases = func() map[string]string {
	m := map[string]string{}
	for _, pk := range propKeys {
		for _, n := range pk.names {
			m[n] = pk.param
		}
	}
	return m
}()

// props is jobproperties sorted out: application parameters, bsub options
// for EXTRA_PARAMS, the application, and the user's own parameters.
type props struct {
	vals    map[string]string
	extra   []string
	app     string
	custom  map[string]string
	ignored []string
}

// buildSpec turns the job into application parameters and files.
func buildSpec(job backends.Job) (*spec, error) {
	p, err := parseProps(job.Properties)
	if err != nil {
		return nil, err
	}
	if !validKey(job.Key) {
		return nil, backends.Invalid("idempotency key", "%q is not a plain name", job.Key)
	}
	sp := &spec{app: p.app, jobName: job.Key, ignored: p.ignored}
	if n := p.vals["JOB_NAME"]; n != "" {
		sp.jobName = job.Key + "-" + n
	} else if job.Name != "" {
		sp.jobName = job.Key + "-" + job.Name
	}
	cmd, err := sp.addScript(job)
	if err != nil {
		return nil, err
	}
	names, err := sp.addInputs(job)
	if err != nil {
		return nil, err
	}
	sp.params = append(sp.params, [2]string{"COMMANDTORUN", cmd}, [2]string{"JOB_NAME", sp.jobName})
	for _, k := range []string{"QUEUE", "OUTPUT_FILE", "ERROR_FILE", "RUNLIMITHOUR", "RUNLIMITMINUTE"} {
		if v := p.vals[k]; v != "" {
			sp.params = append(sp.params, [2]string{k, v})
		}
	}
	if len(p.extra) > 0 {
		sp.params = append(sp.params, [2]string{"EXTRA_PARAMS", strings.Join(p.extra, " ")})
	}
	for _, id := range backends.SortedKeys(p.custom) {
		if reservedParams[id] {
			return nil, backends.Invalid("jobproperties", "params.%s is set from jobdata.jobScript or a jobproperties key of its own; remove it from params", id)
		}
		if names[id] {
			return nil, backends.Invalid("jobproperties", "params.%s collides with a file of the same name", id)
		}
		sp.params = append(sp.params, [2]string{id, p.custom[id]})
	}
	return sp, nil
}

// parseProps reads jobproperties strictly.
func parseProps(raw json.RawMessage) (*props, error) {
	p := &props{vals: map[string]string{}, app: "generic", custom: map[string]string{}}
	vals, given, err := backends.PropertyObject(raw, propAliases)
	if err != nil {
		return nil, err
	}
	byKey := map[string]string{} // key as given → parameter: check in the user's order
	for param, k := range given {
		byKey[k] = param
	}
	for _, k := range backends.SortedKeys(byKey) {
		if err := p.set(byKey[k], k, vals[byKey[k]]); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// set takes one property: param is its application parameter (or the key
// itself when unknown), k the key as the user wrote it.
func (p *props) set(param, k string, v json.RawMessage) error {
	switch k {
	case "kill":
		return backends.Invalid("jobproperties", "kill is not a job property here; set kill=true in the record (or run cleanup) to cancel the job")
	case "pastid", "inputfiledirectory":
		// IBM's pod uploaded inputs through an old job's id; here the
		// files go with the job, so a migrated record's keys are unused.
		p.ignored = append(p.ignored, k)
		return nil
	case "COMMANDTORUN":
		return backends.Invalid("jobproperties", "COMMANDTORUN comes from jobdata.jobScript (a remote path or a script); remove it")
	}
	if _, known := propAliases[k]; !known {
		return backends.Invalid("jobproperties", "unknown key %q; the lsf backend takes %s (and the Bridge Operator's Queue, RunLimitHour, RunLimitMinute, OutputFileName, ErrorFileName, NodesNumber)", k, knownKeys())
	}
	if param == "params" {
		return p.setCustom(v)
	}
	s, err := scalar(v)
	if err != nil {
		return backends.Invalid("jobproperties", "%s: %v", k, err)
	}
	if s, err = checkNumber(param, k, s); err != nil {
		return err
	}
	switch param {
	case "-nnodes":
		p.extra = append(p.extra, "-nnodes "+s)
	case "AppName":
		if s == "" || strings.ContainsAny(s, "\r\n") {
			return backends.Invalid("jobproperties", "%s must name an application, e.g. generic", k)
		}
		p.app = s
	case "EXTRA_PARAMS":
		if s != "" {
			p.extra = append([]string{s}, p.extra...)
		}
	default:
		if strings.ContainsAny(s, "\r\n") {
			return backends.Invalid("jobproperties", "%s must be one line", k)
		}
		p.vals[param] = s
	}
	return nil
}

// setCustom takes params: application parameter ids to values.
func (p *props) setCustom(v json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return backends.Invalid("jobproperties", "params must be an object of application parameter ids to values: %v", err)
	}
	for id, pv := range m {
		if !paramID().MatchString(id) {
			return backends.Invalid("jobproperties", "params: %q is not an application parameter id", id)
		}
		s, err := scalar(pv)
		if err != nil {
			return backends.Invalid("jobproperties", "params.%s: %v", id, err)
		}
		p.custom[id] = s
	}
	return nil
}

// checkNumber checks and normalizes the properties that are whole numbers.
func checkNumber(param, k, s string) (string, error) {
	want := map[string]string{
		"RUNLIMITHOUR":   "a whole number of hours >= 0",
		"RUNLIMITMINUTE": "a whole number of minutes from 0 to 59",
		"-nnodes":        "a whole number of nodes >= 1",
	}[param]
	if want == "" {
		return s, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || (param == "RUNLIMITMINUTE" && n > 59) || (param == "-nnodes" && n < 1) {
		return "", backends.Invalid("jobproperties", "%s must be %s, not %q", k, want, s)
	}
	return strconv.Itoa(n), nil
}

// addScript adds the job script (when it is sent along) and returns the
// command that runs it. The command sets umask 077 first: what the job
// writes is its owner's only, and the script it was sent is made 0700, not
// readable by the other users of the execution host.
func (sp *spec) addScript(job backends.Job) (string, error) {
	const private = "umask 077 && "
	switch {
	case job.ScriptPath != "":
		if strings.ContainsAny(job.ScriptPath, "\r\n") {
			return "", backends.Invalid("jobdata.jobScript", "a remote script path must be one line")
		}
		return private + job.ScriptPath, nil
	case job.Script != "":
		name := job.Key + ".sh"
		sp.files = append(sp.files, file{name: name, data: []byte(job.Script)})
		if strings.HasPrefix(job.Script, "#!") {
			return private + "chmod 700 ./" + name + " && ./" + name, nil
		}
		return private + "/bin/sh ./" + name, nil
	}
	return "", backends.Invalid("jobdata.jobScript", "the lsf backend needs a script (inline or s3) or a remote path to run")
}

// addInputs adds the parameter and metadata files and the input files, and
// returns the names of all files.
func (sp *spec) addInputs(job backends.Job) (map[string]bool, error) {
	if len(job.Parameters) > 0 {
		sp.files = append(sp.files, file{name: "bridge-parameters.json", data: job.Parameters})
	}
	if len(job.Metadata) > 0 {
		sp.files = append(sp.files, file{name: "bridge-metadata.json", data: job.Metadata})
	}
	names := map[string]bool{}
	for _, f := range sp.files {
		names[f.name] = true
	}
	for i := range job.Inputs {
		in := &job.Inputs[i]
		name := path.Base(strings.ReplaceAll(in.Name, "\\", "/"))
		if name == "." || name == "/" || name == ".." || !safeFileName(name) {
			return nil, backends.Invalid("jobdata.additionalData", "%q has no usable file name (letters, digits, '.', '-', '_')", in.Name)
		}
		if names[name] {
			return nil, backends.Invalid("jobdata.additionalData", "two input files are named %q", name)
		}
		names[name] = true
		sp.files = append(sp.files, file{name: name, in: in})
	}
	return names, nil
}

func scalar(v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var n json.Number
	if json.Unmarshal(v, &n) == nil {
		return n.String(), nil
	}
	var bl bool
	if json.Unmarshal(v, &bl) == nil {
		return strconv.FormatBool(bl), nil
	}
	return "", fmt.Errorf("must be a string or a number, not %s", string(v))
}

func safeFileName(n string) bool {
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return n != ""
}

func validKey(k string) bool { return k != "" && safeFileName(k) }

// Validate checks the job and that credentials are present, without
// contacting Application Center.
func (b *Backend) Validate(job backends.Job) error {
	if _, err := buildSpec(job); err != nil {
		return err
	}
	_, _, err := b.credentials()
	return err
}
