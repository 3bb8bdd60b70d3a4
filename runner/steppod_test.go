package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

func argoPod(node string) *corev1.Pod {
	ctrl := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name:        "p",
		Labels:      map[string]string{"workflows.argoproj.io/workflow": "wf"},
		Annotations: map[string]string{"workflows.argoproj.io/node-name": node},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: "wf",
			UID: types.UID("u-1"), Controller: &ctrl}},
	}}
}

// TestStepOwner: every attempt of a task has one owner; loop items, other
// tasks and other Workflows have others.
func TestStepOwner(t *testing.T) {
	first := runner.StepOwner(argoPod("wf.main.job(0:a).invoke(0)"))
	assert.Equal(t, "Workflow wf (uid u-1) node wf.main.job(0:a).invoke", first)
	assert.Equal(t, first, runner.StepOwner(argoPod("wf.main.job(0:a).invoke(2)")), "a retry is the same task")
	for _, other := range []string{"wf.main.job(1:b).invoke(0)", "wf.main.other(0:a).invoke(0)", "wf.main.job(0:a).invoke.x"} {
		assert.NotEqual(t, first, runner.StepOwner(argoPod(other)), other)
	}
	p := argoPod("wf.main.job(0:a).invoke(0)")
	p.OwnerReferences[0].UID = "u-2"
	assert.NotEqual(t, first, runner.StepOwner(p), "a Workflow of the same name made again")

	ctrl := true
	job := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-x",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "u-3", Controller: &ctrl}}}}
	assert.Equal(t, "Job j (uid u-3)", runner.StepOwner(job))
	job.Annotations = map[string]string{"batch.kubernetes.io/job-completion-index": "2"}
	assert.Equal(t, "Job j (uid u-3) index 2", runner.StepOwner(job))
	assert.Empty(t, runner.StepOwner(&corev1.Pod{}), "a bare pod has no owner")
}

// claimRun runs invokers with the given owners at once on one record and
// returns their errors.
func claimRun(t *testing.T, h *harness, owners ...string) []error {
	spec := h.spec(`{"run":"300ms"}`)
	errs := make([]error, len(owners))
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			iv := h.invoker(spec)
			iv.Owner = o
			errs[i] = iv.Run(context.Background())
		}()
	}
	wg.Wait()
	return errs
}

// testClaim: four loop items that share a job name start at once: one runs
// the job, the three others are refused with exit 2 before submitting, and
// the message says how to make the name unique. A retry of the first task
// re-attaches.
func testClaim(t *testing.T, store record.Store) {
	h := newHarness(t, store)
	owners := []string{"Workflow wf node wf.job(0:a)", "Workflow wf node wf.job(1:b)", "Workflow wf node wf.job(2:c)", "Workflow wf node wf.job(3:d)"}
	errs := claimRun(t, h, owners...)
	var winner string
	for i, err := range errs {
		if err == nil {
			assert.Empty(t, winner, "two invokers ran")
			winner = owners[i]
			continue
		}
		require.ErrorIs(t, err, backends.ErrInvalid)
		assert.Contains(t, err.Error(), "{{workflow.name}}-{{item}}")
		assert.Contains(t, err.Error(), owners[i])
	}
	require.NotEmpty(t, winner)
	assert.Equal(t, 1, h.fake.Count("submit"), "one job for the one task that owns the record")
	assert.Equal(t, winner, h.record()[record.KeyOwner])
	require.NoError(t, claimRun(t, h, winner)[0], "a retry of the owning task re-attaches")
	assert.Equal(t, 1, h.fake.Count("submit"))
	before := h.record()
	require.ErrorIs(t, claimRun(t, h, "Workflow other node other.job(0:a)")[0], backends.ErrInvalid)
	assert.Equal(t, before, h.record(), "a refused task writes nothing into a record another task owns")
	require.NoError(t, claimRun(t, h, "")[0], "an invoke that knows no owner (a laptop) is not checked")
}

func TestClaimFileStore(t *testing.T)      { testClaim(t, nil) }
func TestClaimConfigMapStore(t *testing.T) { testClaim(t, testkube.RecordStore(t)) }

// TestStepFactsReadsThePod: against the real apiserver, invoke reads its
// pod's owner and deadline (status.startTime + activeDeadlineSeconds), and
// ARGO_DEADLINE when it is earlier.
func TestStepFactsReadsThePod(t *testing.T) {
	c := testkube.Client(t)
	ns := testkube.Namespace(t, c)
	ctx := context.Background()
	// No controller-manager makes the namespace's default ServiceAccount.
	_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p := argoPod("wf.main.job(0:a).invoke(1)")
	p.OwnerReferences[0].UID = "u-9"
	p.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "x"}}, ActiveDeadlineSeconds: ptrTo(int64(300))}
	p, err = c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	start := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	p.Status.StartTime = &start
	_, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)

	t.Setenv("ARGO_DEADLINE", "0001-01-01T00:00:00Z") // what Argo sets when there is none
	owner, deadline, err := runner.StepFacts(ctx, testkube.KubeClient(t, testkube.Config(t)), ns, "p")
	require.NoError(t, err)
	assert.Equal(t, "Workflow wf (uid u-9) node wf.main.job(0:a).invoke", owner)
	assert.Equal(t, start.Add(300*time.Second), deadline)

	early := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	t.Setenv("ARGO_DEADLINE", early.Format(time.RFC3339))
	_, deadline, err = runner.StepFacts(ctx, testkube.KubeClient(t, testkube.Config(t)), ns, "p")
	require.NoError(t, err)
	assert.Equal(t, early, deadline.UTC())

	_, _, err = runner.StepFacts(ctx, testkube.KubeClient(t, testkube.Config(t)), ns, "no-such-pod")
	assert.Error(t, err)
}

// TestStopBeforeDeadline: a job still running near the pod's deadline is
// cancelled and reported KILLED before the deadline, while the pod is whole.
func TestStopBeforeDeadline(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"60s"}`))
	iv.Grace = time.Minute // capped by the margin
	iv.Deadline = time.Now().Add(6 * time.Second)
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.True(t, time.Now().Before(iv.Deadline), "ended %s after the deadline", time.Since(iv.Deadline))
	jobs := h.fake.Jobs()
	require.Len(t, jobs, 1)
	assert.NotNil(t, jobs[0].Cancelled, "the remote job was cancelled")
	assert.Contains(t, h.logs.String(), "deadline")
}

func ptrTo[T any](v T) *T { return &v }
