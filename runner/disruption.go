package runner

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// Disruption tells, after SIGTERM, a stop of the step from a disruption of
// its pod. Both arrive as SIGTERM, and Argo even deletes a stopped pod that
// its informer still sees Pending, so the signal alone says nothing; the
// objects that own the pod do. Only when this pod is being deleted (evicted,
// drained, kubectl delete pod) while its owner goes on and will run the step
// again is the job left running for the new pod to re-attach to. Everything
// else cancels: a stop or terminate (spec.shutdown), a deadline, a deleted
// or finished owner, no retry, or any doubt (an error, a missing grant).
//
// The Role needs get on pods, workflows.argoproj.io and jobs.batch; without
// them every SIGTERM cancels, which is safe.
type Disruption struct {
	Client    *kube.Client
	Namespace string
	Pod       string
}

// Detach reports whether the job should be left running for a retry, and
// why (or why not).
func (d *Disruption) Detach(ctx context.Context) (bool, string) {
	pod := &kube.Pod{}
	if err := d.Client.Get(ctx, kube.Pods, d.Namespace, d.Pod, pod); err != nil {
		return false, fmt.Sprintf("cannot read this pod %s/%s: %v", d.Namespace, d.Pod, err)
	}
	if pod.DeletionTimestamp == nil {
		return false, "the pod is not being deleted: the step itself is stopped"
	}
	owner := metav1.GetControllerOf(pod)
	switch {
	case owner == nil:
		return false, "the pod is being deleted and has no owner to run it again"
	case owner.APIVersion == "argoproj.io/v1alpha1" && owner.Kind == "Workflow":
		return d.workflowGoesOn(ctx, pod, owner)
	case owner.APIVersion == "batch/v1" && owner.Kind == "Job":
		return d.jobGoesOn(ctx, owner)
	}
	return false, fmt.Sprintf("the pod is being deleted and its owner %s %s does not retry invoke", owner.Kind, owner.Name)
}

// workflowGoesOn: the Workflow exists, is not being stopped, deleted or past
// its deadline, and runs this pod's node under a retry. (Argo does not retry
// after a shutdown or past the deadline; when the last attempt is used up,
// the exit handler's cleanup cancels the job.)
func (d *Disruption) workflowGoesOn(ctx context.Context, pod *kube.Pod, owner *metav1.OwnerReference) (bool, string) {
	wf := &kube.Workflow{}
	if err := d.Client.Get(ctx, kube.Workflows, d.Namespace, owner.Name, wf); err != nil {
		return false, fmt.Sprintf("cannot read workflow %s: %v", owner.Name, err)
	}
	name := "workflow " + owner.Name
	if wf.UID != owner.UID || wf.DeletionTimestamp != nil {
		return false, name + " was deleted or is being deleted"
	}
	if s := wf.Spec.Shutdown; s != "" {
		return false, fmt.Sprintf("%s is being shut down (spec.shutdown=%s)", name, s)
	}
	if p := wf.Status.Phase; p != "" && p != "Running" && p != "Pending" {
		return false, fmt.Sprintf("%s has ended (%s)", name, p)
	}
	if ads := wf.Spec.ActiveDeadlineSeconds; ads != nil {
		t, err := time.Parse(time.RFC3339, wf.Status.StartedAt)
		if *ads <= 0 || err != nil || !time.Now().Before(t.Add(time.Duration(*ads)*time.Second)) {
			return false, fmt.Sprintf("%s is past its deadline (activeDeadlineSeconds=%d)", name, *ads)
		}
	}
	node := pod.Annotations["workflows.argoproj.io/node-id"]
	for _, n := range wf.Status.Nodes {
		if n.Type == "Retry" && node != "" && slices.Contains(n.Children, node) {
			return true, fmt.Sprintf("the pod is being deleted (evicted, drained or deleted) while %s goes on and retries it", name)
		}
	}
	return false, fmt.Sprintf("the pod is being deleted and %s does not retry its node %q", name, node)
}

// jobGoesOn: the Job exists, is not being deleted, suspended, finished or
// past its deadline, and has a retry left for this pod's failure.
func (d *Disruption) jobGoesOn(ctx context.Context, owner *metav1.OwnerReference) (bool, string) {
	job := &kube.Job{}
	if err := d.Client.Get(ctx, kube.Jobs, d.Namespace, owner.Name, job); err != nil {
		return false, fmt.Sprintf("cannot read job %s: %v", owner.Name, err)
	}
	name := "job " + owner.Name
	switch {
	case job.UID != owner.UID || job.DeletionTimestamp != nil:
		return false, name + " was deleted or is being deleted"
	case job.Spec.Suspend != nil && *job.Spec.Suspend:
		return false, name + " is suspended"
	}
	for _, c := range job.Status.Conditions {
		if c.Status == "True" && c.Type != "Suspended" {
			return false, fmt.Sprintf("%s is ending (%s: %s)", name, c.Type, c.Reason)
		}
	}
	if ads := job.Spec.ActiveDeadlineSeconds; ads != nil && job.Status.StartTime != nil &&
		!time.Now().Before(job.Status.StartTime.Add(time.Duration(*ads)*time.Second)) {
		return false, fmt.Sprintf("%s is past its deadline (activeDeadlineSeconds=%d)", name, *ads)
	}
	// This pod's failure is counted too; the Job fails once failures exceed
	// the backoff limit.
	if limit := job.Spec.BackoffLimit; limit != nil && job.Status.Failed+1 > *limit {
		return false, fmt.Sprintf("%s has no retry left (failed %d, backoffLimit %d)", name, job.Status.Failed, *limit)
	}
	return true, fmt.Sprintf("the pod is being deleted (evicted, drained or deleted) while %s goes on and retries it", name)
}

// DisruptionFor returns what tells a disruption of this pod from a stop of
// the step, when the record is a ConfigMap seen from inside a pod; nil
// otherwise (then SIGTERM always cancels).
func DisruptionFor(s record.Store) *Disruption {
	cm, ok := s.(*record.ConfigMapStore)
	if !ok || !record.InCluster() {
		return nil
	}
	return &Disruption{Client: cm.Client, Namespace: record.PodNamespace(), Pod: record.PodName()}
}
