package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The shipped examples, run as their comments say: kubectl apply of the
// example as it is, or argo submit with -p overrides of its arguments.

// example reads examples/<dir>/<file> as unstructured objects.
func (e *env) example(t *testing.T, dir, file string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.repo, "examples", dir, file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); err != nil {
			break
		}
		if len(o.Object) > 0 {
			out = append(out, &o)
		}
	}
	if len(out) == 0 {
		t.Fatalf("examples/%s/%s holds no object", dir, file)
	}
	return out
}

// apply creates an object in the test namespace (idempotent for Secrets).
func (e *env) apply(t *testing.T, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	gvk := o.GroupVersionKind()
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"}
	got, err := e.dyn.Resource(gvr).Namespace(e.ns).Create(context.Background(), o, metav1.CreateOptions{})
	if err != nil && gvk.Kind == "Secret" && strings.Contains(err.Error(), "already exists") {
		return o
	}
	if err != nil {
		t.Fatalf("create %s %s%s: %v", gvk.Kind, o.GetName(), o.GetGenerateName(), err)
	}
	return got
}

// submitExample submits examples/<dir>/workflow.yaml with its arguments
// overridden (argo submit -p) and returns the Workflow's name.
func (e *env) submitExample(t *testing.T, dir string, params map[string]string) string {
	t.Helper()
	e.apply(t, e.example(t, "local", "secret.yaml")[0])
	wf := e.example(t, dir, "workflow.yaml")[0]
	ps, _, _ := unstructured.NestedSlice(wf.Object, "spec", "arguments", "parameters")
	for _, p := range ps {
		m := p.(map[string]any)
		if v, ok := params[m["name"].(string)]; ok {
			m["value"] = v
		}
	}
	if len(params) > 0 {
		if err := unstructured.SetNestedSlice(wf.Object, ps, "spec", "arguments", "parameters"); err != nil {
			t.Fatal(err)
		}
	}
	name := e.submitWorkflow(t, wf)
	return name
}

// slurmExampleParams point an example's arguments at the suite's Slurm.
func (e *env) slurmExampleParams(script string) map[string]string {
	return map[string]string{"backend": "slurm", "resource_url": e.slurmPodURL, "credentials_secret": "slurm-credentials",
		"job_properties": e.jobProps(), "script": script}
}

// itemNodes returns the nodes of a withItems task's items (task(0:a), ...),
// sorted by name.
func itemNodes(wf *unstructured.Unstructured, task string) []node {
	var out []node
	for _, n := range nodes(wf) {
		if strings.HasPrefix(n.DisplayName, task+"(") {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b node) int { return strings.Compare(a.DisplayName, b.DisplayName) })
	return out
}

// TestExampleLocalWorkflow: examples/local/workflow.yaml as shipped, on the
// local backend in the shipped image (a writable state dir, /bin/sh).
func TestExampleLocalWorkflow(t *testing.T) {
	e := setup(t)
	t.Parallel()
	name := e.submitExample(t, "local", nil)
	wf := e.waitDone(t, name, 3*time.Minute)
	if got := phaseOf(wf); got != "Succeeded" {
		t.Fatalf("workflow phase = %s, want Succeeded", got)
	}
	inv, _ := invokeNode(t, wf)
	if inv.Params["status"] != "DONE" || inv.Params["job_exit_code"] != "0" {
		t.Errorf("invoke's outputs %v, want status DONE, job_exit_code 0", inv.Params)
	}
	e.waitNoConfigMap(t, name, 30*time.Second)
}

// TestExampleLocalJob: examples/local/job.yaml as shipped, a plain Job.
func TestExampleLocalJob(t *testing.T) {
	e := setup(t)
	t.Parallel()
	e.apply(t, e.example(t, "local", "secret.yaml")[0])
	job := e.example(t, "local", "job.yaml")[0]
	e.runJobOnce(t, job, 3*time.Minute)
	cm := e.configMap(t, "local-example")
	if cm == nil || cm.Data["status.jobStatus"] != "DONE" || cm.Data["status.owner"] == "" {
		t.Errorf("the record local-example-bridge-cm: %v, want DONE with its owner", cm)
	}
}

