// Package argo4 checks the shipped WorkflowTemplates and example Workflows
// with Argo Workflows 4's own validator, beside the 3.7 one of the main
// module (workflows/workflows_test.go). It is a module of its own because
// Argo 4 (github.com/argoproj/argo-workflows/v4) needs other Kubernetes
// library versions than the rest of the project; hack/test.sh runs it.
package argo4

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	fakewf "github.com/argoproj/argo-workflows/v4/pkg/client/clientset/versioned/fake"
	"github.com/argoproj/argo-workflows/v4/util/logging"
	"github.com/argoproj/argo-workflows/v4/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v4/workflow/validate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// docs splits a YAML file into its documents.
func docs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(d) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("nothing matches %s: %v", pattern, err)
	}
	return files
}

// templates decodes every WorkflowTemplate strictly with Argo 4's types: a
// field that 4.0 removed is an unknown field here.
func templates(t *testing.T) map[string]*wfv1.WorkflowTemplate {
	t.Helper()
	out := map[string]*wfv1.WorkflowTemplate{}
	for _, f := range glob(t, "../templates/*.yaml") {
		for _, d := range docs(t, f) {
			var wt wfv1.WorkflowTemplate
			if err := yaml.UnmarshalStrict(d, &wt); err != nil {
				t.Fatalf("%s: Argo 4's types refuse it: %v", f, err)
			}
			if wt.Kind == "WorkflowTemplate" {
				out[wt.Name] = &wt
			}
		}
	}
	return out
}

// ctx carries the logger that Argo 4's validator requires.
func ctx() context.Context {
	return logging.WithLogger(context.Background(), logging.NewSlogLogger(logging.Warn, logging.Text))
}

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

func TestArgo4ValidatesTemplates(t *testing.T) {
	wts := templates(t)
	if len(wts) == 0 {
		t.Fatal("no WorkflowTemplate found")
	}
	wg, cg := getters(t, wts)
	for name, wt := range wts {
		if err := validate.ValidateWorkflowTemplate(ctx(), wg, cg, wt, nil, validate.ValidateOpts{Lint: true}); err != nil {
			t.Errorf("Argo 4's validator refuses WorkflowTemplate %s: %v", name, err)
		}
	}
}

func TestArgo4ValidatesExamples(t *testing.T) {
	wg, cg := getters(t, templates(t))
	for _, f := range glob(t, "../../examples/*/workflow.yaml") {
		d := docs(t, f)
		if len(d) != 1 {
			t.Fatalf("%s: %d documents, want one Workflow", f, len(d))
		}
		var wf wfv1.Workflow
		if err := yaml.UnmarshalStrict(d[0], &wf); err != nil {
			t.Fatalf("%s: Argo 4's types refuse it: %v", f, err)
		}
		wf.Namespace = "default"
		if err := validate.ValidateWorkflow(ctx(), wg, cg, &wf, nil, validate.ValidateOpts{Lint: true}); err != nil {
			t.Errorf("Argo 4's validator refuses %s: %v", f, err)
		}
	}
}

// What Argo 4.0 removed must appear nowhere in what we ship, not even in a
// file the validators above do not read (a CronWorkflow, a comment that a
// user might copy).
func TestNothingRemovedIn4(t *testing.T) {
	removed := regexp.MustCompile(`(?m)^\s*(podPriority|mutex|semaphore|schedule):`)
	var files []string
	for _, p := range []string{"../templates/*.yaml", "../rbac/*.yaml", "../*.yaml", "../../examples/*/*.yaml", "../../components/*.yaml"} {
		m, _ := filepath.Glob(p)
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("only %d files found", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := removed.Find(b); m != nil {
			t.Errorf("%s uses %q, which Argo 4.0 removed (use schedules, synchronization.mutexes/semaphores, priorityClassName)", f, strings.TrimSpace(string(m)))
		}
	}
}

// The proof itself: a removed field is refused by the strict decoding.
func TestRemovedFieldIsRefused(t *testing.T) {
	var wf wfv1.Workflow
	err := yaml.UnmarshalStrict([]byte("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: x}\nspec:\n  podPriority: 1\n  entrypoint: a\n  templates: [{name: a, container: {image: x}}]\n"), &wf)
	if err == nil {
		t.Fatal("Argo 4's types accepted podPriority, which 4.0 removed")
	}
}
