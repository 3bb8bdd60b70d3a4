package slurm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// restJob is the "job" object sent to version v for script and props.
func restJob(t *testing.T, v apiVersion, script, props string) (map[string]any, *jobSpec) {
	t.Helper()
	s, err := buildJob(backends.Job{Name: "n", Key: "k1", Script: script, Properties: json.RawMessage(props)})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(s.body(v))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Job map[string]any `json:"job"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	return body.Job, s
}

func TestScriptDirectivesAsSbatchReadsThem(t *testing.T) {
	script := "#!/bin/bash\n" +
		"# a comment\n\n" +
		"#SBATCH --job-name='my job' # a comment after it\n" +
		"#SBATCH -c 2 -N1\n" +
		"#SBATCH --mem 4G --part=debug\n" +
		"#SBATCH -Qt 1:30\n" +
		" #SBATCH --ntasks=9\n" + // not at the start of the line: a comment
		"# SBATCH --ntasks=8\n" +
		"#SBATCH --ntasks=3 --ntasks=4\n" + // the last one wins
		"echo hello\n" +
		"#SBATCH --array=1-3\n" // after the first command: not read
	ds, err := scriptDirectives(script)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.String())
	}
	want := []string{"#SBATCH --job-name=my job", "#SBATCH --cpus-per-task=2", "#SBATCH --nodes=1", "#SBATCH --mem=4G",
		"#SBATCH --partition=debug", "#SBATCH --quiet", "#SBATCH --time=1:30", "#SBATCH --ntasks=3", "#SBATCH --ntasks=4"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("directives\n got %q\nwant %q", got, want)
	}
	for _, v := range []apiVersion{38, 42} {
		job, _ := restJob(t, v, script, `{}`)
		mem := map[apiVersion]string{38: "4096", 42: `{"infinite":false,"number":4096,"set":true}`}[v]
		for field, want := range map[string]string{"name": `"my job"`, "cpus_per_task": "2", "memory_per_node": mem,
			"partition": `"debug"`, "tasks": "4", "comment": `"k1"`} {
			if b, _ := json.Marshal(job[field]); string(b) != want {
				t.Errorf("%s: %s = %s, want %s", v, field, b, want)
			}
		}
		// 1:30 is a minute and a half: Slurm rounds up to 2.
		tl, _ := json.Marshal(job["time_limit"])
		if want := map[apiVersion]string{38: "2", 42: `{"infinite":false,"number":2,"set":true}`}[v]; string(tl) != want {
			t.Errorf("%s: time_limit %s, want %s", v, tl, want)
		}
	}
}

func TestScriptDirectivesRefused(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"#SBATCH --array=1-3", "array key"},
		{"#SBATCH -a 1-3", "array key"},
		{"#SBATCH --cpus=2", "ambiguous"},
		{"#SBATCH --no-such-option", "not an sbatch option"},
		{"#SBATCH -Z", "not an sbatch option"},
		{"#SBATCH --mem", "needs a value"},
		{"#SBATCH --requeue=yes", "takes no value"},
		{"#SBATCH hetjob", "heterogeneous"},
		{"#SBATCH stray", "not an option"},
		{"#SBATCH --mem=4X", "memory size"},
		{"#SBATCH --export=HOME", "HOME=value"},
		{"#SBATCH --begin=teatime", "now+N"},
		{"#SBATCH --hint=compute_bound", "no job field for --hint"},
	} {
		_, err := buildJob(backends.Job{Key: "k", Script: "#!/bin/sh\n" + tc.line + "\ntrue\n"})
		testutil.RequireFieldError(t, err, "jobdata.jobScript")
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.line, err, tc.want)
		}
	}
	// The SSH flavour refuses what is refused for reasons of its own, and
	// leaves the rest to sbatch.
	_, err := buildSbatch(backends.Job{Key: "k", Script: "#!/bin/sh\n#SBATCH --array=1-3\ntrue\n"})
	testutil.RequireFieldError(t, err, "jobdata.jobScript")
	if _, err := buildSbatch(backends.Job{Key: "k", Script: "#!/bin/sh\n#SBATCH --hint=compute_bound\ntrue\n"}); err != nil {
		t.Fatalf("sbatch reads --hint itself: %v", err)
	}
}

func TestJobPropertiesWinOverTheScript(t *testing.T) {
	script := "#!/bin/sh\n#SBATCH -p fromscript -n 2\n#SBATCH --export=A=1,B=2,ALL\n#SBATCH -N 3\n#SBATCH --comment=x\ntrue\n"
	job, s := restJob(t, 42, script, `{"Queue":"fromprops","NodesNumber":"","environment":{"B":"props"}}`)
	if job["partition"] != "fromprops" || job["tasks"] != float64(2) {
		t.Fatalf("partition %v tasks %v", job["partition"], job["tasks"])
	}
	env := strings.Join(toStrings(job["environment"]), " ")
	if !strings.Contains(env, "A=1") || !strings.Contains(env, "B=props") {
		t.Fatalf("environment %q", env)
	}
	if len(s.notes) != 1 || !strings.Contains(s.notes[0], "partition (jobproperties Queue) over line 2 #SBATCH --partition=fromscript") ||
		strings.Contains(s.notes[0], "nodes") {
		t.Fatalf("notes %q: the empty NodesNumber must not win", s.notes)
	}
	if len(s.warnings) != 2 || !strings.Contains(s.warnings[0], "inherits no environment") || !strings.Contains(s.warnings[1], "idempotency key") {
		t.Fatalf("warnings %q", s.warnings)
	}
	if job["comment"] != "k1" {
		t.Fatalf("comment %v", job["comment"])
	}
}

func TestSbatchMemoryAndTime(t *testing.T) {
	for in, want := range map[string]uint64{"100": 100, "100M": 100, "1g": 1024, "2T": 2 << 20, "1K": 1, "1025K": 2, "0": 0} {
		got, err := megabytes(in)
		if err != nil || got != want {
			t.Errorf("megabytes(%q) = %v %v, want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]uint32{"5": 5, "5:30": 6, "1:00:00": 60, "2-3": 51 * 60, "1-0:30": 24*60 + 30, "1-00:00:01": 24*60 + 1} {
		got, inf, ok := parseSlurmTime(in)
		if !ok || inf || got != want {
			t.Errorf("parseSlurmTime(%q) = %d %v %v, want %d", in, got, inf, ok, want)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			s, _ := e.(string)
			out = append(out, s)
		}
	case map[string]any:
		for k, e := range x {
			s, _ := e.(string)
			out = append(out, k+"="+s)
		}
	}
	return out
}

// TestDirectivesPerAPIVersion: the shapes each version's /openapi/v3 gives
// (and the real 22.05 and 24.11 accept without warnings).
func TestDirectivesPerAPIVersion(t *testing.T) {
	script := "#!/bin/sh\n#SBATCH --exclusive --mail-type=END,TIME_LIMIT_90 --gres=gpu:1 -N 2 --gpus=2\ntrue\n"
	want := map[apiVersion]string{
		38: `exclusive="exclusive" gpus="2" gres="gpu:1" mail_type="END,TIME_LIMIT_90" nodes="2"`,
		40: `nodes="2" shared=["none"] mail_type=["END","TIME=90%"] tres_per_job="gres/gpu:2" tres_per_node="gres/gpu:1"`,
		42: `nodes="2" shared=["none"] mail_type=["END","TIME=90%"] tres_per_job="gres/gpu:2" tres_per_node="gres/gpu:1"`,
	}
	for v, fields := range want {
		s, err := buildJob(backends.Job{Key: "k", Script: script, Properties: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.forVersion(v); err != nil {
			t.Fatal(err)
		}
		job := s.body(v)["job"].(map[string]any)
		for _, kv := range strings.Fields(fields) {
			k, w, _ := strings.Cut(kv, "=")
			if got, _ := json.Marshal(job[k]); string(got) != w {
				t.Errorf("%s: %s = %s, want %s", v, k, got, w)
			}
		}
	}
	// IBM's NodesNumber "1" is a string to v0.0.39+ too.
	job, _ := restJob(t, 42, "#!/bin/sh\n", `{"NodesNumber":"1"}`)
	if job["nodes"] != "1" {
		t.Errorf("nodes %#v, want \"1\"", job["nodes"])
	}
	job, _ = restJob(t, 38, "#!/bin/sh\n", `{"NodesNumber":"1"}`)
	if job["nodes"] != float64(1) {
		t.Errorf("v0.0.38 nodes %#v, want 1", job["nodes"])
	}
	// A field 22.05 lacks is refused when the version is known.
	s, err := buildJob(backends.Job{Key: "k", Script: "#!/bin/sh\n#SBATCH -w node1\ntrue\n"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.RequireFieldError(t, s.forVersion(38), "jobdata.jobScript")
}