// TestExampleBranchingSlurm: examples/branching with a Slurm job that fails.
// With exit_zero the job's step succeeds with status FAILED, the on-failure
// branch runs and on-success is skipped, and the Workflow runs to its end
// (Succeeded) instead of hanging or failing.
func TestExampleBranchingSlurm(t *testing.T) {
	e := setup(t)
	t.Parallel()
	name := e.submitExample(t, "branching", e.slurmExampleParams("#!/bin/bash\necho failing on purpose\nexit 3\n"))
	wf := e.waitDone(t, name, 4*time.Minute)
	if got := phaseOf(wf); got != "Succeeded" {
		t.Fatalf("workflow phase = %s, want Succeeded", got)
	}
	job, ok := nodeNamed(wf, "job")
	if !ok || job.Params["status"] != "FAILED" || job.Params["job_exit_code"] != "3" || job.Params["job_id"] == "" {
		t.Fatalf("the job task's outputs %v, want status FAILED, job_exit_code 3", job.Params)
	}
	if j := e.slurmJob(t, job.Params["job_id"]); j.JobState != "FAILED" {
		t.Errorf("Slurm job %s is %s, want FAILED", job.Params["job_id"], j.JobState)
	}
	if n, ok := nodeNamed(wf, "on-failure"); !ok || n.Phase != "Succeeded" || n.Params["status"] != "DONE" {
		t.Errorf("on-failure: %+v, want Succeeded with its own job DONE", n)
	}
	if n, ok := nodeNamed(wf, "on-success"); ok && n.Phase != "Skipped" {
		t.Errorf("on-success ran (%s), want Skipped", n.Phase)
	}
	for _, job := range []string{name, name + "-on-failure"} {
		e.waitNoConfigMap(t, job, 30*time.Second)
	}
}

// TestExampleLoopSlurm: examples/loop on Slurm: four items, four job names,
// four Slurm jobs, each DONE.
func TestExampleLoopSlurm(t *testing.T) {
	e := setup(t)
	t.Parallel()
	name := e.submitExample(t, "loop", e.slurmExampleParams("#!/bin/bash\necho one of four\n"))
	wf := e.waitDone(t, name, 5*time.Minute)
	if got := phaseOf(wf); got != "Succeeded" {
		t.Fatalf("workflow phase = %s, want Succeeded", got)
	}
	items := itemNodes(wf, "job")
	ids := map[string]bool{}
	for _, n := range items {
		if n.Type != "DAG" || n.Params["status"] != "DONE" {
			t.Errorf("item %s: %s %v, want a DAG whose job is DONE", n.DisplayName, n.Phase, n.Params)
		}
		ids[n.Params["job_id"]] = true
	}
	if len(items) != 4 || len(ids) != 4 {
		t.Fatalf("%d items with %d distinct Slurm jobs, want 4 and 4", len(items), len(ids))
	}
	var names []string
	for id := range ids {
		j := e.slurmJob(t, id)
		if j.JobState != "COMPLETED" {
			t.Errorf("Slurm job %s is %s, want COMPLETED", id, j.JobState)
		}
		names = append(names, j.Name)
	}
	slices.Sort(names)
	t.Logf("four Slurm jobs: %v", names)
	for _, item := range []string{"a", "b", "c", "d"} {
		e.waitNoConfigMap(t, name+"-"+item, 30*time.Second)
	}
}

