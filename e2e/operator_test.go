package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var bridgeJobs = schema.GroupVersionResource{Group: "bridgejob.ibm.com", Version: "v1alpha1", Resource: "bridgejobs"}

// installOperator applies deploy/operator the way the README says, with
// the image under test, and removes it at the end.
func (e *env) installOperator(t *testing.T) {
	t.Helper()
	out, err := exec.Command(e.kubectl, "kustomize", filepath.Join(e.repo, "deploy", "operator")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/operator: %v", err)
	}
	const pinned = "ghcr.io/bridge-runner/bridge-runner:v0.1.0"
	img := regexp.MustCompile(`(?m)^( *)image: ` + regexp.QuoteMeta(pinned) + `$`)
	y := img.ReplaceAllString(string(out), "${1}image: "+e.image+"\n${1}imagePullPolicy: Never")
	y = strings.ReplaceAll(y, "--job-image="+pinned, "--job-image="+e.image)
	if !strings.Contains(y, "imagePullPolicy: Never") {
		t.Fatalf("deploy/operator does not pin %s any more; update this test", pinned)
	}
	apply := exec.Command(e.kubectl, "--kubeconfig", e.kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(y)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply deploy/operator: %v: %s", err, out)
	}
	t.Cleanup(func() {
		del := exec.Command(e.kubectl, "--kubeconfig", e.kubeconfig, "delete", "--ignore-not-found", "--wait=false", "-f", "-")
		del.Stdin = strings.NewReader(y)
		_ = del.Run()
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- operator:\n%s", e.kubectlOut("-n", "bridge-runner-system", "logs", "deployment/bridge-runner-operator", "--tail", "80"))
		}
	})
	wait := exec.Command(e.kubectl, "--kubeconfig", e.kubeconfig, "-n", "bridge-runner-system", "rollout", "status",
		"deployment/bridge-runner-operator", "--timeout=180s")
	if out, err := wait.CombinedOutput(); err != nil {
		t.Fatalf("the operator did not start: %v: %s\n%s", err, out,
			e.kubectlOut("-n", "bridge-runner-system", "get", "pods", "-o", "wide"))
	}
}

// TestOperatorSlurmBridgeJob: a BridgeJob for the real Slurm, reconciled by
// the operator installed from deploy/operator, runs in a real pod to DONE;
// kubectl get bridgejobs shows its state and job id; deleting it removes
// what the operator made.
func TestOperatorSlurmBridgeJob(t *testing.T) {
	e := setup(t)
	e.installOperator(t)
	name := "bj-slurm-" + randHex(3)
	e.dumpOnFailure(t, "bridgejob", name)
	bj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bridgejob.ibm.com/v1alpha1", "kind": "BridgeJob",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"backend": "slurm", "resourceURL": e.slurmPodURL, "resourcesecret": "slurm-credentials",
			"imagepullpolicy": "Never", "updateinterval": int64(2), "jobproperties": e.jobProps(),
			"jobdata": map[string]any{"jobscript": "#!/bin/bash\necho operator job $SLURM_JOB_ID\n", "scriptlocation": "inline"},
		},
	}}
	res := e.dyn.Resource(bridgeJobs).Namespace(e.ns)
	ctx := context.Background()
	var err error
	// The CRD may take a moment to be served after its creation.
	if err := poll(ctx, time.Second, func() (bool, error) {
		_, err = res.Create(ctx, bj, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("creating the BridgeJob: %v", err)
	}
	var state, id string
	deadline, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := poll(deadline, 2*time.Second, func() (bool, error) {
		got, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		state, _, _ = unstructured.NestedString(got.Object, "status", "state")
		id, _, _ = unstructured.NestedString(got.Object, "status", "jobid")
		return state == "DONE" || state == "FAILED" || state == "KILLED" || state == "UNKNOWN", nil
	}); err != nil || state != "DONE" {
		t.Fatalf("BridgeJob state %q (want DONE): %v", state, err)
	}
	if sj := e.slurmJob(t, id); !strings.Contains(sj.JobState, "COMPLETED") {
		t.Errorf("Slurm job %s: %v, want COMPLETED", id, sj.JobState)
	}
	table := e.kubectlOut("get", "bridgejobs", name)
	if !strings.Contains(table, "STATE") || !strings.Contains(table, "JOB ID") || !strings.Contains(table, "DONE") || !strings.Contains(table, id) {
		t.Errorf("kubectl get bridgejobs shows:\n%s", table)
	}
	if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(deadline, time.Second, func() (bool, error) {
		_, err1 := res.Get(ctx, name, metav1.GetOptions{})
		_, err2 := e.kube.CoreV1().ConfigMaps(e.ns).Get(ctx, name+"-bridge-cm", metav1.GetOptions{})
		_, err3 := e.kube.BatchV1().Jobs(e.ns).Get(ctx, name+"-bridge-job", metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3), nil
	}); err != nil {
		t.Errorf("the BridgeJob or its record or Job is still there after deletion: %v", err)
	}
}
