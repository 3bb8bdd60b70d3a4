package slurm

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// scriptJob is what the script's #SBATCH lines ask of a REST job.
type scriptJob struct {
	fields map[string]json.RawMessage // jobproperties-shaped, by job field
	from   map[string]directive       // the directive that set each field
	env    map[string]string          // from --export=NAME=value,...
	// versioned: directives whose field differs by API version, by their
	// first field name
	versioned map[string]versioned
	warn      []string
}

// restDirectives turns the script's directives into job fields. A
// directive that no job field carries is refused: slurmrestd would ignore
// it, and the job would differ from the one sbatch submits.
func restDirectives(ds []directive) (*scriptJob, error) {
	sj := &scriptJob{fields: map[string]json.RawMessage{}, from: map[string]directive{}, env: map[string]string{},
		versioned: map[string]versioned{}}
	for _, d := range ds {
		if err := sj.add(d); err != nil {
			return nil, err
		}
	}
	return sj, nil
}

func (sj *scriptJob) add(d directive) error {
	if _, ok := directiveIgnored[d.opt]; ok {
		return nil
	}
	if why, ok := directiveRefused[d.opt]; ok {
		return backends.Invalid("jobdata.jobScript", "line %d: %s: %s", d.line, d, why)
	}
	switch d.opt {
	case "export":
		return sj.export(d)
	case "comment":
		sj.warn = append(sj.warn, fmt.Sprintf("line %d: %s is ignored: bridge-runner keeps the job's idempotency key in comment", d.line, d))
		return nil
	}
	if mk, ok := versionedDirectives[d.opt]; ok {
		vd, err := mk(d.val)
		if err != nil {
			return backends.Invalid("jobdata.jobScript", "line %d: %s: %v", d.line, d, err)
		}
		vd.d = d
		sj.versioned[vd.names[0]] = vd
		return nil
	}
	rd, ok := directiveFields[d.opt]
	if !ok {
		return backends.Invalid("jobdata.jobScript", "line %d: %s: slurmrestd ignores #SBATCH lines and bridge-runner has no job field for --%s; remove the line and set slurmrestd's field for it in jobproperties (jobproperties is passed through as the job), or submit over ssh://, where sbatch reads the line", d.line, d, d.opt)
	}
	var v any = d.val
	if rd.conv != nil {
		var err error
		if v, err = rd.conv(d.val); err != nil {
			return backends.Invalid("jobdata.jobScript", "line %d: %s: %v", d.line, d, err)
		}
	}
	return sj.set(d, rd.field, v)
}

// set keeps the last directive for a field, as sbatch does.
func (sj *scriptJob) set(d directive, field string, v any) error {
	sj.fields[field] = mustJSON(v)
	sj.from[field] = d
	return nil
}

// export: over REST the job has no submitting environment to pass on, so
// NAME=value pairs become its environment, ALL and NONE change nothing
// (ALL is said), and a bare NAME is refused: its value would come from an
// environment that does not exist.
func (sj *scriptJob) export(d directive) error {
	for _, item := range strings.Split(d.val, ",") {
		name, val, ok := strings.Cut(item, "=")
		switch {
		case ok && name != "":
			sj.env[name] = val
		case item == "ALL":
			sj.warn = append(sj.warn, fmt.Sprintf("line %d: %s: a job submitted over REST inherits no environment; it gets PATH, BRIDGE_* and jobproperties' environment", d.line, d))
		case item == "NONE" || item == "NIL":
		default:
			return backends.Invalid("jobdata.jobScript", "line %d: %s: over REST there is no submitting environment to take %q from; write %s=value, or set it in jobproperties' environment", d.line, d, item, item)
		}
	}
	return nil
}

// beginTime reads the --begin forms that do not depend on the submitting
// host's clock conventions beyond its time zone: now+N[units], an ISO date
// or date and time, or a time of day (today, or tomorrow once past). The
// local time zone is this process's (TZ), as sbatch uses the login node's.
func beginTime(s string) (any, error) {
	now := time.Now()
	if rest, ok := strings.CutPrefix(s, "now+"); ok {
		return nowPlus(now, rest)
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t.Unix(), nil
		}
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			at := time.Date(now.Year(), now.Month(), now.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.Local)
			if !at.After(now) {
				at = at.AddDate(0, 0, 1)
			}
			return at.Unix(), nil
		}
	}
	return nil, fmt.Errorf("%q is not a --begin bridge-runner reads over REST; write now+N[seconds|minutes|hours|days|weeks], HH:MM[:SS] or YYYY-MM-DD[THH:MM[:SS]]", s)
}

func nowPlus(now time.Time, rest string) (any, error) {
	i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(rest)
	}
	n, err := strconv.ParseInt(rest[:i], 10, 32)
	unit := map[string]time.Duration{"": time.Second, "seconds": time.Second, "minutes": time.Minute,
		"hours": time.Hour, "days": 24 * time.Hour, "weeks": 7 * 24 * time.Hour}[rest[i:]]
	if err != nil || unit == 0 {
		return nil, fmt.Errorf("now+%s: write now+N with N whole and an optional unit seconds, minutes, hours, days or weeks", rest)
	}
	return now.Add(time.Duration(n) * unit).Unix(), nil
}

// mergeScript puts the script's fields into jobproperties where
// jobproperties says nothing of them; where both speak, jobproperties wins
// and the choice is kept in s.notes to be logged once at submit.
func (s *jobSpec) mergeScript(sj *scriptJob, props map[string]json.RawMessage) {
	var won []string
	for _, f := range sortedKeys(sj.fields) {
		if k := propsKey(props, f); k != "" {
			won = append(won, fmt.Sprintf("%s (jobproperties %s) over line %d %s", f, k, sj.from[f].line, sj.from[f]))
			continue
		}
		props[f] = sj.fields[f]
	}
	for _, f := range sortedKeys(sj.versioned) {
		vd := sj.versioned[f]
		if k := propsKey(props, vd.names...); k != "" {
			won = append(won, fmt.Sprintf("%s (jobproperties %s) over line %d %s", f, k, vd.d.line, vd.d))
			continue
		}
		s.versioned = append(s.versioned, vd)
	}
	if len(won) > 0 {
		s.notes = append(s.notes, "jobproperties wins over the script's #SBATCH lines: "+strings.Join(won, "; "))
	}
	s.warnings = append(s.warnings, sj.warn...)
}

// scriptEnv layers the script's --export values beneath jobproperties'
// environment.
func scriptEnv(sj *scriptJob, userEnv map[string]string) map[string]string {
	if userEnv == nil {
		userEnv = map[string]string{}
	}
	for k, v := range sj.env {
		if _, ok := userEnv[k]; !ok {
			userEnv[k] = v
		}
	}
	return userEnv
}

// propsKey is the jobproperties key that sets field, under its own name or
// the Bridge Operator's ("" if none, or only an empty alias).
func propsKey(props map[string]json.RawMessage, fields ...string) string {
	for _, field := range fields {
		if _, ok := props[field]; ok {
			return field
		}
		for _, a := range aliases {
			if raw, ok := props[a.ibm]; ok && a.native == field && !isEmptyString(raw) {
				return a.ibm
			}
		}
	}
	return ""
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
