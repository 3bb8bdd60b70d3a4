package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rayJob is what the suite reads of a Ray job (GET /api/jobs/{submission_id}).
type rayJob struct {
	SubmissionID string `json:"submission_id"`
	Status       string `json:"status"`
	Message      string `json:"message"`
}

// rayGet reads path of the e2e Ray's Jobs API into out.
func (e *env) rayGet(t *testing.T, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.rayURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.rayToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("ray: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ray GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("ray GET %s: %v: %s", path, err, body)
	}
}

// rayJob returns the Ray job with the given submission id.
func (e *env) rayJob(t *testing.T, id string) rayJob {
	t.Helper()
	var j rayJob
	e.rayGet(t, "/api/jobs/"+url.PathEscape(id), &j)
	return j
}

// rayLogs returns the driver's output of the Ray job id.
func (e *env) rayLogs(t *testing.T, id string) string {
	t.Helper()
	var l struct {
		Logs string `json:"logs"`
	}
	e.rayGet(t, "/api/jobs/"+url.PathEscape(id)+"/logs", &l)
	return l.Logs
}

// TestExampleRayWorkflow: examples/ray/workflow.yaml (the shipped
// WorkflowTemplate's bridge-job) against the suite's real Ray, reached by
// the pods at the node's own address with the token of the Secret
// ray-credentials: the Workflow Succeeded, invoke's outputs say DONE with
// the Ray job's id, Ray says SUCCEEDED, and the record is cleaned up.
// The example's URL is pointed at the suite's Ray and its runtime_env (pip
// numpy) left out: the suite has no package index.
func TestExampleRayWorkflow(t *testing.T) {
	e := setup(t)
	e.needRay(t)
	t.Parallel()
	wf := e.example(t, "ray", "workflow.yaml")[0]
	setTaskParams(t, wf, "job", map[string]string{"resource_url": e.rayURL, "job_properties": `{"entrypoint_num_cpus":1}`})
	name := e.submitWorkflow(t, wf)
	// A ceiling: the suite's Ray has one CPU and its Ray tests run side by
	// side, each job asking for it, so this one may wait for the others'
	// (on a loaded machine a Ray job takes a minute to start its driver;
	// 3 min was met twice on CI's kind of machine).
	wf = e.waitDone(t, name, 8*time.Minute)
	if got := phaseOf(wf); got != "Succeeded" {
		t.Fatalf("workflow phase = %s, want Succeeded", got)
	}
	inv, _ := invokeNode(t, wf)
	id := inv.Params["job_id"]
	if inv.Params["status"] != "DONE" || id == "" {
		t.Fatalf("invoke's outputs %v, want status DONE with a job id", inv.Params)
	}
	if j := e.rayJob(t, id); j.Status != "SUCCEEDED" {
		t.Errorf("Ray job %s: %s (%s), want SUCCEEDED", id, j.Status, j.Message)
	}
	if logs := e.rayLogs(t, id); !strings.Contains(logs, "'CPU': 1.0") {
		t.Errorf("Ray job %s's output lacks the cluster's resources:\n%s", id, logs)
	}
	e.waitNoConfigMap(t, name, 30*time.Second)
}

// setTaskParams sets the values of the named arguments of the DAG task
// task in wf's templates; every name must be there.
func setTaskParams(t *testing.T, wf *unstructured.Unstructured, task string, values map[string]string) {
	t.Helper()
	// NoCopy: the values are set in wf itself (NestedSlice returns copies).
	slice := func(obj map[string]any, fields ...string) []any {
		v, _, _ := unstructured.NestedFieldNoCopy(obj, fields...)
		s, _ := v.([]any)
		return s
	}
	set := map[string]bool{}
	for _, tpl := range slice(wf.Object, "spec", "templates") {
		for _, tk := range slice(tpl.(map[string]any), "dag", "tasks") {
			tm := tk.(map[string]any)
			if tm["name"] != task {
				continue
			}
			for _, p := range slice(tm, "arguments", "parameters") {
				pm := p.(map[string]any)
				if v, ok := values[pm["name"].(string)]; ok {
					pm["value"], set[pm["name"].(string)] = v, true
				}
			}
		}
	}
	for k := range values {
		if !set[k] {
			t.Fatalf("the workflow has no task %s with the argument %s", task, k)
		}
	}
}

// TestExampleRayJob: examples/ray/job.yaml as shipped, a plain Job, its
// URL the suite's Ray (reached by the pods at the node's own address with
// the Secret ray-credentials) and its runtime_env (pip numpy) left out:
// the suite has no package index. The Job succeeds once, its record says
// DONE with the Ray job's id, and Ray says SUCCEEDED with the driver's
// output.
func TestExampleRayJob(t *testing.T) {
	e := setup(t)
	e.needRay(t)
	t.Parallel()
	site := map[string]string{
		"http://ray-head.ray.svc:8265":           e.rayURL,
		`,\"runtime_env\":{\"pip\":[\"numpy\"]}`: "",
	}
	job := e.siteExample(t, "ray", "job.yaml", site, "image: ghcr.io/bridge-runner/bridge-runner:v0.1.0")[0]
	e.runJobOnce(t, job, 8*time.Minute) // the suite's one Ray CPU, shared: see TestExampleRayWorkflow
	cm := e.configMap(t, "ray-example")
	if cm == nil || cm.Data["status.jobStatus"] != "DONE" || cm.Data["id"] == "" {
		t.Fatalf("the record ray-example-bridge-cm: %v, want DONE with the Ray job's id", cm)
	}
	id := cm.Data["id"]
	if rj := e.rayJob(t, id); rj.Status != "SUCCEEDED" {
		t.Errorf("Ray job %s: %s (%s), want SUCCEEDED", id, rj.Status, rj.Message)
	}
	if logs := e.rayLogs(t, id); !strings.Contains(logs, "'CPU': 1.0") {
		t.Errorf("Ray job %s's output lacks the cluster's resources:\n%s", id, logs)
	}
}