// TestLoopSharedNameRefused: a loop whose items share one job name (the
// mistake the loop example warns about): the first invoke owns the record,
// the three others refuse it with exit 2 and say how to name jobs per item,
// so the Workflow fails instead of reporting one job four times.
func TestLoopSharedNameRefused(t *testing.T) {
	e := setup(t)
	t.Parallel()
	e.apply(t, e.example(t, "local", "secret.yaml")[0])
	wf := e.example(t, "loop", "workflow.yaml")[0]
	tasks, _, _ := unstructured.NestedSlice(wf.Object, "spec", "templates")
	dag := tasks[0].(map[string]any)["dag"].(map[string]any)["tasks"].([]any)[0].(map[string]any)
	ps := dag["arguments"].(map[string]any)["parameters"].([]any)
	ps[0].(map[string]any)["value"] = "{{workflow.name}}" // job_name without the item
	if err := unstructured.SetNestedSlice(wf.Object, tasks, "spec", "templates"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(wf.Object, []any{
		map[string]any{"name": "backend", "value": "local"}, map[string]any{"name": "resource_url", "value": ""},
		map[string]any{"name": "credentials_secret", "value": "local-credentials"}, map[string]any{"name": "job_properties", "value": ""},
		map[string]any{"name": "script", "value": "sleep 10"},
	}, "spec", "arguments", "parameters"); err != nil {
		t.Fatal(err)
	}
	name := "shared-" + randHex(3)
	wf.SetGenerateName("")
	wf.SetName(name)
	e.dumpOnFailure(t, "workflow", name)
	e.apply(t, wf)
	done := e.waitDone(t, name, 4*time.Minute)
	if got := phaseOf(done); got != "Failed" {
		t.Errorf("workflow phase = %s, want Failed", got)
	}
	refused := 0
	for _, n := range nodes(done) {
		if n.Type == "Pod" && strings.HasPrefix(n.DisplayName, "invoke") && n.ExitCode == "2" {
			refused++
			if !strings.Contains(n.Message, "{{item}}") && !strings.Contains(n.Params["message"], "{{item}}") {
				t.Errorf("refused invoke %s says %q, want how to add the item to the job name", n.DisplayName, n.Message+n.Params["message"])
			}
		}
	}
	if refused != 3 {
		t.Errorf("%d invokes refused the shared record, want 3", refused)
	}
}

// TestWorkflowDeadlineKilled: a Workflow's activeDeadlineSeconds ends a
// running Slurm job. invoke stops before the pod's deadline, so the job is
// CANCELLED and the status output says KILLED (it was empty when the
// kubelet stopped the whole pod at the deadline). The job's id is read from
// its record while it runs: Argo may keep none of a killed pod's outputs (as
// on Stop), and the job must be cancelled all the same.
func TestWorkflowDeadlineKilled(t *testing.T) {
	e := setup(t)
	t.Parallel()
	name := "deadline-" + randHex(3)
	wf := unstructuredWorkflow(name, e.slurmParams("#!/bin/bash\nsleep 300\n"))
	if err := unstructured.SetNestedField(wf.Object, int64(60), "spec", "activeDeadlineSeconds"); err != nil {
		t.Fatal(err)
	}
	e.dumpOnFailure(t, "workflow", name)
	if _, err := e.dyn.Resource(workflowsGVR).Namespace(e.ns).Create(context.Background(), wf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id := e.waitRunning(t, name, 2*time.Minute)["id"]
	done := e.waitDone(t, name, 4*time.Minute)
	if got := phaseOf(done); got != "Failed" {
		t.Errorf("workflow phase = %s, want Failed (its deadline passed)", got)
	}
	inv, attempts := invokeNode(t, done)
	if len(attempts) > 0 && attempts[len(attempts)-1].Params["status"] != "" {
		inv.Params = attempts[len(attempts)-1].Params
	}
	switch {
	case inv.Params["status"] == "KILLED":
		if got := inv.Params["job_id"]; got != id {
			t.Errorf("job_id output = %q, want %s (the record's)", got, id)
		}
	case len(inv.Params) == 0:
		// Argo kept none of the pod's outputs: no output is ours to judge;
		// the job must be cancelled all the same (below).
		t.Logf("Argo kept no outputs of the invoke pod at the deadline (node %s, message %q)", inv.Phase, inv.Message)
	default:
		t.Errorf("status output = %q (node message %q), want KILLED", inv.Params["status"], inv.Message)
	}
	if j := e.slurmJob(t, id); j.JobState != "CANCELLED" {
		t.Errorf("Slurm job %s is %s, want CANCELLED", id, j.JobState)
	}
	t.Logf("workflow %s; invoke: %s", phaseOf(done), inv.Params["message"])
}
