package slurm

import (
	"slices"
	"strings"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestRESTJobGetsSbatchsEnvironment: the variables sbatch sets from its
// options are in the REST job's environment, from #SBATCH lines and from
// jobproperties alike, in sbatch's form; the user's own environment wins.
func TestRESTJobGetsSbatchsEnvironment(t *testing.T) {
	script := "#!/bin/sh\n#SBATCH --cpus-per-task=2\n#SBATCH -n 3\n#SBATCH --ntasks-per-node=3\n#SBATCH --mem=1G\ntrue\n"
	for _, v := range []apiVersion{38, 40, 42} {
		job, _ := restJob(t, v, script, `{"environment":{"SLURM_NPROCS":"mine"}}`)
		env := toStrings(job["environment"])
		for _, want := range []string{"SLURM_CPUS_PER_TASK=2", "SLURM_NTASKS=3", "SLURM_NTASKS_PER_NODE=3", "SLURM_MEM_PER_NODE=1024", "SLURM_NPROCS=mine"} {
			if !slices.Contains(env, want) {
				t.Errorf("v%d: environment %q lacks %s", v, env, want)
			}
		}
		if slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "SLURM_MEM_PER_CPU=") }) {
			t.Errorf("v%d: SLURM_MEM_PER_CPU set without --mem-per-cpu: %q", v, env)
		}
	}
	job, _ := restJob(t, 42, "#!/bin/sh\ntrue\n", `{"cpus_per_task":"4","memory_per_cpu":{"set":true,"number":100},"Tasks":"2"}`)
	env := toStrings(job["environment"])
	for _, want := range []string{"SLURM_CPUS_PER_TASK=4", "SLURM_MEM_PER_CPU=100", "SLURM_NTASKS=2"} {
		if !slices.Contains(env, want) {
			t.Errorf("jobproperties: environment %q lacks %s", env, want)
		}
	}
	job, _ = restJob(t, 42, "#!/bin/sh\ntrue\n", `{}`)
	for _, kv := range toStrings(job["environment"]) {
		// SLURM_UMASK is every job's (its files are its owner's only), not an option's.
		if strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "SLURM_UMASK=") {
			t.Errorf("no option, yet %s", kv)
		}
	}
}

// TestSbatchEnvFieldsComeFromDirectives: each field of sbatchEnv is one
// that an #SBATCH line sets, so the table cannot name a field no script
// reaches (a misspelt one would set nothing, silently).
func TestSbatchEnvFieldsComeFromDirectives(t *testing.T) {
	fields := map[string]bool{}
	for _, rd := range directiveFields {
		fields[rd.field] = true
	}
	for _, e := range sbatchEnv {
		if !fields[e.field] {
			t.Errorf("sbatchEnv names %s, which no #SBATCH option sets", e.field)
		}
		for _, v := range e.vars {
			if !strings.HasPrefix(v, "SLURM_") {
				t.Errorf("%s: sbatch's variables are SLURM_*", v)
			}
		}
	}
}

// TestTresPerTaskFromSlurm2411: SLURM_TRES_PER_TASK=cpu=N as 24.11's sbatch
// sets it, for the API versions only 24.11 on serves, and not before.
func TestTresPerTaskFromSlurm2411(t *testing.T) {
	for v, want := range map[apiVersion]bool{38: false, 40: false, 41: false, 42: true} {
		s, err := buildJob(backends.Job{Name: "n", Key: "k", Script: "#!/bin/sh\n#SBATCH -c 3\ntrue\n"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.forVersion(v); err != nil {
			t.Fatal(err)
		}
		got, set := s.env["SLURM_TRES_PER_TASK"]
		if set != want || (want && got != "cpu=3") {
			t.Errorf("v%d: SLURM_TRES_PER_TASK %q (set %v), want set %v", v, got, set, want)
		}
	}
}
