// Package components_test proves that the KFP v1 component YAML in
// components/ agrees with the binary, with no Python: strict decoding (a
// field KFP's v1 schema does not have, such as volumes, is an error), the
// job-description inputs are exactly record.Fields with the CLI's defaults,
// the outputs exactly runner.OutputFields, and every component's command
// line, with its placeholders expanded as KFP would, is run by the real
// binary built from this tree (for real, with the local backend and a file
// record). hack/kfp-check.sh proves separately that the real kfp SDK loads
// them.
package components_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/internal/testbin"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

type input struct {
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Description string  `json:"description"`
	Default     *string `json:"default"`
	Optional    bool    `json:"optional"`
}

type output struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

// component is the part of KFP's v1 ComponentSpec we use; strict decoding
// into it refuses anything else.
type component struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Metadata    struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Inputs         []input  `json:"inputs"`
	Outputs        []output `json:"outputs"`
	Implementation struct {
		Container struct {
			Image   string   `json:"image"`
			Command []string `json:"command"`
			Args    []any    `json:"args"`
		} `json:"container"`
	} `json:"implementation"`
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// parameterTypes are the KFP types we use; any other type would make an
// input an artifact.
var parameterTypes = []string{record.TypeString, record.TypeBoolean, record.TypeInteger}

