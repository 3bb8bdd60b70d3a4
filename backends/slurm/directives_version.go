package slurm

import (
	"fmt"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// versioned is a #SBATCH directive whose job field or its shape differs
// between API versions (checked against each version's /openapi/v3 on the
// real 22.05 and 24.11): it is encoded once the version is known.
type versioned struct {
	d      directive
	names  []string // the job fields it may set, for jobproperties' precedence
	encode func(v apiVersion) (field string, value any, err error)
}

// dataParser: from v0.0.39 slurmrestd reads the job with its data_parser
// (flag arrays, TRES strings); v0.0.38 hands the fields to sbatch's option
// parser.
func (v apiVersion) dataParser() bool { return v >= 39 }

var versionedDirectives = map[string]func(val string) (versioned, error){
	"exclusive": exclusiveDirective, "mail-type": mailTypeDirective,
	"gres": gresDirective, "gpus": gpusDirective,
	"nodelist": newerOnly("required_nodes", nil), "exclude": newerOnly("excluded_nodes", nil),
	"tmp":   newerOnly("temporary_disk_per_node", megabytes),
	"begin": beginDirective,
}

// beginDirective: v0.0.38 hands begin_time to sbatch's own parser, which
// takes sbatch's words (now+1hour, 16:00, teatime, ...) in slurmrestd's
// time zone and refuses a number; later versions take a UNIX time, which
// bridge-runner computes from the forms beginTime reads.
func beginDirective(val string) (versioned, error) {
	at, err := beginTime(val)
	if err != nil {
		return versioned{}, err
	}
	return versioned{names: []string{"begin_time"}, encode: func(v apiVersion) (string, any, error) {
		if v.dataParser() {
			return "begin_time", map[string]any{"set": true, "infinite": false, "number": at}, nil
		}
		return "begin_time", val, nil
	}}, nil
}

// exclusiveDirective: v0.0.38 takes sbatch's words (exclusive, user, mcs);
// later versions say it as how the job shares nodes ("none" for
// exclusive), the field sbatch 24.11 fills (exclusive is deprecated).
func exclusiveDirective(val string) (versioned, error) {
	word := map[string][2]string{"": {"exclusive", "none"}, "user": {"user", "user"}, "mcs": {"mcs", "mcs"}}[val]
	if word[0] == "" {
		return versioned{}, fmt.Errorf("%q: --exclusive takes no value, user or mcs", val)
	}
	return versioned{names: []string{"shared", "exclusive"}, encode: func(v apiVersion) (string, any, error) {
		if v.dataParser() {
			return "shared", []string{word[1]}, nil
		}
		return "exclusive", word[0], nil
	}}, nil
}

// mailFlags are sbatch's --mail-type words in the data parser's flags.
var mailFlags = map[string][]string{
	"NONE": {}, "BEGIN": {"BEGIN"}, "END": {"END"}, "FAIL": {"FAIL"}, "REQUEUE": {"REQUEUE"},
	"ALL":            {"BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT", "INVALID_DEPENDENCY"},
	"INVALID_DEPEND": {"INVALID_DEPENDENCY"}, "STAGE_OUT": {"STAGE_OUT"}, "ARRAY_TASKS": {"ARRAY_TASKS"},
	"TIME_LIMIT": {"TIME=100%"}, "TIME_LIMIT_90": {"TIME=90%"}, "TIME_LIMIT_80": {"TIME=80%"}, "TIME_LIMIT_50": {"TIME=50%"},
}

func mailTypeDirective(val string) (versioned, error) {
	flags := []string{}
	var words []string
	for _, t := range strings.Split(strings.ToUpper(val), ",") {
		t = strings.TrimSpace(t)
		f, ok := mailFlags[t]
		if !ok {
			return versioned{}, fmt.Errorf("%q is not a mail type (NONE, BEGIN, END, FAIL, REQUEUE, ALL, INVALID_DEPEND, STAGE_OUT, ARRAY_TASKS, TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50)", t)
		}
		words = append(words, t)
		flags = append(flags, f...)
	}
	return versioned{names: []string{"mail_type"}, encode: func(v apiVersion) (string, any, error) {
		if v.dataParser() {
			return "mail_type", flags, nil
		}
		return "mail_type", strings.Join(words, ","), nil
	}}, nil
}

// gresDirective: v0.0.38 has gres, taking sbatch's value; later versions
// take the per-node TRES string, gres/NAME[:TYPE]:COUNT.
func gresDirective(val string) (versioned, error) {
	var tres []string
	for _, g := range strings.Split(val, ",") {
		if g = strings.TrimSpace(strings.TrimPrefix(g, "gres:")); g == "" {
			return versioned{}, fmt.Errorf("an empty GRES in %q", val)
		}
		tres = append(tres, "gres/"+g)
	}
	return versioned{names: []string{"tres_per_node", "gres"}, encode: func(v apiVersion) (string, any, error) {
		if v.dataParser() {
			return "tres_per_node", strings.Join(tres, ","), nil
		}
		return "gres", val, nil
	}}, nil
}

// gpusDirective: v0.0.38 has gpus; later versions the job's TRES.
func gpusDirective(val string) (versioned, error) {
	if strings.TrimSpace(val) == "" {
		return versioned{}, fmt.Errorf("no GPU count")
	}
	return versioned{names: []string{"tres_per_job", "gpus"}, encode: func(v apiVersion) (string, any, error) {
		if v.dataParser() {
			return "tres_per_job", "gres/gpu:" + val, nil
		}
		return "gpus", val, nil
	}}, nil
}

// newerOnly is a field v0.0.38 (Slurm 22.05) does not have.
func newerOnly(field string, conv func(string) (any, error)) func(string) (versioned, error) {
	return func(val string) (versioned, error) {
		var value any = val
		if conv != nil {
			var err error
			if value, err = conv(val); err != nil {
				return versioned{}, err
			}
		}
		return versioned{names: []string{field}, encode: func(v apiVersion) (string, any, error) {
			if !v.dataParser() {
				return "", nil, fmt.Errorf("slurmrestd %s has no job field for it (%s came with v0.0.39); remove the line, or submit over ssh://, where sbatch reads it", v, field)
			}
			return field, value, nil
		}}, nil
	}
}

// forVersion encodes the script's version-dependent directives for v.
func (s *jobSpec) forVersion(v apiVersion) error {
	for _, vd := range s.versioned {
		field, value, err := vd.encode(v)
		if err != nil {
			return backends.Invalid("jobdata.jobScript", "line %d: %s: %v", vd.d.line, vd.d, err)
		}
		s.fields[field] = mustJSON(value)
	}
	s.versioned = nil
	s.setReleaseEnv(v)
	return nil
}
