package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The shipped examples run end to end as a user submits them (issue 40):
// the YAML as it is in examples/, with only what differs from the user's
// site put in: the Slurm URL, the working directory, the image.

// shippedExample reads examples/<dir>/<file> with the site's addresses
// replaced by the suite's: the example's Slurm URL by the one pods reach,
// its working directories by the suite's, the released image by the one
// under test (loaded on the node, pulled never). The example must hold each
// placeholder it is known to hold, or the test says it changed.
func (e *env) shippedExample(t *testing.T, dir, file string, placeholders ...string) []*unstructured.Unstructured {
	t.Helper()
	return e.siteExample(t, dir, file, nil, placeholders...)
}

// siteExample is shippedExample with more of the user's site put in: each
// key of site (which the example must hold) replaced by its value, after
// the suite's own replacements.
func (e *env) siteExample(t *testing.T, dir, file string, site map[string]string, placeholders ...string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.repo, "examples", dir, file))
	if err != nil {
		t.Fatal(err)
	}
	const image = "ghcr.io/bridge-runner/bridge-runner:v0.1.0"
	subst := map[string]string{
		"https://slurm.example.org:6820":     e.slurmPodURL,
		"/scratch/bridge":                    e.slurmWorkDir,
		`"current_working_directory":"/tmp"`: `"current_working_directory":"` + e.slurmWorkDir + `"`,
		"image: " + image:                    "image: " + e.image + "\n          imagePullPolicy: Never",
	}
	text := string(b)
	for _, p := range placeholders {
		if !strings.Contains(text, p) {
			t.Fatalf("examples/%s/%s no longer holds %q; update this test", dir, file, p)
		}
	}
	for from, to := range subst {
		text = strings.ReplaceAll(text, from, to)
	}
	for from, to := range site {
		if !strings.Contains(text, from) {
			t.Fatalf("examples/%s/%s no longer holds %q; update this test", dir, file, from)
		}
		text = strings.ReplaceAll(text, from, to)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
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

// runShippedWorkflow submits examples/<dir>/workflow.yaml (the Secret is
// the suite's slurm-credentials, of the same name) and waits for its end.
func (e *env) runShippedWorkflow(t *testing.T, dir string, timeout time.Duration, placeholders ...string) *unstructured.Unstructured {
	t.Helper()
	return e.runSiteWorkflow(t, dir, nil, timeout, placeholders...)
}

// runSiteWorkflow is runShippedWorkflow with more of the site put in
// (siteExample).
func (e *env) runSiteWorkflow(t *testing.T, dir string, site map[string]string, timeout time.Duration, placeholders ...string) *unstructured.Unstructured {
	t.Helper()
	wf := e.siteExample(t, dir, "workflow.yaml", site, placeholders...)[0]
	name := e.submitWorkflow(t, wf)
	done := e.waitDone(t, name, timeout)
	if got := phaseOf(done); got != "Succeeded" {
		t.Fatalf("workflow %s phase = %s, want Succeeded", name, got)
	}
	return done
}

// TestExampleSlurmWorkflow: examples/slurm/workflow.yaml as shipped: its
// srun job DONE, the Slurm job COMPLETED, the record cleaned up.
func TestExampleSlurmWorkflow(t *testing.T) {
	e := setup(t)
	t.Parallel()
	wf := e.runShippedWorkflow(t, "slurm", 5*time.Minute, "https://slurm.example.org:6820", "/scratch/bridge")
	job, ok := nodeNamed(wf, "job")
	if !ok || job.Params["status"] != "DONE" || job.Params["job_id"] == "" {
		t.Fatalf("the job's outputs %v, want DONE with a job id", job.Params)
	}
	if j := e.slurmJob(t, job.Params["job_id"]); j.JobState != "COMPLETED" {
		t.Errorf("Slurm job %s is %s, want COMPLETED", job.Params["job_id"], j.JobState)
	}
	e.waitNoConfigMap(t, wf.GetName(), 30*time.Second)
}

// TestExampleRetryWorkflow: examples/retry/workflow.yaml as shipped
// (resubmit on infrastructure faults): a healthy job runs once, DONE, with
// attempt 1 and one COMPLETED Slurm job.
func TestExampleRetryWorkflow(t *testing.T) {
	e := setup(t)
	t.Parallel()
	wf := e.runShippedWorkflow(t, "retry", 5*time.Minute, "https://slurm.example.org:6820", `"current_working_directory":"/tmp"`)
	job, ok := nodeNamed(wf, "job")
	if !ok || job.Params["status"] != "DONE" || job.Params["attempt"] != "1" {
		t.Fatalf("the job's outputs %v, want DONE at attempt 1", job.Params)
	}
	if j := e.slurmJob(t, job.Params["job_id"]); j.JobState != "COMPLETED" {
		t.Errorf("Slurm job %s is %s, want COMPLETED", job.Params["job_id"], j.JobState)
	}
}

// TestExampleArrayWorkflow: examples/array/workflow.yaml as shipped: one
// step runs the 100-task array (10 at a time) as one Slurm array job; no
// task failed, so retry-failed is skipped.
func TestExampleArrayWorkflow(t *testing.T) {
	e := setup(t)
	t.Parallel()
	wf := e.runShippedWorkflow(t, "array", 10*time.Minute, "https://slurm.example.org:6820", `"current_working_directory":"/tmp"`)
	tasks, ok := nodeNamed(wf, "tasks")
	if !ok || tasks.Params["status"] != "DONE" || tasks.Params["array_failed"] != "" || tasks.Params["job_id"] == "" {
		t.Fatalf("the array step's outputs %v, want DONE with no failed task", tasks.Params)
	}
	if !strings.Contains(tasks.Params["array_counts"], "100") {
		t.Errorf("array_counts %q, want the 100 tasks counted", tasks.Params["array_counts"])
	}
	if n, ok := nodeNamed(wf, "retry-failed"); ok && n.Phase != "Skipped" {
		t.Errorf("retry-failed ran (%s), want Skipped", n.Phase)
	}
}

// TestExampleArrayWorkflowSplit: examples/array/workflow.yaml with an
// array past the e2e Slurm's MaxArraySize (22.05's default, 1,001) in
// chunks of 10 (`/10`): the step runs it as two native arrays under one
// record and reports the twenty tasks as one array, DONE.
func TestExampleArrayWorkflowSplit(t *testing.T) {
	e := setup(t)
	t.Parallel()
	wf := e.runSiteWorkflow(t, "array", map[string]string{`{name: array, value: "0-99%10"}`: `{name: array, value: "990-1009%10/10"}`},
		10*time.Minute, "https://slurm.example.org:6820", `"current_working_directory":"/tmp"`)
	tasks, ok := nodeNamed(wf, "tasks")
	if !ok || tasks.Params["status"] != "DONE" || tasks.Params["array_failed"] != "" || tasks.Params["array_counts"] != "DONE=20" {
		t.Fatalf("the array step's outputs %v, want DONE=20 with no failed task", tasks.Params)
	}
	// Indexes past the limit run shifted (the wrapper adds the chunk's
	// offset back); without /10 the 20 tasks would be one array at @990.
	chunks := strings.Split(tasks.Params["job_id"], "+")
	if len(chunks) != 2 || !strings.HasSuffix(chunks[0], "@990") || !strings.HasSuffix(chunks[1], "@1000") {
		t.Fatalf("job_id %q, want two chunks, from indexes 990 and 1000", tasks.Params["job_id"])
	}
}

// TestExampleSlurmBridgeJob: examples/slurm/bridgejob.yaml as shipped
// through the operator: DONE, its Slurm job COMPLETED.
func TestExampleSlurmBridgeJob(t *testing.T) {
	e := setup(t)
	t.Parallel()
	bj := e.shippedExample(t, "slurm", "bridgejob.yaml", "https://slurm.example.org:6820", "/scratch/bridge")[0]
	bj.SetName("slurm-example-" + randHex(3))
	e.installOperator(t)
	slurmBridgeJobs.Lock()
	defer slurmBridgeJobs.Unlock()
	e.runBridgeJob(t, bj, func(id string) {
		if j := e.slurmJob(t, id); j.JobState != "COMPLETED" {
			t.Errorf("Slurm job %s is %s, want COMPLETED", id, j.JobState)
		}
	})
}

// TestExampleSlurmJob: examples/slurm/job.yaml as shipped, a plain Job:
// it succeeds once, its record DONE with one COMPLETED Slurm job.
func TestExampleSlurmJob(t *testing.T) {
	e := setup(t)
	t.Parallel()
	job := e.shippedExample(t, "slurm", "job.yaml", "https://slurm.example.org:6820", "/scratch/bridge",
		"image: ghcr.io/bridge-runner/bridge-runner:v0.1.0")[0]
	e.runJobOnce(t, job, 5*time.Minute)
	e.checkPlainJobRecord(t, "slurm-example")
}

// TestIBMPodContract (issue 40): IBM's Bridge Operator's Slurm pod as its
// operator creates it, unchanged but for the image: a bare Pod
// <job>-bridge-pod (restartPolicy Never, 250m-500m CPU, 100Mi), the
// ServiceAccount bridge-cm-viewer with IBM's Role on ConfigMaps, env
// JOBNAME and NAMESPACE and no arguments, IBM's Secret (username, and the
// JWT as password) at /credentials, and the ConfigMap IBM's operator
// writes for its inline Slurm sample (IBM's keys, no backend: the
// slurmrestd path says it). The pod Succeeds, the record says DONE where
// IBM's operator reads it (status.jobStatus), and the Slurm job COMPLETED.
func TestIBMPodContract(t *testing.T) {
	e := setup(t)
	t.Parallel()
	const job = "ibm-hpcjob"
	e.applyYAML(t, ibmPodObjects(e.slurmUser, e.slurmToken))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: job + "-bridge-cm"}, Data: map[string]string{
		"updateInterval":         "2",
		"resourceURL":            e.slurmPodURL + "/slurm/v0.0.38",
		"resourcesecret":         "ibm-slurm-credentials",
		"jobdata.jobScript":      "#!/bin/bash\necho IBM pod contract\n",
		"jobdata.scriptLocation": "inline",
		"jobProperties":          `{"NodesNumber": "1", "Queue": "debug", "Tasks": "1", "slurmJobName": "ibm-hpcjob", "currentWorkingDir": "` + e.slurmWorkDir + `"}`,
	}}
	if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.dumpOnFailure(t, "pod", job+"-bridge-pod")
	e.applyYAML(t, ibmPod(job, e.ns, e.image))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var phase corev1.PodPhase
	_ = poll(ctx, time.Second, func() (bool, error) {
		p, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, job+"-bridge-pod", metav1.GetOptions{})
		if err == nil {
			phase = p.Status.Phase
		}
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	if phase != corev1.PodSucceeded {
		t.Fatalf("IBM's pod ended %q, want Succeeded", phase)
	}
	d := e.configMap(t, job).Data
	// status.jobStatus is the key IBM's operator reads (its pods' own
	// unprefixed keys are written for a record its operator owns).
	if d["status.jobStatus"] != "DONE" || d["id"] == "" {
		t.Fatalf("the record says status.jobStatus %q, id %q; want DONE with an id", d["status.jobStatus"], d["id"])
	}
	if j := e.slurmJob(t, d["id"]); j.JobState != "COMPLETED" {
		t.Errorf("Slurm job %s is %s, want COMPLETED", d["id"], j.JobState)
	}
}

