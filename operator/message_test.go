package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestFailedJobSaysTheRecordsReason: when the Job fails before the record
// reaches a final state (invoke refused the job: exit 2, which the Job's
// podFailurePolicy turns into a failed Job), status.message carries the
// reason invoke left in the record, not only "PodFailurePolicy".
func TestFailedJobSaysTheRecordsReason(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.operator("a")
	e.create(e.localJob("refused", "true"))
	cm, kj := e.children("refused")
	ctx := context.Background()
	why := "slurmrestd refused the job: Invalid partition name specified; name a partition that sinfo lists"
	e.waitFor("the record to take invoke's reason", func() (bool, error) {
		cm = &kube.ConfigMap{}
		if err := e.c.Get(ctx, kube.ConfigMaps, e.ns, record.ConfigMapName("refused"), cm); err != nil {
			return false, err
		}
		cm.Data[record.KeyMessage] = why
		err := e.c.Update(ctx, kube.ConfigMaps, e.ns, cm.Name, cm, &kube.ConfigMap{})
		return err == nil, err
	})
	// What the Job controller writes when the podFailurePolicy fails the
	// Job (the apiserver wants FailureTarget before Failed, and a start).
	bjob, err := e.kc.BatchV1().Jobs(e.ns).Get(ctx, kj.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	msg := "Container invoke for pod x failed with exit code 2 matching FailJob rule at index 0"
	bjob.Status.StartTime = &now
	bjob.Status.Failed = 1
	bjob.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy", Message: msg, LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy", Message: msg, LastTransitionTime: now},
	}
	if _, err := e.kc.BatchV1().Jobs(e.ns).UpdateStatus(ctx, bjob, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	bj := e.waitState("refused", "FAILED")
	if !strings.HasPrefix(bj.Status.Message, why) || !strings.Contains(bj.Status.Message, "PodFailurePolicy") {
		t.Errorf("status.message = %q, want the record's reason first, then the Job's", bj.Status.Message)
	}
}

// TestPodThatCannotPullIsSaid: a BridgeJob whose pod cannot pull its image
// does not sit PENDING without a word: status.message names the pod, the
// image and the kubelet's reason, and one Warning says it.
func TestPodThatCannotPullIsSaid(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.opts = func(o *Options) { o.StartCheck = time.Second }
	e.operator("a")
	e.create(e.localJob("nopull", "true"))
	_, kj := e.children("nopull")
	// No kubelet here: the pod the Job controller would make, and the
	// status the kubelet would give it.
	ctx := context.Background()
	pod, err := e.kc.CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: kj.Name + "-abcde", Labels: map[string]string{"job-name": kj.Name}},
		Spec: corev1.PodSpec{ServiceAccountName: kj.Spec.Template.Spec.ServiceAccountName,
			Containers: []corev1.Container{{Name: "invoke", Image: "registry.invalid/bridge-runner:none"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "invoke", Image: "registry.invalid/bridge-runner:none",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
	if _, err := e.kc.CoreV1().Pods(e.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var bj *BridgeJob
	e.waitFor("a message about the pod", func() (bool, error) {
		var err error
		bj, err = e.get("nopull")
		return err == nil && strings.Contains(bj.Status.Message, "ImagePullBackOff"), err
	})
	for _, want := range []string{pod.Name, "registry.invalid/bridge-runner:none", "kubectl describe pod"} {
		if !strings.Contains(bj.Status.Message, want) {
			t.Errorf("status.message %q lacks %q", bj.Status.Message, want)
		}
	}
	if bj.Status.State != "PENDING" {
		t.Errorf("state %s, want PENDING (the pod may still start once the image is there)", bj.Status.State)
	}
	e.waitEvent("nopull", "Warning", "PodCannotStart", "ImagePullBackOff")
}
