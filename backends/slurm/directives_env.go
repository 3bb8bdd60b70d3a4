package slurm

import (
	"encoding/json"
	"strconv"
	"strings"
)

// sbatchEnv: sbatch puts some of its options into the environment it
// submits with (its man page, OUTPUT ENVIRONMENT VARIABLES: "only set if
// the option is specified"), and the batch job inherits them. slurmrestd
// sets none of them, and slurmd does not either, so a job submitted over
// REST read SLURM_CPUS_PER_TASK as unset where the same script under
// sbatch read 2. These are the job fields (whether from #SBATCH lines or
// jobproperties) and the variables sbatch sets for them; the values take
// sbatch's form (whole numbers; memory in megabytes).
// TestRealSbatchEnvironmentParity diffs the whole SLURM_* environment of
// one script over REST and under sbatch, on 22.05 and 24.11.
var sbatchEnv = []struct {
	field string
	vars  []string
}{
	{"cpus_per_task", []string{"SLURM_CPUS_PER_TASK"}},
	{"tasks", []string{"SLURM_NTASKS", "SLURM_NPROCS"}},
	{"tasks_per_node", []string{"SLURM_NTASKS_PER_NODE"}},
	{"memory_per_node", []string{"SLURM_MEM_PER_NODE"}},
	{"memory_per_cpu", []string{"SLURM_MEM_PER_CPU"}},
}

// setSbatchEnv sets the variables of sbatchEnv from the job's fields,
// beneath the user's environment (which wins, as an explicit
// --export=NAME=value does under sbatch).
func (s *jobSpec) setSbatchEnv(userEnv map[string]string) {
	for _, e := range sbatchEnv {
		n, ok := wholeField(s.fields[e.field])
		if !ok {
			continue
		}
		for _, v := range e.vars {
			if _, mine := userEnv[v]; !mine {
				s.env[v] = n
			}
		}
	}
}

// wholeField reads a job field that holds a whole number in any of the
// forms jobproperties takes: 2, "2", or {"set":true,"number":2}.
func wholeField(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	var nv struct {
		Set      bool        `json:"set"`
		Infinite bool        `json:"infinite"`
		Number   json.Number `json:"number"`
	}
	if json.Unmarshal(raw, &nv) == nil && raw[0] == '{' {
		if !nv.Set || nv.Infinite {
			return "", false
		}
		raw = json.RawMessage(nv.Number)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatUint(n, 10), true
}

// tresPerTaskFrom is the first API version whose Slurm's sbatch also gives
// --cpus-per-task as SLURM_TRES_PER_TASK=cpu=N: v0.0.42, which only Slurm
// 24.11 on serves (the suite's 24.11 sets it; what 23.11 and 24.05 set is
// not verified here, so a job there, or one pinned to an older API of a
// 24.11, goes without it).
const tresPerTaskFrom apiVersion = 42

// setReleaseEnv sets what sbatch sets only from some Slurm release on,
// once the API version in use tells the release; the user's own
// environment wins.
func (s *jobSpec) setReleaseEnv(v apiVersion) {
	if v < tresPerTaskFrom {
		return
	}
	if n, ok := wholeField(s.fields["cpus_per_task"]); ok {
		if _, mine := s.env["SLURM_TRES_PER_TASK"]; !mine {
			s.env["SLURM_TRES_PER_TASK"] = "cpu=" + n
		}
	}
}