// ibmPodObjects are what IBM's operator makes in a namespace before its
// pod: the ServiceAccount, Role and RoleBinding, and the user's Secret.
func ibmPodObjects(user, token string) string {
	return `apiVersion: v1
kind: ServiceAccount
metadata: {name: bridge-cm-viewer}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: bridge-cm-role}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, watch, list, update, patch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bridge-cm-binding}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: bridge-cm-role}
subjects: [{kind: ServiceAccount, name: bridge-cm-viewer}]
---
apiVersion: v1
kind: Secret
metadata: {name: ibm-slurm-credentials}
stringData: {username: "` + user + `", password: "` + token + `"}
`
}

// ibmPod is IBM's operator's pod for job (its controller's spec).
func ibmPod(job, ns, image string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + job + `-bridge-pod}
spec:
  restartPolicy: Never
  serviceAccountName: bridge-cm-viewer
  containers:
    - name: ` + job + `-bridge-pod
      image: ` + image + `
      imagePullPolicy: IfNotPresent
      env: [{name: JOBNAME, value: ` + job + `}, {name: NAMESPACE, value: ` + ns + `}]
      resources: {requests: {cpu: 250m, memory: 100Mi}, limits: {cpu: 500m, memory: 100Mi}}
      volumeMounts: [{name: credentials, mountPath: /credentials}]
  volumes: [{name: credentials, secret: {secretName: ibm-slurm-credentials}}]
`
}

