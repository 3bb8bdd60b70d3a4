package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/runner"
)

// The decision that keeps a job running when only its invoke pod goes away,
// against the real apiserver with Argo's CRDs. The apiserver has no kubelet
// or controllers, so the objects are written as Argo and the Job controller
// would leave them; a finalizer keeps a deleted pod visible, as the grace
// period does on a real node.

const holdFinalizer = "bridge-runner.test/hold"

var workflowsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}

type disruptionEnv struct {
	c  kubernetes.Interface
	dc dynamic.Interface
	kc *kube.Client // what invoke uses
	ns string
}

func newDisruptionEnv(t *testing.T) *disruptionEnv {
	dc := testkube.InstallArgoCRDs(t)
	c := testkube.Client(t)
	ns := testkube.Namespace(t, c)
	// Pods need the namespace's default ServiceAccount, which only the
	// controller-manager (absent here) would create.
	_, err := c.CoreV1().ServiceAccounts(ns).Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &disruptionEnv{c: c, dc: dc, kc: testkube.KubeClient(t, testkube.Config(t)), ns: ns}
}

// workflow creates a running Workflow whose node "invoke" (a pod) sits under
// a Retry node when retried, with the given spec changes.
func (e *disruptionEnv) workflow(t *testing.T, name string, retried bool, edit func(spec map[string]any)) *unstructured.Unstructured {
	parentType := "Steps"
	if retried {
		parentType = "Retry"
	}
	spec := map[string]any{
		"entrypoint": "main",
		"templates":  []any{map[string]any{"name": "main", "container": map[string]any{"image": "busybox"}}},
	}
	if edit != nil {
		edit(spec)
	}
	wf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
		"status": map[string]any{
			"phase":     "Running",
			"startedAt": time.Now().UTC().Format(time.RFC3339),
			"nodes": map[string]any{
				name + "-1": map[string]any{"id": name + "-1", "name": name + ".invoke", "type": parentType, "phase": "Running", "children": []any{name + "-2"}},
				name + "-2": map[string]any{"id": name + "-2", "name": name + ".invoke(0)", "type": "Pod", "phase": "Running"},
			},
		},
	}}
	out, err := e.dc.Resource(workflowsGVR).Namespace(e.ns).Create(context.Background(), wf, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

// pod creates an invoke pod owned by owner (nil: none) carrying Argo's node
// annotation, and deletes it when deleted is set.
func (e *disruptionEnv) pod(t *testing.T, name string, owner *metav1.OwnerReference, node string, deleted bool) {
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Finalizers:  []string{holdFinalizer},
			Annotations: map[string]string{"workflows.argoproj.io/node-id": node},
		},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "main", Image: "bridge-runner"}},
		},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	_, err := e.c.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		_, _ = e.c.CoreV1().Pods(e.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	})
	if deleted {
		require.NoError(t, e.c.CoreV1().Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{}))
	}
}

func (e *disruptionEnv) detach(pod string) (bool, string) {
	d := &runner.Disruption{Client: e.kc, Namespace: e.ns, Pod: pod}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.Detach(ctx)
}

func ownerRef(obj metav1.Object, apiVersion, kind string) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), UID: obj.GetUID(), Controller: &yes}
}

func TestDisruptionUnderAWorkflow(t *testing.T) {
	e := newDisruptionEnv(t)
	cases := []struct {
		name    string
		retried bool
		deleted bool
		edit    func(spec map[string]any)
		want    bool
		why     string
	}{
		{name: "evicted", retried: true, deleted: true, want: true, why: "retries it"},
		{name: "signalled", retried: true, deleted: false, want: false, why: "not being deleted"},
		{name: "stopped", retried: true, deleted: true, want: false, why: "spec.shutdown=Stop",
			edit: func(s map[string]any) { s["shutdown"] = "Stop" }},
		{name: "terminated", retried: true, deleted: true, want: false, why: "spec.shutdown=Terminate",
			edit: func(s map[string]any) { s["shutdown"] = "Terminate" }},
		{name: "kfp-terminate", retried: true, deleted: true, want: false, why: "activeDeadlineSeconds=0",
			edit: func(s map[string]any) { s["activeDeadlineSeconds"] = int64(0) }},
		{name: "deadline-ahead", retried: true, deleted: true, want: true, why: "retries it",
			edit: func(s map[string]any) { s["activeDeadlineSeconds"] = int64(3600) }},
		{name: "no-retry", retried: false, deleted: true, want: false, why: "does not retry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wfName := "wf-" + tc.name
			wf := e.workflow(t, wfName, tc.retried, tc.edit)
			pod := wfName + "-invoke"
			e.pod(t, pod, ownerRef(wf, "argoproj.io/v1alpha1", "Workflow"), wfName+"-2", tc.deleted)
			got, why := e.detach(pod)
			assert.Equal(t, tc.want, got, why)
			assert.Contains(t, why, tc.why)
		})
	}
	testWorkflowOwnerCases(t, e)
}

