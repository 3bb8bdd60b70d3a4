package lsf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// spec is a job ready to submit.
type spec struct {
	app     string
	params  [][2]string // id, value in order
	files   []file
	jobName string
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

var paramID = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func knownKeys() string {
	var s []string
	for _, k := range propKeys {
		s = append(s, k.names[0])
	}
	return strings.Join(s, ", ")
}

// buildSpec turns the job into application parameters and files.
func buildSpec(job backends.Job) (*spec, error) {
	sp := &spec{app: "generic"}
	vals := map[string]string{}
	var extra []string
	custom := map[string]string{}
	if len(bytes.TrimSpace(job.Properties)) > 0 {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(job.Properties, &raw); err != nil {
			return nil, backends.Invalid("jobproperties", "not a JSON object: %v", err)
		}
		seen := map[string]string{}
		keys := make([]string, 0, len(raw))
		for k := range raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := raw[k]
			param := ""
			for _, pk := range propKeys {
				for _, n := range pk.names {
					if n == k {
						param = pk.param
					}
				}
			}
			switch k {
			case "kill":
				return nil, backends.Invalid("jobproperties", "kill is not a job property here; set kill=true in the record (or run cleanup) to cancel the job")
			case "pastid", "inputfiledirectory":
				return nil, backends.Invalid("jobproperties", "%s is not needed: jobdata.additionalData files are uploaded with the job", k)
			case "COMMANDTORUN":
				return nil, backends.Invalid("jobproperties", "COMMANDTORUN comes from jobdata.jobScript (a remote path or a script); remove it")
			}
			if param == "" {
				return nil, backends.Invalid("jobproperties", "unknown key %q; the lsf backend takes %s (and the Bridge Operator's Queue, RunLimitHour, RunLimitMinute, OutputFileName, ErrorFileName, NodesNumber)", k, knownKeys())
			}
			if other, dup := seen[param]; dup {
				return nil, backends.Invalid("jobproperties", "%q and %q set the same thing; keep one", other, k)
			}
			seen[param] = k
			if param == "params" {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(v, &m); err != nil {
					return nil, backends.Invalid("jobproperties", "params must be an object of application parameter ids to values: %v", err)
				}
				for id, pv := range m {
					if !paramID.MatchString(id) {
						return nil, backends.Invalid("jobproperties", "params: %q is not an application parameter id", id)
					}
					s, err := scalar(pv)
					if err != nil {
						return nil, backends.Invalid("jobproperties", "params.%s: %v", id, err)
					}
					custom[id] = s
				}
				continue
			}
			s, err := scalar(v)
			if err != nil {
				return nil, backends.Invalid("jobproperties", "%s: %v", k, err)
			}
			switch param {
			case "RUNLIMITHOUR", "RUNLIMITMINUTE", "-nnodes":
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || n < 0 || (param == "RUNLIMITMINUTE" && n > 59) || (param == "-nnodes" && n < 1) {
					want := "a whole number of hours >= 0"
					switch param {
					case "RUNLIMITMINUTE":
						want = "a whole number of minutes from 0 to 59"
					case "-nnodes":
						want = "a whole number of nodes >= 1"
					}
					return nil, backends.Invalid("jobproperties", "%s must be %s, not %q", k, want, s)
				}
				s = strconv.Itoa(n)
			}
			switch param {
			case "-nnodes":
				extra = append(extra, "-nnodes "+s)
			case "AppName":
				if s == "" || strings.ContainsAny(s, "\r\n") {
					return nil, backends.Invalid("jobproperties", "%s must name an application, e.g. generic", k)
				}
				sp.app = s
			case "EXTRA_PARAMS":
				if s != "" {
					extra = append([]string{s}, extra...)
				}
			default:
				if strings.ContainsAny(s, "\r\n") {
					return nil, backends.Invalid("jobproperties", "%s must be one line", k)
				}
				vals[param] = s
			}
		}
	}
	if !validKey(job.Key) {
		return nil, backends.Invalid("idempotency key", "%q is not a plain name", job.Key)
	}
	sp.jobName = job.Key
	if n := vals["JOB_NAME"]; n != "" {
		sp.jobName = job.Key + "-" + n
	} else if job.Name != "" {
		sp.jobName = job.Key + "-" + job.Name
	}
	var cmd string
	switch {
	case job.ScriptPath != "":
		if strings.ContainsAny(job.ScriptPath, "\r\n") {
			return nil, backends.Invalid("jobdata.jobScript", "a remote script path must be one line")
		}
		cmd = job.ScriptPath
	case job.Script != "":
		name := job.Key + ".sh"
		sp.files = append(sp.files, file{name: name, data: []byte(job.Script)})
		if strings.HasPrefix(job.Script, "#!") {
			cmd = "chmod 755 ./" + name + " && ./" + name
		} else {
			cmd = "/bin/sh ./" + name
		}
	default:
		return nil, backends.Invalid("jobdata.jobScript", "the lsf backend needs a script (inline or s3) or a remote path to run")
	}
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
	sp.params = append(sp.params, [2]string{"COMMANDTORUN", cmd}, [2]string{"JOB_NAME", sp.jobName})
	for _, p := range []string{"QUEUE", "OUTPUT_FILE", "ERROR_FILE", "RUNLIMITHOUR", "RUNLIMITMINUTE"} {
		if v := vals[p]; v != "" {
			sp.params = append(sp.params, [2]string{p, v})
		}
	}
	if len(extra) > 0 {
		sp.params = append(sp.params, [2]string{"EXTRA_PARAMS", strings.Join(extra, " ")})
	}
	ids := make([]string, 0, len(custom))
	for id := range custom {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if reservedParams[id] {
			return nil, backends.Invalid("jobproperties", "params.%s is set from jobdata.jobScript or a jobproperties key of its own; remove it from params", id)
		}
		if names[id] {
			return nil, backends.Invalid("jobproperties", "params.%s collides with a file of the same name", id)
		}
		sp.params = append(sp.params, [2]string{id, custom[id]})
	}
	return sp, nil
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