// applyYAML applies y with kubectl in e's namespace.
func (e *env) applyYAML(t *testing.T, y string) {
	t.Helper()
	apply := exec.Command(e.kubectl, "--kubeconfig", e.kubeconfig, "apply", "-n", e.ns, "-f", "-")
	apply.Stdin = strings.NewReader(y)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v: %s", err, out)
	}
}

// TestExamplePlacementWorkflow: examples/placement/workflow.yaml as
// shipped, its two clusters made of the suite's one Slurm (as
// runPlacementExample does): hpc-a keeps its partition batch, which this
// Slurm lacks, and hpc-b's compute is its debug, so the placement must
// skip hpc-a and choose hpc-b, the target with a URL and credentials of
// its own and no backend of its own (issue 40: invoke skipped it every
// time). hpc-b's Secret is slurm-b-credentials as the example's comment
// creates it. The Workflow Succeeds, its output target is hpc-b, and one
// Slurm job ran, COMPLETED.
func TestExamplePlacementWorkflow(t *testing.T) {
	e := setup(t)
	t.Parallel()
	b := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "slurm-b-credentials"},
		"stringData": map[string]any{"username": e.slurmUser, "token": e.slurmToken, originsKey: origins(e.slurmPodURL, e.slurmURL)}}}
	e.apply(t, b)
	site := map[string]string{
		"https://slurm-a.example.org:6820": e.slurmPodURL,
		"https://slurm-b.example.org:6820": e.slurmPodURL,
		`{"partition": "compute"}`:         `{"partition": "debug"}`,
	}
	wf := e.runSiteWorkflow(t, "placement", site, 5*time.Minute, `{"partition": "batch"}`, `"current_working_directory":"/tmp"`)
	job, ok := nodeNamed(wf, "job")
	if !ok || job.Params["status"] != "DONE" || job.Params["job_id"] == "" {
		t.Fatalf("the job's outputs %v, want DONE with a job id", job.Params)
	}
	// The workflow's output is its root node's (`argo get` shows it).
	if root, _ := nodeNamed(wf, wf.GetName()); root.Params["target"] != "hpc-b" || job.Params["target"] != "hpc-b" {
		t.Errorf("the workflow's output target %q, the step's %q; want hpc-b (hpc-a has no partition batch here)", root.Params["target"], job.Params["target"])
	}
	var ran []slurmJob
	for _, j := range e.slurmJobs(t) {
		if j.Name == wf.GetName() {
			ran = append(ran, j)
		}
	}
	if len(ran) != 1 || ran[0].JobState != "COMPLETED" || fmt.Sprint(ran[0].JobID) != job.Params["job_id"] {
		t.Errorf("Slurm ran %v named %s, want the one job %s COMPLETED", ran, wf.GetName(), job.Params["job_id"])
	}
	e.waitNoConfigMap(t, wf.GetName(), 30*time.Second)
}

// submitWorkflow names wf from its generateName, as a submit would, and
// creates it (dumped if the test fails); it returns the name.
func (e *env) submitWorkflow(t *testing.T, wf *unstructured.Unstructured) string {
	t.Helper()
	name := wf.GetGenerateName() + randHex(3)
	wf.SetGenerateName("")
	wf.SetName(name)
	e.dumpOnFailure(t, "workflow", name)
	e.apply(t, wf)
	return name
}

// runJobOnce creates the plain Job (dumped if the test fails), waits for
// it within timeout and wants it to have succeeded once and failed never.
func (e *env) runJobOnce(t *testing.T, job *unstructured.Unstructured, timeout time.Duration) {
	t.Helper()
	e.dumpOnFailure(t, "job", job.GetName())
	e.apply(t, job)
	j := e.waitJobDone(t, job.GetName(), timeout)
	if j.Status.Succeeded != 1 || j.Status.Failed != 0 {
		t.Fatalf("job succeeded=%d failed=%d, want 1 and 0", j.Status.Succeeded, j.Status.Failed)
	}
}