// testWorkflowOwnerCases: the owning Workflow is gone, replaced or ended,
// there is no owner or pod, or the pod cannot be read.
func testWorkflowOwnerCases(t *testing.T, e *disruptionEnv) {
	t.Run("workflow-deleted", func(t *testing.T) {
		wf := e.workflow(t, "wf-gone", true, nil)
		require.NoError(t, e.dc.Resource(workflowsGVR).Namespace(e.ns).Delete(context.Background(), "wf-gone", metav1.DeleteOptions{}))
		e.pod(t, "wf-gone-invoke", ownerRef(wf, "argoproj.io/v1alpha1", "Workflow"), "wf-gone-2", true)
		got, why := e.detach("wf-gone-invoke")
		assert.False(t, got, why)
		assert.Contains(t, why, "not found")
	})
	t.Run("workflow-recreated", func(t *testing.T) {
		// A new Workflow of the same name is not the pod's owner.
		old := e.workflow(t, "wf-again", true, nil)
		require.NoError(t, e.dc.Resource(workflowsGVR).Namespace(e.ns).Delete(context.Background(), "wf-again", metav1.DeleteOptions{}))
		e.workflow(t, "wf-again", true, nil)
		e.pod(t, "wf-again-invoke", ownerRef(old, "argoproj.io/v1alpha1", "Workflow"), "wf-again-2", true)
		got, why := e.detach("wf-again-invoke")
		assert.False(t, got, why)
		assert.Contains(t, why, "being deleted")
	})
	t.Run("workflow-ended", func(t *testing.T) {
		wf := e.workflow(t, "wf-ended", true, nil)
		require.NoError(t, unstructured.SetNestedField(wf.Object, "Failed", "status", "phase"))
		_, err := e.dc.Resource(workflowsGVR).Namespace(e.ns).Update(context.Background(), wf, metav1.UpdateOptions{})
		require.NoError(t, err)
		e.pod(t, "wf-ended-invoke", ownerRef(wf, "argoproj.io/v1alpha1", "Workflow"), "wf-ended-2", true)
		got, why := e.detach("wf-ended-invoke")
		assert.False(t, got, why)
		assert.Contains(t, why, "has ended")
	})
	t.Run("bare-pod", func(t *testing.T) {
		e.pod(t, "bare", nil, "", true)
		got, why := e.detach("bare")
		assert.False(t, got, why)
		assert.Contains(t, why, "no owner")
	})
	t.Run("no-such-pod", func(t *testing.T) {
		got, why := e.detach("nowhere")
		assert.False(t, got, why)
		assert.Contains(t, why, "cannot read this pod")
	})
	t.Run("no-grant", func(t *testing.T) {
		// Without get on pods (the user has no grant at all), SIGTERM cancels.
		wf := e.workflow(t, "wf-nogrant", true, nil)
		e.pod(t, "wf-nogrant-invoke", ownerRef(wf, "argoproj.io/v1alpha1", "Workflow"), "wf-nogrant-2", true)
		user := testkube.UserConfig(t)
		d := &runner.Disruption{Client: testkube.KubeClient(t, user), Namespace: e.ns, Pod: "wf-nogrant-invoke"}
		got, why := d.Detach(context.Background())
		assert.False(t, got, why)
		assert.Contains(t, why, "forbidden")
	})
}

func TestDisruptionUnderAJob(t *testing.T) {
	e := newDisruptionEnv(t)
	ctx := context.Background()
	job := func(name string, edit func(*batchv1.Job)) *batchv1.Job {
		limit := int32(3)
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{
				BackoffLimit: &limit,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "invoke", Image: "bridge-runner"}},
				}},
			},
		}
		if edit != nil {
			edit(j)
		}
		out, err := e.c.BatchV1().Jobs(e.ns).Create(ctx, j, metav1.CreateOptions{})
		require.NoError(t, err)
		return out
	}
	setStatus := func(j *batchv1.Job, st batchv1.JobStatus) {
		j.Status = st
		_, err := e.c.BatchV1().Jobs(e.ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	started := metav1.NewTime(time.Now().Add(-time.Minute))
	cases := []struct {
		name   string
		edit   func(*batchv1.Job)
		status *batchv1.JobStatus
		want   bool
		why    string
	}{
		{name: "evicted", want: true, why: "retries it"},
		{name: "failed-twice", status: &batchv1.JobStatus{StartTime: &started, Failed: 2}, want: true, why: "retries it"},
		{name: "last-attempt", status: &batchv1.JobStatus{StartTime: &started, Failed: 3}, want: false, why: "no retry left"},
		{name: "suspended", edit: func(j *batchv1.Job) { j.Spec.Suspend = new(true) }, want: false, why: "suspended"},
		{name: "deadline", edit: func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = new(int64(30)) },
			status: &batchv1.JobStatus{StartTime: &started}, want: false, why: "past its deadline"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := job("job-"+tc.name, tc.edit)
			if tc.status != nil {
				setStatus(j, *tc.status)
			}
			pod := j.Name + "-pod"
			e.pod(t, pod, ownerRef(j, "batch/v1", "Job"), "", true)
			got, why := e.detach(pod)
			assert.Equal(t, tc.want, got, why)
			assert.Contains(t, why, tc.why)
		})
	}
	t.Run("job-deleted", func(t *testing.T) {
		j := job("job-gone", nil)
		bg := metav1.DeletePropagationBackground // as kubectl delete job does
		require.NoError(t, e.c.BatchV1().Jobs(e.ns).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &bg}))
		e.pod(t, "job-gone-pod", ownerRef(j, "batch/v1", "Job"), "", true)
		got, why := e.detach("job-gone-pod")
		assert.False(t, got, why)
		assert.Contains(t, why, "not found")
	})
}
