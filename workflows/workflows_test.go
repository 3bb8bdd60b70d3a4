// Package workflows_test proves that the Argo WorkflowTemplates in
// workflows/templates and the example Workflows in examples/*/workflow.yaml
// are what Argo and the binary accept:
//
//   - strict decoding into Argo's own Go types (an unknown or misspelt field
//     is an error), then Argo's own validator (workflow/validate, lint mode);
//   - the job-description parameters are exactly record.Fields, with the CLI's
//     defaults, and the outputs are exactly runner.OutputFields;
//   - the contract: every step is expanded with Argo's own argument processing
//     (common.ProcessArgs: defaults, required inputs, {{...}} and {{=...}}
//     expressions) walking the DAGs, exit hooks and onExit as the controller
//     would, and the expanded command line is run by the real binary, built
//     from this tree: for real with the local backend (create-configmap writes
//     every ConfigMap key, invoke runs the job and writes every output file,
//     cleanup deletes the record), and for the examples' remote backends up
//     to what needs no remote system;
//   - a real kube-apiserver with Argo's full CRDs accepts every template, the
//     RBAC and every example Workflow (server-side dry run, strict field
//     validation).
package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	fakewf "github.com/argoproj/argo-workflows/v3/pkg/client/clientset/versioned/fake"
	"github.com/argoproj/argo-workflows/v3/workflow/common"
	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/internal/testbin"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

const (
	outputsDir   = "/tmp/outputs"
	retryExpr    = `asInt(lastRetry.exitCode) == 75 || asInt(lastRetry.exitCode) == 5 || lastRetry.status == "Error"`
	library      = "bridge-runner" // the WorkflowTemplate with the reusable steps
	serviceAcct  = "bridge-runner"
	credsMount   = "/credentials"
	s3CredsMount = "/s3credentials"
)

// strict decodes one document, rejecting unknown and duplicate fields.
func strict(t *testing.T, path string, doc []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s: strict decoding: %v", path, err)
	}
}

func templateFiles(t *testing.T) []string {
	files, err := filepath.Glob("templates/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows/templates/*.yaml: %v", err)
	}
	return files
}

// loadTemplates returns every WorkflowTemplate by name.
func loadTemplates(t *testing.T) map[string]*wfv1.WorkflowTemplate {
	t.Helper()
	out := map[string]*wfv1.WorkflowTemplate{}
	for _, f := range templateFiles(t) {
		for _, d := range testutil.YAMLDocs(t, f) {
			var wt wfv1.WorkflowTemplate
			strict(t, f, d, &wt)
			if wt.Kind != "WorkflowTemplate" || wt.APIVersion != "argoproj.io/v1alpha1" {
				t.Fatalf("%s: %s %s, want argoproj.io/v1alpha1 WorkflowTemplate", f, wt.APIVersion, wt.Kind)
			}
			if out[wt.Name] != nil {
				t.Fatalf("%s: a second WorkflowTemplate %q", f, wt.Name)
			}
			out[wt.Name] = &wt
		}
	}
	for _, want := range []string{library, "bridge-job"} {
		if out[want] == nil {
			t.Fatalf("no WorkflowTemplate %q in workflows/templates", want)
		}
	}
	return out
}

// loadExamples returns every example Workflow by backend directory.
func loadExamples(t *testing.T) map[string]*wfv1.Workflow {
	t.Helper()
	files, err := filepath.Glob("../examples/*/workflow.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/*/workflow.yaml: %v", err)
	}
	out := map[string]*wfv1.Workflow{}
	for _, f := range files {
		d := testutil.YAMLDocs(t, f)
		if len(d) != 1 {
			t.Fatalf("%s: %d documents, want one Workflow", f, len(d))
		}
		var wf wfv1.Workflow
		strict(t, f, d[0], &wf)
		if wf.Kind != "Workflow" {
			t.Fatalf("%s: kind %s, want Workflow", f, wf.Kind)
		}
		out[filepath.Base(filepath.Dir(f))] = &wf
	}
	return out
}

func tmpl(t *testing.T, wt *wfv1.WorkflowTemplate, name string) *wfv1.Template {
	t.Helper()
	for i := range wt.Spec.Templates {
		if wt.Spec.Templates[i].Name == name {
			return &wt.Spec.Templates[i]
		}
	}
	t.Fatalf("WorkflowTemplate %s has no template %q", wt.Name, name)
	return nil
}