func load(t *testing.T) map[string]*component {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no components/*.yaml: %v", err)
	}
	out := map[string]*component{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c component
		if err := yaml.UnmarshalStrict(b, &c); err != nil {
			t.Fatalf("%s: strict decoding: %v", f, err)
		}
		out[strings.TrimSuffix(f, ".yaml")] = &c
	}
	for _, want := range []string{"create-configmap", "invoke", "cleanup", "bridge-job"} {
		if out[want] == nil {
			t.Fatalf("no components/%s.yaml", want)
		}
	}
	return out
}

// placeholder returns a KFP placeholder's kind and name ("" for a literal).
func placeholder(t *testing.T, file string, a any) (kind, name string) {
	t.Helper()
	switch v := a.(type) {
	case string:
		return "", v
	case map[string]any:
		if len(v) == 1 {
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "inputValue" || k == "outputPath") {
					return k, s
				}
			}
		}
	}
	t.Fatalf("%s: argument %v is not a string, {inputValue: x} or {outputPath: x}", file, a)
	return "", ""
}

func TestComponentsAreWellFormed(t *testing.T) {
	for file, c := range load(t) {
		ins, outs := map[string]input{}, map[string]bool{}
		for _, in := range c.Inputs {
			if !snake.MatchString(in.Name) || !slices.Contains(parameterTypes, in.Type) || in.Description == "" {
				t.Errorf("%s: input %+v: want a snake_case name, a KFP parameter type %v and a description", file, in, parameterTypes)
			}
			if in.Optional && in.Default == nil {
				t.Errorf("%s: input %s is optional without a default", file, in.Name)
			}
			// KFP refuses a string for an Integer input: its description
			// must not offer one (issue 32: update_interval offered 1m).
			if in.Type == "Integer" && regexp.MustCompile(`(seconds|number), or a duration`).MatchString(in.Description) {
				t.Errorf("%s: input %s is an Integer but its description offers a duration: %q", file, in.Name, in.Description)
			}
			ins[in.Name] = in
		}
		for _, o := range c.Outputs {
			if !snake.MatchString(o.Name) || o.Type != "String" {
				t.Errorf("%s: output %+v: want a snake_case name and type String", file, o)
			}
			outs[o.Name] = true
		}
		if in, ok := ins["job_name"]; !ok || in.Default != nil {
			t.Errorf("%s: want a required input job_name (no default)", file)
		}
		ct := c.Implementation.Container
		if ct.Image != pinnedImage(t) {
			t.Errorf("%s: image %q, want %q (make set-image)", file, ct.Image, pinnedImage(t))
		}
		if len(ct.Command) != 2 || ct.Command[0] != "/bridge-runner" || ct.Command[1] != c.Metadata.Annotations["bridge-runner.io/command"] {
			t.Errorf("%s: command %v, want [/bridge-runner <the bridge-runner.io/command annotation>]", file, ct.Command)
		}
		usedIn, usedOut := map[string]int{}, map[string]int{}
		for i, a := range ct.Args {
			kind, name := placeholder(t, file, a)
			switch kind {
			case "inputValue":
				if _, ok := ins[name]; !ok {
					t.Errorf("%s: {inputValue: %s} names no input", file, name)
				}
				usedIn[name]++
			case "outputPath":
				if !outs[name] {
					t.Errorf("%s: {outputPath: %s} names no output", file, name)
				}
				usedOut[name]++
			}
			if kind != "" {
				// Every placeholder is the value of the flag before it.
				if i == 0 {
					t.Errorf("%s: %s %s is not a flag's value", file, kind, name)
				} else if _, prev := placeholder(t, file, ct.Args[i-1]); !strings.HasPrefix(prev, "--") {
					t.Errorf("%s: %s %s follows %q, not a flag", file, kind, name, prev)
				}
			}
		}
		for n := range ins {
			if usedIn[n] != 1 {
				t.Errorf("%s: input %s is used %d times, want once", file, n, usedIn[n])
			}
		}
		for n := range outs {
			if usedOut[n] != 1 {
				t.Errorf("%s: output %s is written %d times, want once", file, n, usedOut[n])
			}
		}
	}
}

// flagFor returns the flag whose value is the placeholder kind/name.
func flagFor(t *testing.T, file string, c *component, kind, name string) string {
	t.Helper()
	args := c.Implementation.Container.Args
	for i := 1; i < len(args); i++ {
		if k, n := placeholder(t, file, args[i]); k == kind && n == name {
			_, f := placeholder(t, file, args[i-1])
			return f
		}
	}
	return ""
}

func TestInputsAreTheJobDescription(t *testing.T) {
	cs := load(t)
	for _, file := range []string{"create-configmap", "bridge-job"} {
		c := cs[file]
		ins := map[string]input{}
		for _, in := range c.Inputs {
			ins[in.Name] = in
		}
		for _, f := range record.Fields {
			in, ok := ins[f.InputName()]
			switch {
			case !ok:
				t.Errorf("%s: no input %s (flag --%s, ConfigMap key %s)", file, f.InputName(), f.Flag, f.Key)
				continue
			case in.Default == nil || *in.Default != f.Default:
				t.Errorf("%s: input %s defaults to %v, the flag --%s to %q", file, f.InputName(), in.Default, f.Flag, f.Default)
			case in.Type != f.Type():
				t.Errorf("%s: input %s has type %s, want %s (record.Field.Type)", file, f.InputName(), in.Type, f.Type())
			}
			if got := flagFor(t, file, c, "inputValue", f.InputName()); got != "--"+f.Flag {
				t.Errorf("%s: input %s is passed as %q, want --%s", file, f.InputName(), got, f.Flag)
			}
		}
	}
	for _, file := range []string{"invoke", "bridge-job"} {
		c := cs[file]
		ins := map[string]input{}
		for _, in := range c.Inputs {
			ins[in.Name] = in
		}
		for _, i := range record.InvokeInputs {
			in, ok := ins[i.InputName()]
			switch {
			case !ok:
				t.Errorf("%s: no input %s (flag --%s)", file, i.InputName(), i.Flag)
				continue
			case in.Default == nil || *in.Default != i.Default || in.Type != i.Type || in.Description != i.Help:
				t.Errorf("%s: input %+v, want default %q, type %s and the flag's help as description", file, in, i.Default, i.Type)
			}
			if got := flagFor(t, file, c, "inputValue", i.InputName()); got != "--"+i.Flag {
				t.Errorf("%s: input %s is passed as %q, want --%s", file, i.InputName(), got, i.Flag)
			}
		}
		var got, want []string
		for _, o := range c.Outputs {
			got = append(got, o.Name)
		}
		for _, o := range runner.OutputFields {
			want = append(want, o.OutputName())
			if f := flagFor(t, file, c, "outputPath", o.OutputName()); f != "--"+o.Flag() {
				t.Errorf("%s: output %s is written by %q, want --%s", file, o.OutputName(), f, o.Flag())
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: outputs %v, want runner.OutputFields %v", file, got, want)
		}
	}
}

// ---- the contract: expand as KFP would, run the real binary ----

// expand renders the component's command line as KFP does: inputValue is
// the given value or the input's default (a required input must be given),
// outputPath a file under outDir.
func expand(t *testing.T, file string, c *component, given map[string]string, outDir string) []string {
	t.Helper()
	ins := map[string]input{}
	for _, in := range c.Inputs {
		ins[in.Name] = in
	}
	for k := range given {
		if _, ok := ins[k]; !ok {
			t.Fatalf("%s has no input %s", file, k)
		}
	}
	args := append([]string{}, c.Implementation.Container.Command[1:]...)
	for _, a := range c.Implementation.Container.Args {
		kind, name := placeholder(t, file, a)
		switch kind {
		case "":
			args = append(args, name)
		case "inputValue":
			v, ok := given[name]
			if !ok {
				if ins[name].Default == nil {
					t.Fatalf("%s: the required input %s is not given", file, name)
				}
				v = *ins[name].Default
			}
			args = append(args, v)
		case "outputPath":
			args = append(args, filepath.Join(outDir, name, "data"))
		}
	}
	return args
}

// run runs the binary with a file record in dir; --help only parses.
func run(t *testing.T, args []string, dir string, parseOnly bool) string {
	t.Helper()
	if parseOnly {
		args = append(args, "--help")
	} else {
		args = append(args, "--state-dir", filepath.Join(dir, "state"), "--store", "file")
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBECONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bridge-runner %q: %v\nstderr:\n%s\nstdout:\n%s", args, err, stderr.String(), stdout.String())
	}
	return stdout.String()
}

func readRecord(t *testing.T, dir, job string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state", job+"-bridge-cm.json"))
	if err != nil {
		return nil, err
	}
	var r struct{ Data map[string]string }
	return r.Data, json.Unmarshal(b, &r)
}

// TestContractDefaultsParse: every component, with only its required
// inputs given, is a command line the binary accepts.
func TestContractDefaultsParse(t *testing.T) {
	for file, c := range load(t) {
		out := run(t, expand(t, file, c, map[string]string{"job_name": "x"}, t.TempDir()), "", true)
		if !strings.Contains(out, "Usage:") {
			t.Errorf("%s: --help printed no usage", file)
		}
	}
	// The proof must be able to fail.
	cmd := exec.Command(binary(t), "invoke", "--no-such-flag", "x", "--help")
	if cmd.Run() == nil {
		t.Error("an unknown flag with --help is accepted: the parse check proves nothing")
	}
}

// TestContractCreateConfigMap: every job-description input reaches its own
// ConfigMap key.
func TestContractCreateConfigMap(t *testing.T) {
	c := load(t)["create-configmap"]
	given := map[string]string{
		"job_name": "every-key", "backend": "slurm", "resource_url": "https://example.org:1234", "resource_secret": "the-secret",
		"update_interval": "7", "job_properties": `{"p":1}`, "script": "/home/alice/job.sh",
		"script_location": "remote", "script_metadata": "in-bucket:meta.json", "job_parameters": "in-bucket:params.json",
		"script_extra_location": "s3", "additional_data": "in-bucket:in/object",
		"s3_endpoint": "127.0.0.1:9", "s3_secure": "false", "s3_secret": "the-s3-secret", "s3_region": "eu-1",
		"s3_upload_bucket": "out-bucket", "s3_upload_files": "a.out,b.out", "s3_create_bucket": "true",
		"s3_upload_layout": "ibm", "array": "0-9%2", "pending_limit": "30m", "replace_after": "0",
		"targets": `[{"name":"a"},{"name":"b","resourceURL":"https://b.example.org:1234","credentials":"b"}]`, "placement": "least-pending", "cluster": "hpc-1",
	}
	want := map[string]string{}
	for _, f := range record.Fields {
		v, ok := given[f.InputName()]
		if !ok || v == f.Default {
			t.Fatalf("give %s a value other than its default", f.InputName())
		}
		want[f.Key] = v
	}
	dir := t.TempDir()
	run(t, expand(t, "create-configmap", c, given, filepath.Join(dir, "out")), dir, false)
	got, err := readRecord(t, dir, "every-key")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("ConfigMap key %s is %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the record has %d keys, want %d: %v", len(got), len(want), got)
	}
}

func readOutputs(t *testing.T, c *component, outDir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, o := range c.Outputs {
		b, err := os.ReadFile(filepath.Join(outDir, o.Name, "data"))
		if err != nil {
			t.Fatalf("output %s: %v", o.Name, err)
		}
		m[o.Name] = string(b)
	}
	return m
}

// TestContractThreeSteps runs create-configmap, invoke and cleanup as a
// pipeline of the three components would, on the local backend.
func TestContractThreeSteps(t *testing.T) {
	cs := load(t)
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	job := map[string]string{"job_name": "three-steps"}
	spec := map[string]string{"job_name": "three-steps", "backend": "local", "script": "echo three steps", "update_interval": "0.2"}
	run(t, expand(t, "create-configmap", cs["create-configmap"], spec, out), dir, false)
	run(t, expand(t, "invoke", cs["invoke"], job, out), dir, false)
	if o := readOutputs(t, cs["invoke"], out); o["status"] != "DONE" || o["job_id"] == "" || o["start_time"] == "" {
		t.Errorf("invoke's outputs: %v", o)
	}
	run(t, expand(t, "cleanup", cs["cleanup"], job, out), dir, false)
	if _, err := readRecord(t, dir, "three-steps"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cleanup left the record: %v", err)
	}
}

// TestContractBridgeJob runs the all-in-one component and then cleanup, as
// the example pipelines do (cleanup in dsl.ExitHandler).
func TestContractBridgeJob(t *testing.T) {
	cs := load(t)
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	spec := map[string]string{"job_name": "all-in-one", "backend": "local", "script": "echo all in one", "update_interval": "0.2"}
	run(t, expand(t, "bridge-job", cs["bridge-job"], spec, out), dir, false)
	if o := readOutputs(t, cs["bridge-job"], out); o["status"] != "DONE" || o["job_id"] == "" || o["end_time"] == "" {
		t.Errorf("bridge-job's outputs: %v", o)
	}
	if r, err := readRecord(t, dir, "all-in-one"); err != nil || r["jobdata.jobScript"] != "echo all in one" {
		t.Errorf("the record: %v %v", r, err)
	}
	run(t, expand(t, "cleanup", cs["cleanup"], map[string]string{"job_name": "all-in-one"}, out), dir, false)
	if _, err := readRecord(t, dir, "all-in-one"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cleanup left the record: %v", err)
	}
}

// TestContractExitZero: with exit_zero as KFP renders a Boolean (true) a
// failed job ends the task with exit 0 (run fails the test otherwise) and its
// outcome in the outputs; Integer and Boolean job-description inputs are
// rendered as KFP renders them (5, false) and the binary accepts them.
func TestContractExitZero(t *testing.T) {
	cs := load(t)
	for _, file := range []string{"bridge-job", "invoke"} {
		dir, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
		job := "exit-zero-" + file
		spec := map[string]string{"job_name": job, "backend": "local", "script": "echo failing; exit 3", "update_interval": "1",
			"s3_secure": "false", "s3_create_bucket": "false"}
		if file == "invoke" {
			run(t, expand(t, "create-configmap", cs["create-configmap"], spec, out), dir, false)
			spec = map[string]string{"job_name": job}
		}
		spec["exit_zero"] = "true"
		run(t, expand(t, file, cs[file], spec, out), dir, false)
		if o := readOutputs(t, cs[file], out); o["status"] != "FAILED" || o["job_exit_code"] != "3" {
			t.Errorf("%s: outputs %v, want status FAILED and job_exit_code 3", file, o)
		}
	}
	// The proof must be able to fail: without exit_zero the task fails.
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	args := expand(t, "bridge-job", cs["bridge-job"], map[string]string{"job_name": "no-exit-zero", "backend": "local", "script": "exit 3", "update_interval": "1"}, out)
	cmd := exec.Command(binary(t), append(args, "--state-dir", filepath.Join(dir, "state"), "--store", "file")...)
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBECONFIG=")
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("bridge-job without exit_zero on a failing job: %v, want exit 1", err)
	}
}

// binary is bridge-runner built from this tree; pinnedImage is the image the
// project pins (internal/testbin).
func binary(t *testing.T) string      { return testbin.Path(t, "..") }
func pinnedImage(t *testing.T) string { return testbin.PinnedImage(t, "..") }

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
