package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
)

// TestRecordOwnedByRun: a record made by create-configmap (or by invoke
// with a description) in a workflow step belongs to the step's Workflow
// (the pod's controller; KFP's runs are Argo Workflows too), and in a plain
// Job's pod to the Job, so that Kubernetes deletes it with the run; a
// retried step's pod, a new pod of the same Workflow, finds it and keeps
// that owner. The step runs as the shipped Role's ServiceAccount: reading
// its own pod is all it needs.
func TestRecordOwnedByRun(t *testing.T) {
	clearEnv(t)
	dc := testkube.InstallArgoCRDs(t)
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	installShippedRBAC(t, admin, ns)
	kubeconfig := writeKubeconfig(t, testkube.ServiceAccountConfig(t, admin, ns, "bridge-runner"), ns)
	ctx := context.Background()
	_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	wf, err := dc.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}).Namespace(ns).Create(ctx,
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
			"metadata": map[string]any{"name": "wf"},
			"spec": map[string]any{"entrypoint": "main", "templates": []any{map[string]any{"name": "main",
				"container": map[string]any{"image": "busybox"}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	wfRef := metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: "wf", UID: wf.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}
	pod := func(name string, owner metav1.OwnerReference) {
		_, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool),
				Containers: []corev1.Container{{Name: "main", Image: "bridge-runner"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	step := func(podEnv, pod, job, command string, args ...string) {
		t.Helper()
		cmd := exec.Command(binary, append([]string{command, "--kubeconfig", kubeconfig, "--namespace", ns, "--job-name", job,
			"--backend", "local", "--script", "true"}, args...)...)
		cmd.Env = append(os.Environ(), podEnv+"="+pod)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.Equal(t, 0, exitOf(cmd.Run()), out.String())
	}
	owners := func(job string) []metav1.OwnerReference {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, job+"-bridge-cm", metav1.GetOptions{})
		require.NoError(t, err)
		return cm.OwnerReferences
	}
	want := func(ref metav1.OwnerReference) []metav1.OwnerReference {
		// Neither controller nor blocking: the record only goes with it.
		return []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}}
	}

	pod("wf-create-1", wfRef)
	step("ARGO_POD_NAME", "wf-create-1", "argo", "create-configmap")
	assert.Equal(t, want(wfRef), owners("argo"), "the record of a Workflow's step")
	pod("wf-create-2", wfRef) // the step retried: another pod of the same Workflow
	step("ARGO_POD_NAME", "wf-create-2", "argo", "create-configmap")
	assert.Equal(t, want(wfRef), owners("argo"), "after the step's retry")

	pod("wf-bridge-job-1", wfRef) // bridge-job: invoke makes the record itself
	step("ARGO_POD_NAME", "wf-bridge-job-1", "onestep", "invoke", "--store", "configmap", "--state-dir", t.TempDir())
	assert.Equal(t, want(wfRef), owners("onestep"), "the record invoke made")

	j, err := admin.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "bridge-runner"}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	jobRef := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "plain", UID: j.UID, Controller: &yes}
	pod("plain-abcde", jobRef)
	step("POD_NAME", "plain-abcde", "plain", "create-configmap")
	assert.Equal(t, want(jobRef), owners("plain"), "the record of a plain Job's pod")
}

// TestRecordIsItsRunsFromCreation: the record create-configmap makes is its
// run's from that moment (status.owner names the Workflow), so the exit
// handler of another run that shares the job name (refused, or just
// ending) leaves it alone, while the invoke of the run that made it claims
// it. Before, status.owner stayed empty until that invoke's claim, and the
// other run's cleanup deleted the record in between.
func TestRecordIsItsRunsFromCreation(t *testing.T) {
	clearEnv(t)
	dc := testkube.InstallArgoCRDs(t)
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	installShippedRBAC(t, admin, ns)
	kubeconfig := writeKubeconfig(t, testkube.ServiceAccountConfig(t, admin, ns, "bridge-runner"), ns)
	ctx := context.Background()
	_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	workflow := func(name string) metav1.OwnerReference {
		wf, err := dc.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}).Namespace(ns).Create(ctx,
			&unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
				"metadata": map[string]any{"name": name},
				"spec": map[string]any{"entrypoint": "main", "templates": []any{map[string]any{"name": "main",
					"container": map[string]any{"image": "busybox"}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: name, UID: wf.GetUID(), Controller: &yes}
	}
	pod := func(name, node string, owner metav1.OwnerReference) {
		_, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{owner},
				Annotations: map[string]string{"workflows.argoproj.io/node-name": node}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool),
				Containers: []corev1.Container{{Name: "main", Image: "bridge-runner"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	step := func(pod string, args ...string) (int, string) {
		cmd := exec.Command(binary, append(args, "--kubeconfig", kubeconfig, "--namespace", ns, "--job-name", "shared")...)
		cmd.Env = append(os.Environ(), "ARGO_POD_NAME="+pod)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		return exitOf(cmd.Run()), out.String()
	}
	a, b := workflow("wf-a"), workflow("wf-b")
	pod("wf-a-create", "wf-a.main.create", a)
	pod("wf-a-invoke", "wf-a.main.invoke", a)
	pod("wf-b-exit", "wf-b.onExit", b)

	code, out := step("wf-a-create", "create-configmap", "--backend", "local", "--script", "true")
	require.Equal(t, 0, code, out)
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "shared-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Workflow wf-a (uid "+string(a.UID)+")", cm.Data["status.owner"], "stamped at creation")

	code, out = step("wf-b-exit", "cleanup")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "another run")
	_, err = admin.CoreV1().ConfigMaps(ns).Get(ctx, "shared-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err, "another run's cleanup left the record")

	code, out = step("wf-a-invoke", "invoke", "--state-dir", t.TempDir(), "--store", "configmap")
	require.Equal(t, 0, code, out)
	cm, err = admin.CoreV1().ConfigMaps(ns).Get(ctx, "shared-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "DONE", cm.Data["status.jobStatus"])
	assert.Equal(t, "Workflow wf-a (uid "+string(a.UID)+") node wf-a.main.invoke", cm.Data["status.owner"], "the run's task claimed it")
}
