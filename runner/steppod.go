package runner

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// Argo's pod annotation with the pod's node name, e.g.
// wf-x.main.job(1:b).invoke(0): the task path, a loop item's (index:item),
// and for a retried template the attempt's (N).
const argoNodeName = "workflows.argoproj.io/node-name"

// retryAttempt is the attempt suffix Argo gives the children of a Retry
// node; loop items have a colon, (0:a), so they keep theirs.
var retryAttempt = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\(\d+\)$`) })

// StepOwner names the task a pod runs for, the same for every attempt of the
// task and different for every other task: the Argo node (Workflow UID and
// node name without the retry attempt; KFP runs on Argo too), else the
// controlling object (a Job, plus the completion index of an indexed Job).
// "" when the pod says nothing (a bare pod).
func StepOwner(pod metav1.Object) string {
	ref := metav1.GetControllerOf(pod)
	if node := pod.GetAnnotations()[argoNodeName]; node != "" {
		wf := pod.GetLabels()["workflows.argoproj.io/workflow"]
		uid := ""
		if ref != nil {
			wf, uid = ref.Name, string(ref.UID)
		}
		return fmt.Sprintf("Workflow %s (uid %s) node %s", wf, uid, retryAttempt().ReplaceAllString(node, ""))
	}
	if ref == nil {
		return ""
	}
	s := fmt.Sprintf("%s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
	if i := pod.GetAnnotations()["batch.kubernetes.io/job-completion-index"]; i != "" {
		s += " index " + i
	}
	return s
}

// podDeadline is when Kubernetes stops the pod for its activeDeadlineSeconds
// (set by Argo from a template's or the Workflow's deadline, by KFP's
// set_timeout, or by hand); zero when it has none.
func podDeadline(pod *kube.Pod) time.Time {
	if pod.Spec.ActiveDeadlineSeconds == nil || pod.Status.StartTime == nil {
		return time.Time{}
	}
	return pod.Status.StartTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
}

// ArgoDeadline is the deadline Argo gives the step in ARGO_DEADLINE (the
// Workflow's deadline, or a retry's maxDuration); zero when there is none.
func ArgoDeadline() time.Time {
	t, err := time.Parse(time.RFC3339, os.Getenv("ARGO_DEADLINE"))
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// StepFacts reads this pod once (client may be nil outside a cluster) and
// returns its owner and the earliest deadline it is under. What cannot be
// read is left empty: no owner check, or no early stop.
func StepFacts(ctx context.Context, client *kube.Client, namespace, name string) (owner string, deadline time.Time, err error) {
	deadline = ArgoDeadline()
	if client == nil || name == "" {
		return "", deadline, nil
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pod := &kube.Pod{}
	if err := client.Get(rctx, kube.Pods, namespace, name, pod); err != nil {
		return "", deadline, fmt.Errorf("reading this pod %s/%s: %w", namespace, name, err)
	}
	if d := podDeadline(pod); !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	return StepOwner(pod), deadline, nil
}

// claim records r.Owner in the record on first use and refuses a record
// that another task already used: inside a loop, tasks that share a job name
// would otherwise share one remote job and all report its outcome. A refused
// task leaves that record as it found it (r.foreign): its reason is its own.
func (r *run) claim(ctx context.Context) error {
	if r.Owner == "" {
		return nil
	}
	return retryTransient(ctx, r.RetryBudget, func(ctx context.Context) error {
		return r.update(ctx, func(d map[string]string) (bool, error) {
			switch cur := d[record.KeyOwner]; {
			case cur == r.Owner:
				return false, nil
			case mayClaim(cur, r.Owner):
				d[record.KeyOwner] = r.Owner
				return true, nil
			default:
				r.foreign = true
				return false, backends.Invalid("job-name", "%s is already used by %s, and this step is %s: "+
					"each task needs its own job name. Inside withItems or withParam add the item to it "+
					"(job_name: {{workflow.name}}-{{item}}); in a KFP dsl.ParallelFor add the loop item to the run id. "+
					"If that task is gone, delete its record first (bridge-runner cleanup --job-name %s)",
					r.Store.Describe(), cur, r.Owner, r.JobName)
			}
		})
	})
}

// mayClaim reports whether the task owner may use a record whose
// status.owner is cur: nobody's yet, its own, or only its run's (stamped
// when the run created the record; record.ConfigMapStore.Run).
func mayClaim(cur, owner string) bool {
	return cur == "" || cur == owner || cur == RunOf(owner)
}

// deadlineMargin bounds how long before the pod's deadline invoke stops.
const deadlineMargin = 20 * time.Second

// stopBeforeDeadline stops invoke, as SIGTERM would, a margin before
// r.Deadline. At the deadline the kubelet stops every container of the pod
// at once, and Argo's wait container then saves the step's outputs before
// invoke has cancelled the job and written them: the outputs came out empty.
// Stopping first lets invoke cancel the job and write KILLED while the pod
// is still whole. The margin is a quarter of the time left, at most 20 s,
// and cancelling may then take three quarters of it (the run's copy of
// Grace is lowered to that; the Invoker itself is left as it is).
func (r *run) stopBeforeDeadline(ctx context.Context) (context.Context, func()) {
	if r.Deadline.IsZero() {
		return ctx, func() {}
	}
	left := time.Until(r.Deadline)
	margin := min(deadlineMargin, max(left/4, time.Second))
	r.Grace = min(r.Grace, max(margin*3/4, time.Second))
	cctx, cancel := context.WithCancelCause(ctx)
	cause := fmt.Errorf("%w: the pod's deadline %s is %s away", ErrTerminated, r.Deadline.UTC().Format(time.RFC3339), margin.Round(time.Second))
	t := time.AfterFunc(left-margin, func() {
		r.Log.Info("stopping before the pod's deadline", "deadline", r.Deadline, "margin", margin)
		cancel(cause)
	})
	return cctx, func() { t.Stop(); cancel(nil) }
}

// TaskOwner names the task this process runs for (StepOwner) when the
// record is a ConfigMap and a pod is named: the pod ARGO_POD_NAME or
// POD_NAME names (as SetRecordOwner reads it), else this pod inside a
// cluster. "" with no error when there is no pod to read (a laptop, a
// shell, a file record): a person's command is not a task, and nothing is
// compared.
func TaskOwner(ctx context.Context, s record.Store) (string, error) {
	cm, ok := s.(*record.ConfigMapStore)
	if !ok {
		return "", nil
	}
	name, ns := cmp.Or(os.Getenv("ARGO_POD_NAME"), os.Getenv("POD_NAME")), cm.Namespace
	if name == "" && record.InCluster() {
		name, ns = record.PodName(), cmp.Or(record.PodNamespace(), ns)
	}
	if name == "" {
		return "", nil
	}
	owner, _, err := StepFacts(ctx, cm.Client, ns, name)
	return owner, err
}