// getters returns Argo's template getters over a fake clientset that holds
// all our WorkflowTemplates, as the controller would find them.
func getters(t *testing.T, wts map[string]*wfv1.WorkflowTemplate) (templateresolution.WorkflowTemplateNamespacedGetter, templateresolution.ClusterWorkflowTemplateGetter) {
	t.Helper()
	cs := fakewf.NewSimpleClientset()
	for _, wt := range wts {
		c := wt.DeepCopy()
		c.Namespace = "default"
		if _, err := cs.ArgoprojV1alpha1().WorkflowTemplates("default").Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return templateresolution.WrapWorkflowTemplateInterface(cs.ArgoprojV1alpha1().WorkflowTemplates("default")),
		templateresolution.WrapClusterWorkflowTemplateInterface(cs.ArgoprojV1alpha1().ClusterWorkflowTemplates())
}

func TestArgoValidatesTemplates(t *testing.T) {
	wts := loadTemplates(t)
	wg, cg := getters(t, wts)
	for name, wt := range wts {
		if err := validate.ValidateWorkflowTemplate(wg, cg, wt, nil, validate.ValidateOpts{Lint: true}); err != nil {
			t.Errorf("Argo's validator refuses WorkflowTemplate %s: %v", name, err)
		}
	}
}

func TestArgoValidatesExamples(t *testing.T) {
	wg, cg := getters(t, loadTemplates(t))
	for backend, wf := range loadExamples(t) {
		wf.Namespace = "default"
		if err := validate.ValidateWorkflow(wg, cg, wf, nil, validate.ValidateOpts{Lint: true}); err != nil {
			t.Errorf("Argo's validator refuses examples/%s/workflow.yaml: %v", backend, err)
		}
		if !usesTemplateRef(wf) {
			t.Errorf("examples/%s/workflow.yaml does not use templateRef to %s", backend, library)
		}
	}
}

func usesTemplateRef(wf *wfv1.Workflow) bool {
	for _, tp := range wf.Spec.Templates {
		if tp.DAG != nil {
			for _, task := range tp.DAG.Tasks {
				if task.TemplateRef != nil && task.TemplateRef.Name == library {
					return true
				}
			}
		}
	}
	return false
}

// TestValidatorCatchesMistakes guards the proof itself: the validator and
// the strict decoding must refuse a broken template.
func TestValidatorCatchesMistakes(t *testing.T) {
	wts := loadTemplates(t)
	wg, cg := getters(t, wts)
	bad := wts[library].DeepCopy()
	tp := &bad.Spec.Templates[0]
	tp.Container.Args = append(tp.Container.Args, "{{inputs.parameters.no_such_input}}")
	if err := validate.ValidateWorkflowTemplate(wg, cg, bad, nil, validate.ValidateOpts{Lint: true}); err == nil {
		t.Error("the validator accepts a reference to an undeclared input")
	}
	var wt wfv1.WorkflowTemplate
	if err := yaml.UnmarshalStrict([]byte("apiVersion: argoproj.io/v1alpha1\nkind: WorkflowTemplate\nmetadata: {name: x}\nspec:\n  templates:\n    - name: a\n      containr: {image: x}\n"), &wt); err == nil {
		t.Error("strict decoding accepts a misspelt field")
	}
}

// params returns a template's input parameters by name.
func params(tp *wfv1.Template) map[string]wfv1.Parameter {
	m := map[string]wfv1.Parameter{}
	for _, p := range tp.Inputs.Parameters {
		m[p.Name] = p
	}
	return m
}

func TestParametersAreTheJobDescription(t *testing.T) {
	wts := loadTemplates(t)
	lib := wts[library]
	// Every job-description field is a parameter with the CLI's default.
	for _, name := range []string{"create-configmap", "bridge-job"} {
		ps := params(tmpl(t, lib, name))
		for _, f := range record.Fields {
			p, ok := ps[f.InputName()]
			switch {
			case !ok:
				t.Errorf("%s/%s has no parameter %s (flag --%s, ConfigMap key %s)", library, name, f.InputName(), f.Flag, f.Key)
			case p.Default == nil:
				t.Errorf("%s/%s parameter %s has no default; want %q (the flag's)", library, name, f.InputName(), f.Default)
			case p.Default.String() != f.Default:
				t.Errorf("%s/%s parameter %s defaults to %q, the flag --%s to %q", library, name, f.InputName(), p.Default.String(), f.Flag, f.Default)
			}
		}
		if _, ok := ps["job_name"]; !ok {
			t.Errorf("%s/%s has no parameter job_name", library, name)
		}
	}
	// The workflow-level bridge-job: the same, as workflow arguments.
	args := map[string]wfv1.Parameter{}
	for _, p := range wts["bridge-job"].Spec.Arguments.Parameters {
		args[p.Name] = p
	}
	for _, f := range record.Fields {
		p, ok := args[f.InputName()]
		switch {
		case !ok:
			t.Errorf("bridge-job has no argument %s", f.InputName())
		case p.Value == nil || p.Value.String() != f.Default:
			t.Errorf("bridge-job argument %s is %v, want the flag's default %q", f.InputName(), p.Value, f.Default)
		}
	}
	// The invoke settings (record.InvokeInputs): parameters of invoke and
	// bridge-job, and arguments of the WorkflowTemplate bridge-job, with the
	// flag's default and help; invoke passes each to its flag.
	for _, in := range record.InvokeInputs {
		for _, name := range []string{"invoke", "bridge-job"} {
			p, ok := params(tmpl(t, lib, name))[in.InputName()]
			if !ok || p.Default == nil || p.Default.String() != in.Default || p.Description == nil || p.Description.String() != in.Help {
				t.Errorf("%s/%s parameter %s is %+v, want default %q and the flag's help as description", library, name, in.InputName(), p, in.Default)
			}
		}
		if p, ok := args[in.InputName()]; !ok || p.Value == nil || p.Value.String() != in.Default {
			t.Errorf("bridge-job argument %s is %+v, want the flag's default %q", in.InputName(), p, in.Default)
		}
		a := tmpl(t, lib, "invoke").Container.Args
		if i := slices.Index(a, "--"+in.Flag); i < 0 || i+1 >= len(a) || a[i+1] != "{{inputs.parameters."+in.InputName()+"}}" {
			t.Errorf("invoke does not pass --%s {{inputs.parameters.%s}}", in.Flag, in.InputName())
		}
	}
	// invoke's outputs are exactly the step outputs, read from the files
	// the binary writes, with a default for when it could not.
	inv := tmpl(t, lib, "invoke")
	var got []string
	for _, p := range inv.Outputs.Parameters {
		got = append(got, p.Name)
		if p.ValueFrom == nil || p.ValueFrom.Path != outputsDir+"/"+p.Name || p.ValueFrom.Default == nil {
			t.Errorf("invoke output %s: want valueFrom {path: %s/%s, default: ...}, got %+v", p.Name, outputsDir, p.Name, p.ValueFrom)
		}
	}
	var want []string
	for _, o := range runner.OutputFields {
		want = append(want, o.OutputName())
		if i := slices.Index(inv.Container.Args, "--"+o.Flag()); i < 0 || i+1 >= len(inv.Container.Args) || inv.Container.Args[i+1] != outputsDir+"/"+o.OutputName() {
			t.Errorf("invoke does not pass --%s %s/%s", o.Flag(), outputsDir, o.OutputName())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("invoke outputs are %v, want runner.OutputFields %v", got, want)
	}
	bj := tmpl(t, lib, "bridge-job")
	got = nil
	for _, p := range bj.Outputs.Parameters {
		got = append(got, p.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("bridge-job outputs are %v, want %v", got, want)
	}
}

// TestStepConventions checks what Argo does not: every step pod runs our
// image with an explicit command as the bridge-runner ServiceAccount, retries
// only exit 75, mounts its credentials from Secrets named by parameters, and
// invoke has a grace period and metrics.
func TestStepConventions(t *testing.T) {
	lib := loadTemplates(t)[library]
	for _, tp := range lib.Spec.Templates {
		if tp.Container == nil {
			continue
		}
		c := tp.Container
		if c.Image != pinnedImage(t) {
			t.Errorf("%s: image %q, want %q (set by make set-image)", tp.Name, c.Image, pinnedImage(t))
		}
		if !slices.Equal(c.Command, []string{"/bridge-runner"}) || len(c.Args) == 0 || c.Args[0] != tp.Name {
			t.Errorf("%s: command %v args %v, want [/bridge-runner] and the subcommand %s first", tp.Name, c.Command, c.Args, tp.Name)
		}
		if tp.ServiceAccountName != serviceAcct {
			t.Errorf("%s: serviceAccountName %q, want %q", tp.Name, tp.ServiceAccountName, serviceAcct)
		}
		r := tp.RetryStrategy
		if r == nil || r.Expression != retryExpr || r.Limit == nil || r.Limit.String() != "3" || r.RetryPolicy != wfv1.RetryPolicyAlways {
			t.Errorf("%s: retryStrategy %+v, want limit 3, retryPolicy Always, expression %q", tp.Name, r, retryExpr)
		}
		vols := map[string]string{} // volume name -> secretName
		for _, v := range tp.Volumes {
			if v.Secret != nil {
				vols[v.Name] = v.Secret.SecretName
				if !strings.HasPrefix(v.Secret.SecretName, "{{inputs.parameters.") {
					t.Errorf("%s: volume %s mounts the fixed Secret %q; name it by a parameter", tp.Name, v.Name, v.Secret.SecretName)
				}
			}
		}
		for flag, mount := range map[string]string{"--credentials-dir": credsMount, "--s3-credentials-dir": s3CredsMount} {
			i := slices.Index(c.Args, flag)
			if i < 0 {
				continue
			}
			if c.Args[i+1] != mount {
				t.Errorf("%s: %s %s, want %s", tp.Name, flag, c.Args[i+1], mount)
			}
			found := false
			for _, m := range c.VolumeMounts {
				if m.MountPath == mount && vols[m.Name] != "" {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: passes %s %s but mounts no Secret there", tp.Name, flag, mount)
			}
		}
	}
	inv := tmpl(t, lib, "invoke")
	if !strings.Contains(inv.PodSpecPatch, "terminationGracePeriodSeconds") || !slices.Contains(inv.Container.Args, "--grace-period") {
		t.Errorf("invoke: want a terminationGracePeriodSeconds podSpecPatch and --grace-period, got %q", inv.PodSpecPatch)
	}
	var counter, gauge bool
	if inv.Metrics != nil {
		for _, m := range inv.Metrics.Prometheus {
			counter = counter || (m.Counter != nil && slices.ContainsFunc(m.Labels, func(l *wfv1.MetricLabel) bool { return l.Value == "{{outputs.parameters.status}}" }))
			gauge = gauge || (m.Gauge != nil && m.Gauge.Value == "{{duration}}")
		}
	}
	if !counter || !gauge {
		t.Errorf("invoke: want a counter labelled by the final status and a duration gauge (counter %v, gauge %v)", counter, gauge)
	}
	bj := tmpl(t, lib, "bridge-job")
	var hooked bool
	for _, task := range bj.DAG.Tasks {
		if h, ok := task.Hooks[wfv1.ExitLifecycleEvent]; ok && task.Template == "invoke" && h.Template == "cleanup" {
			hooked = true
		}
	}
	if !hooked {
		t.Error("bridge-job: the invoke task has no exit hook running cleanup")
	}
	if wf := loadTemplates(t)["bridge-job"]; wf.Spec.OnExit == "" {
		t.Error("WorkflowTemplate bridge-job has no onExit")
	}
}

// ---- the contract: Argo's own argument processing, the real binary ----

// mode says how a step's expanded command line is run.
type mode int

const (
	real  mode = iota // run it (local backend, file store)
	parse             // only parse it: <args> --help fails on any unknown flag or bad value
)

// sim walks templates as Argo's controller does and runs every container
// step with the real binary.
type sim struct {
	t        *testing.T
	bin, dir string
	wts      map[string]*wfv1.WorkflowTemplate
	globals  common.Parameters
	modeFor  func(step string) mode
	ran      []string            // the steps run, in order
	records  []map[string]string // the record's data after each create-configmap
	outputs  map[string]string   // invoke's outputs, from the files it wrote
	invoked  []string            // the job names invoke ran with
}

func newSim(t *testing.T, globals map[string]string, modeFor func(string) mode) *sim {
	g := common.Parameters{"workflow.name": "wf-contract", "workflow.namespace": "default", "workflow.uid": "0000"}
	for k, v := range globals {
		g[k] = v
	}
	return &sim{t: t, bin: binary(t), dir: t.TempDir(), wts: loadTemplates(t), globals: g, modeFor: modeFor}
}

// run resolves the template name in scope (a WorkflowTemplate) with args,
// as the controller would, and executes it.
func (s *sim) run(scope *wfv1.WorkflowTemplate, name string, args wfv1.Arguments, where string) {
	s.t.Helper()
	tp := tmpl(s.t, scope, name)
	resolved, err := common.ProcessArgs(tp, &args, s.globals, common.Parameters{}, false, "default", nil)
	if err != nil {
		s.t.Fatalf("%s: Argo cannot process the arguments of %s/%s: %v", where, scope.Name, name, err)
	}
	switch {
	case resolved.Container != nil:
		s.exec(resolved, where+" > "+name)
	case resolved.DAG != nil:
		done := map[string]bool{}
		outs := map[string]map[string]string{} // task -> its outputs (those of the invoke it ran)
		for _, task := range resolved.DAG.Tasks {
			for _, dep := range strings.Fields(strings.NewReplacer("&&", " ", "||", " ", "(", " ", ")", " ").Replace(task.Depends)) {
				if !done[strings.Split(dep, ".")[0]] {
					s.t.Fatalf("%s: task %s depends on %s, which does not come before it", where, task.Name, dep)
				}
			}
			done[task.Name] = true
			items := []string{""}
			if len(task.WithItems) > 0 {
				items = nil
				for _, it := range task.WithItems {
					items = append(items, it.GetStrVal())
				}
			}
			for _, item := range items {
				at := where + " > " + name + "." + task.Name
				if item != "" {
					at += "(" + item + ")"
				}
				if task.When != "" && !s.when(taskRefs(task.When, outs, item), at) {
					continue
				}
				args := task.Arguments.DeepCopy()
				for i, p := range args.Parameters {
					if p.Value != nil {
						args.Parameters[i].Value = wfv1.AnyStringPtr(taskRefs(p.Value.String(), outs, item))
					}
				}
				s.outputs = nil
				s.call(scope, task.Template, task.TemplateRef, *args, at)
				outs[task.Name] = s.outputs
				if h, ok := task.Hooks[wfv1.ExitLifecycleEvent]; ok {
					s.call(scope, h.Template, h.TemplateRef, h.Arguments, at+".hooks.exit")
				}
			}
		}
	case resolved.Steps != nil:
		for _, group := range resolved.Steps {
			for _, step := range group.Steps {
				s.call(scope, step.Template, step.TemplateRef, step.Arguments, where+" > "+name+"."+step.Name)
			}
		}
	default:
		s.t.Fatalf("%s: template %s is neither a container, a DAG nor steps", where, name)
	}
}

// taskRefs resolves what Argo resolves when a DAG task runs: {{item}} and
// {{tasks.T.outputs.parameters.P}} (every task here is a bridge job, whose
// outputs are its invoke's).
func taskRefs(v string, outs map[string]map[string]string, item string) string {
	v = strings.ReplaceAll(v, "{{item}}", item)
	for task, o := range outs {
		for k, val := range o {
			v = strings.ReplaceAll(v, "{{tasks."+task+".outputs.parameters."+k+"}}", val)
		}
	}
	return v
}

// when evaluates a resolved when: condition of the form "a == b" or
// "a != b", the only forms the shipped workflows use.
func (s *sim) when(cond, where string) bool {
	s.t.Helper()
	for _, op := range []string{"==", "!="} {
		if a, b, ok := strings.Cut(cond, " "+op+" "); ok {
			if strings.Contains(cond, "{{") {
				s.t.Fatalf("%s: when %q is not resolved", where, cond)
			}
			return (strings.TrimSpace(a) == strings.TrimSpace(b)) == (op == "==")
		}
	}
	s.t.Fatalf("%s: when %q is not of the form a == b or a != b", where, cond)
	return false
}

func (s *sim) call(scope *wfv1.WorkflowTemplate, name string, ref *wfv1.TemplateRef, args wfv1.Arguments, where string) {
	s.t.Helper()
	if ref != nil {
		if ref.ClusterScope {
			s.t.Fatalf("%s: clusterScope templateRef to %s, but the templates are namespaced", where, ref.Name)
		}
		wt := s.wts[ref.Name]
		if wt == nil {
			s.t.Fatalf("%s: templateRef to an unknown WorkflowTemplate %q", where, ref.Name)
		}
		scope, name = wt, ref.Template
	}
	s.run(scope, name, args, where)
}

// exec runs one container step's expanded command line.
func (s *sim) exec(tp *wfv1.Template, where string) {
	s.t.Helper()
	c := tp.Container
	args := append(append([]string{}, c.Command[1:]...), c.Args...)
	for _, a := range args {
		if strings.Contains(a, "{{") {
			s.t.Fatalf("%s: argument %q is not resolved", where, a)
		}
	}
	out := filepath.Join(s.dir, "outputs")
	for i, a := range args {
		if strings.HasPrefix(a, outputsDir+"/") {
			args[i] = out + strings.TrimPrefix(a, outputsDir)
		}
	}
	step := args[0]
	s.ran = append(s.ran, step)
	state := filepath.Join(s.dir, "state")
	m := s.modeFor(step)
	if m == parse {
		args = append(args, "--help")
	} else {
		args = append(args, "--state-dir", state, "--store", "file")
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBECONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		s.t.Fatalf("%s: bridge-runner %q: %v\nstderr:\n%s\nstdout:\n%s", where, args, err, stderr.String(), stdout.String())
	}
	if m == parse {
		if !strings.Contains(stdout.String(), "Usage:") {
			s.t.Fatalf("%s: bridge-runner %q --help printed no usage", where, args)
		}
		if step == "invoke" {
			s.outputs = parsedOutputs
		}
		return
	}
	switch step {
	case "create-configmap":
		s.records = append(s.records, readRecord(s.t, state, flagValue(args, "--job-name")))
	case "invoke":
		s.invoked = append(s.invoked, flagValue(args, "--job-name"))
		s.outputs = map[string]string{}
		for _, p := range tp.Outputs.Parameters {
			b, err := os.ReadFile(out + strings.TrimPrefix(p.ValueFrom.Path, outputsDir))
			if err != nil {
				s.t.Fatalf("%s: output %s: %v", where, p.Name, err)
			}
			s.outputs[p.Name] = string(b)
		}
	case "cleanup":
		if _, err := os.Stat(filepath.Join(state, flagValue(args, "--job-name")+"-bridge-cm.json")); !errors.Is(err, os.ErrNotExist) {
			s.t.Fatalf("%s: cleanup left the record (%v)", where, err)
		}
	}
}

func flagValue(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

func readRecord(t *testing.T, dir, job string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, job+"-bridge-cm.json"))
	if err != nil {
		t.Fatalf("the record of %s: %v", job, err)
	}
	var r struct{ Data map[string]string }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Data
}

func argsOf(kv map[string]string) wfv1.Arguments {
	var a wfv1.Arguments
	for k, v := range kv {
		a.Parameters = append(a.Parameters, wfv1.Parameter{Name: k, Value: wfv1.AnyStringPtr(v)})
	}
	slices.SortFunc(a.Parameters, func(x, y wfv1.Parameter) int { return strings.Compare(x.Name, y.Name) })
	return a
}

// everyField gives every job-description field a distinct valid value
// (a valid description: create-configmap checks it, and needs no server).
func everyField() map[string]string {
	v := map[string]string{
		"backend": "slurm", "resource_url": "https://example.org:1234", "resource_secret": "the-secret",
		"update_interval": "7", "job_properties": `{"p":1}`, "script": "/home/alice/job.sh",
		"script_location": "remote", "script_metadata": "in-bucket:meta.json", "job_parameters": "in-bucket:params.json",
		"script_extra_location": "s3", "additional_data": "in-bucket:in/object",
		"s3_endpoint": "127.0.0.1:9", "s3_secure": "false", "s3_secret": "the-s3-secret", "s3_region": "eu-1",
		"s3_upload_bucket": "out-bucket", "s3_upload_files": "a.out,b.out", "s3_create_bucket": "true",
		"s3_upload_layout": "ibm", "array": "0-9%2", "pending_limit": "30m", "replace_after": "0",
		"targets": `[{"name":"a"},{"name":"b","resourceURL":"https://b.example.org:1234","credentials":"b"}]`, "placement": "least-pending", "cluster": "hpc-1",
	}
	return v
}

// TestContractCreateConfigMapWritesEveryKey: each job-description parameter
// of the create-configmap template reaches its own ConfigMap key.
func TestContractCreateConfigMapWritesEveryKey(t *testing.T) {
	s := newSim(t, nil, func(string) mode { return real })
	in := everyField()
	if len(in) != len(record.Fields) {
		t.Fatalf("everyField has %d values for %d fields: update it", len(in), len(record.Fields))
	}
	want := map[string]string{}
	for _, f := range record.Fields {
		v, ok := in[f.InputName()]
		if !ok {
			t.Fatalf("everyField has no value for %s", f.InputName())
		}
		if v == f.Default {
			t.Fatalf("everyField's %s is the default; give a distinct value", f.InputName())
		}
		want[f.Key] = v
	}
	in["job_name"] = "every-key"
	s.run(s.wts[library], "create-configmap", argsOf(in), "create-configmap")
	got := s.records[0]
	for k, v := range want {
		if got[k] != v {
			t.Errorf("ConfigMap key %s is %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected ConfigMap key %s=%q", k, got[k])
		}
	}
}

func localJob() map[string]string {
	return map[string]string{"backend": "local", "script": "echo contract; echo done", "update_interval": "0.2"}
}

func checkLocalRun(t *testing.T, s *sim, job string) {
	t.Helper()
	if want := []string{"create-configmap", "invoke", "cleanup"}; !slices.Equal(s.ran, want) {
		t.Fatalf("ran %v, want %v", s.ran, want)
	}
	if r := s.records[0]; r["backend"] != "local" || r["jobdata.jobScript"] != localJob()["script"] || r["updateInterval"] != "0.2" {
		t.Errorf("the record is %v", r)
	}
	if s.outputs["status"] != "DONE" || s.outputs["job_id"] == "" || s.outputs["end_time"] == "" {
		t.Errorf("invoke's outputs: %v", s.outputs)
	}
}

// TestContractBridgeJobDAG runs bridge-runner/bridge-job (the templateRef
// users call): create-configmap, invoke, and the exit hook cleanup.
func TestContractBridgeJobDAG(t *testing.T) {
	s := newSim(t, nil, func(string) mode { return real })
	in := localJob()
	in["job_name"] = "dag-job"
	in["credentials_secret"] = "creds"
	s.run(s.wts[library], "bridge-job", argsOf(in), "bridge-job")
	checkLocalRun(t, s, "dag-job")
}

// TestContractExitZero: bridge-job with exit_zero=true on a job that fails
// ends every step with exit 0 (the sim fails the test otherwise) and carries
// the outcome in invoke's outputs, so a downstream task can branch on it.
func TestContractExitZero(t *testing.T) {
	s := newSim(t, nil, func(string) mode { return real })
	in := localJob()
	in["script"] = "echo failing; exit 3"
	in["job_name"] = "exit-zero"
	in["credentials_secret"] = "creds"
	in["exit_zero"] = "true"
	s.run(s.wts[library], "bridge-job", argsOf(in), "bridge-job")
	if s.outputs["status"] != "FAILED" || s.outputs["job_exit_code"] != "3" {
		t.Errorf("invoke's outputs: %v, want status FAILED, job_exit_code 3", s.outputs)
	}
}

// TestContractBridgeJobWorkflow runs the WorkflowTemplate bridge-job as a
// parsedOutputs are what an invoke that was only parsed (its backend is
// not here) is taken to have written: a FAILED array with failed tasks, so
// that the examples' when: branches on a job's outcome are walked too.
var parsedOutputs = map[string]string{"job_id": "1", "status": "FAILED", "message": "array 1: 100 tasks: DONE=96 FAILED=4",
	"job_exit_code": "3", "failure_category": "job", "array_counts": "DONE=96 FAILED=4", "array_failed": "3,17-19", "target": "hpc-b"}

// Workflow would: its entrypoint with the workflow's parameters, then onExit.
func TestContractBridgeJobWorkflow(t *testing.T) {
	wt := loadTemplates(t)["bridge-job"]
	globals := map[string]string{}
	given := localJob()
	given["credentials_secret"] = "creds"
	for _, p := range wt.Spec.Arguments.Parameters {
		if v, ok := given[p.Name]; ok {
			globals["workflow.parameters."+p.Name] = v
		} else if p.Value != nil {
			globals["workflow.parameters."+p.Name] = p.Value.String()
		} else {
			t.Fatalf("bridge-job argument %s has no value and the test gives none", p.Name)
		}
	}
	s := newSim(t, globals, func(string) mode { return real })
	s.run(wt, wt.Spec.Entrypoint, wfv1.Arguments{}, "entrypoint")
	s.run(wt, wt.Spec.OnExit, wfv1.Arguments{}, "onExit")
	checkLocalRun(t, s, "wf-contract")
}

// TestContractExamples runs each example Workflow through the templates:
// create-configmap for real (the example's job description must be valid),
// invoke and cleanup parsed only, since they need the remote system. The
// examples whose jobs run on the local backend (local, branching, loop) run
// all three for real, with their when: branches and withItems loops: the
// branching example's failing job leads to on-failure only, the loop makes
// one job per item.
func TestContractExamples(t *testing.T) {
	backendsOut, err := exec.Command(binary(t), "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Backends []string }
	if err := json.Unmarshal(backendsOut, &v); err != nil {
		t.Fatal(err)
	}
	// How many bridge jobs (create-configmap, invoke, cleanup) each runs.
	jobs := map[string]int{"branching": 2, "loop": 4, "array": 2}
	for dir, wf := range loadExamples(t) {
		t.Run(dir, func(t *testing.T) {
			backend, globals := dir, map[string]string{}
			for _, p := range wf.Spec.Arguments.Parameters {
				globals["workflow.parameters."+p.Name] = p.Value.String()
				if p.Name == "backend" {
					backend = p.Value.String()
				}
			}
			built := slices.Contains(v.Backends, backend)
			s := newSim(t, globals, func(step string) mode {
				if backend == "local" || (step == "create-configmap" && built) {
					return real
				}
				return parse
			})
			if !built {
				t.Logf("backend %s is not built into bridge-runner yet (it has %v): its job description is only parsed", backend, v.Backends)
			}
			holder := &wfv1.WorkflowTemplate{ObjectMeta: wf.ObjectMeta, Spec: wf.Spec}
			holder.Name = "example-" + dir
			s.run(holder, wf.Spec.Entrypoint, wf.Spec.Arguments, "examples/"+dir)
			n := max(jobs[dir], 1)
			var want []string
			for range n {
				want = append(want, "create-configmap", "invoke", "cleanup")
			}
			if !slices.Equal(s.ran, want) {
				t.Fatalf("ran %v, want %v", s.ran, want)
			}
			if built && s.records[0]["backend"] != backend {
				t.Errorf("the record's backend is %q", s.records[0]["backend"])
			}
			switch dir {
			case "loop":
				if want := []string{"wf-contract-a", "wf-contract-b", "wf-contract-c", "wf-contract-d"}; !slices.Equal(s.invoked, want) {
					t.Errorf("the loop invoked %v, want one job per item %v", s.invoked, want)
				}
			case "branching":
				if r := s.records[1]; !strings.Contains(r["jobdata.jobScript"], "ended") || !strings.Contains(r["jobproperties"], `"JOB_STATUS": "FAILED"`) {
					t.Errorf("the branch after the failed job is not on-failure with its status: %v", r)
				}
			}
		})
	}
}

// TestContractCatchesUnknownFlags guards the proof: a flag the binary does
// not have must fail the run.
func TestContractCatchesUnknownFlags(t *testing.T) {
	for _, extra := range [][]string{{"--no-such-flag", "x"}, {"--grace-period", "soon"}} {
		args := append([]string{"invoke", "--job-name", "x"}, extra...)
		if err := exec.Command(binary(t), append(args, "--help")...).Run(); err == nil {
			t.Errorf("bridge-runner %q --help succeeds", args)
		}
	}
}

// ---- a real kube-apiserver with Argo's CRDs ----

// dryRun creates obj in ns with dryRun=All and strict field validation.
func dryRun(ctx context.Context, dc dynamic.Interface, ns string, doc []byte) (string, error) {
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
		return "", err
	}
	gvk := obj.GroupVersionKind()
	plural := strings.ToLower(gvk.Kind) + "s"
	if strings.HasSuffix(gvk.Kind, "y") {
		plural = strings.ToLower(strings.TrimSuffix(gvk.Kind, "y")) + "ies"
	}
	if gvk.Kind == "ServiceAccount" {
		plural = "serviceaccounts"
	}
	gvr := gvk.GroupVersion().WithResource(plural)
	desc := gvk.Kind + " " + obj.GetName() + obj.GetGenerateName()
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
	var err error
	if gvk.Kind == "ClusterWorkflowTemplate" {
		_, err = dc.Resource(gvr).Create(ctx, &obj, opts)
	} else {
		_, err = dc.Resource(gvr).Namespace(ns).Create(ctx, &obj, opts)
	}
	return desc, err
}

// kustomizeResources lists the documents the kustomization in dir installs
// (resources only: files and nested kustomization directories).
func kustomizeResources(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	var k struct {
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if st, err := os.Stat(p); err != nil {
			t.Fatalf("%s/kustomization.yaml: resource %s: %v", dir, r, err)
		} else if st.IsDir() {
			for name, d := range kustomizeResources(t, p) {
				out[name] = d
			}
			continue
		}
		for i, d := range testutil.YAMLDocs(t, p) {
			out[fmt.Sprintf("%s#%d", p, i)] = d
		}
	}
	return out
}

func TestKustomization(t *testing.T) {
	var k struct {
		Resources      []string `json:"resources"`
		Configurations []string `json:"configurations"`
		Images         []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	strictJSON := func(b []byte, into any) {
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Fatal(err)
		}
	}
	var raw map[string]any
	strictJSON(b, &raw)
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	img := pinnedImage(t)
	name, tag := img[:strings.LastIndex(img, ":")], img[strings.LastIndex(img, ":")+1:]
	if len(k.Images) != 1 || k.Images[0].Name != name || k.Images[0].NewName != name || k.Images[0].NewTag != tag {
		t.Errorf("kustomization images %+v, want one entry {name: %s, newName: %s, newTag: %s}", k.Images, name, name, tag)
	}
	// The images transformer must know where Argo keeps container images.
	var cfg struct {
		Images []struct {
			Path string `json:"path"`
			Kind string `json:"kind"`
		} `json:"images"`
	}
	if len(k.Configurations) != 1 {
		t.Fatalf("kustomization configurations %v, want one", k.Configurations)
	}
	cb, err := os.ReadFile(k.Configurations[0])
	if err != nil {
		t.Fatal(err)
	}
	strictJSON(cb, &cfg)
	for _, want := range []string{"WorkflowTemplate", "ClusterWorkflowTemplate"} {
		if !slices.ContainsFunc(cfg.Images, func(i struct {
			Path string `json:"path"`
			Kind string `json:"kind"`
		}) bool {
			return i.Kind == want && i.Path == "spec/templates/container/image"
		}) {
			t.Errorf("%s does not point the images transformer at %s spec/templates/container/image", k.Configurations[0], want)
		}
	}
	got := kustomizeResources(t, ".")
	kinds := map[string]bool{}
	for _, d := range got {
		var m metav1.TypeMeta
		_ = yaml.Unmarshal(d, &m)
		kinds[m.Kind] = true
	}
	for _, want := range []string{"ServiceAccount", "Role", "RoleBinding", "WorkflowTemplate"} {
		if !kinds[want] {
			t.Errorf("kubectl apply -k workflows installs no %s", want)
		}
	}
}

// TestAPIServerAcceptsTemplatesAndExamples installs Argo's CRDs into the
// real test apiserver and dry-runs everything kubectl apply -k workflows
// would create, plus every example Workflow and Secret.
func TestAPIServerAcceptsTemplatesAndExamples(t *testing.T) {
	c := testkube.Client(t)
	dc := testkube.InstallArgoCRDs(t)
	ns := testkube.Namespace(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	objs := kustomizeResources(t, ".")
	files, _ := filepath.Glob("../examples/*/workflow.yaml")
	secrets, _ := filepath.Glob("../examples/*/secret.yaml")
	for _, f := range append(files, secrets...) {
		for i, d := range testutil.YAMLDocs(t, f) {
			objs[fmt.Sprintf("%s#%d", f, i)] = d
		}
	}
	n := 0
	for where, d := range objs {
		desc, err := dryRun(ctx, dc, ns, d)
		if err != nil {
			t.Errorf("%s: the apiserver refuses %s: %v", where, desc, err)
		}
		n++
	}
	t.Logf("the apiserver accepted %d objects (dry run, strict field validation)", n)

	// The proof must be able to fail: an unknown field is refused.
	bad := []byte("apiVersion: argoproj.io/v1alpha1\nkind: WorkflowTemplate\nmetadata: {name: bad}\nspec:\n  templates:\n    - name: a\n      container: {image: x, nope: 1}\n")
	if _, err := dryRun(ctx, dc, ns, bad); err == nil {
		t.Error("the apiserver accepts a WorkflowTemplate with an unknown field: the CRDs have no schema")
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
