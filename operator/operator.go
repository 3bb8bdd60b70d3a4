// Package operator reconciles BridgeJobs (IBM's bridgejob.ibm.com/v1alpha1
// custom resource): for each it creates the record ConfigMap <name>-bridge-cm
// and a Job whose pod runs `bridge-runner invoke`, and mirrors the record's
// state into the BridgeJob's status. It is not a second state machine:
// invoke alone submits, follows and cancels; the operator writes only the
// job description and the kill flag into the record.
//
// It is built on client-go's informers and rate-limited work queue over
// client-go's REST client with small hand-written types (the generated
// clientset would link every API group into the binary), and on a Lease for
// leader election between replicas.
package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// Options configure the operator.
type Options struct {
	Config    *rest.Config
	Namespace string // watch BridgeJobs only here; "" for every namespace

	JobImage string // the jobs' pods' image: the operator's own
	// JobImagePullPolicy is how JobImage is pulled ("": Kubernetes'
	// default for its tag). A BridgeJob's spec.imagepullpolicy is IBM's
	// field for IBM's images: it applies only to an allowed spec.image.
	JobImagePullPolicy string
	// JobServiceAccount is a ServiceAccount every job's pod runs as; ""
	// (the default) gives each BridgeJob its own, allowed only its record.
	JobServiceAccount string
	StatusKeys        string // auto, ibm or ours: passed to invoke, and the words of status.jobstatus
	Backends          []string
	// SpecChecks are, by backend, the checks its pod would make of the
	// job's description alone (no credentials, no request; e.g.
	// quantum.CheckSpec): the operator refuses such a BridgeJob before it
	// makes a Job.
	SpecChecks map[string]func(backends.Job) error
	// Registry builds backends to read the load measures the clusters'
	// agents publish (LoadPublisher.LoadFrom, no request); nil shows none.
	Registry *backends.Registry
	// DefaultBackend is the backend of a BridgeJob that names none (the
	// operator's --backend or BRIDGE_BACKEND), chosen as invoke chooses.
	DefaultBackend string

	// The tenancy policy (see policy.go): what a BridgeJob's author may
	// reach through the operator.
	AllowedImages  []string // images a BridgeJob's spec.image may name besides JobImage
	AllowedSecrets []string // Secrets usable without opting in: name or namespace/name
	SecretOptIn    string   // the label a Secret opts in with ("true"); "" reads no Secret at all
	AllowLocal     bool     // let BridgeJobs run the local backend (in the Job's pod)

	Workers       int
	Resync        time.Duration // how often every BridgeJob is reconciled anyway
	DeleteTimeout time.Duration // how long a deleted BridgeJob waits for its job to stop
	StartCheck    time.Duration // how often the pods of a Job with no job yet are looked at

	// MetricsAddr is where /metrics, /healthz and /readyz are served
	// ("" or "0": nowhere); MetricsListener, when set, instead.
	MetricsAddr     string
	MetricsListener net.Listener

	LeaderElection bool
	LeaseNamespace string
	LeaseName      string
	Identity       string

	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Resync <= 0 {
		o.Resync = 10 * time.Minute
	}
	if o.DeleteTimeout <= 0 {
		o.DeleteTimeout = 2 * time.Minute
	}
	if o.StartCheck <= 0 {
		o.StartCheck = 15 * time.Second
	}
	if o.StatusKeys == "" {
		o.StatusKeys = "auto"
	}
	if o.LeaseName == "" {
		o.LeaseName = "bridge-runner-operator"
	}
	if o.Identity == "" {
		h, _ := os.Hostname()
		o.Identity = fmt.Sprintf("%s_%d", h, os.Getpid())
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// LabelName marks the children of a BridgeJob with its name; the operator
// watches only ConfigMaps and Jobs that carry it.
const LabelName = "bridgejob.ibm.com/name"

// Finalizer holds a deleted BridgeJob until its remote job is cancelled.
const Finalizer = "bridgejob.ibm.com/cancel"

// Run runs the operator until ctx ends (nil) or it loses its Lease (an
// error: start over).
func Run(ctx context.Context, o Options) error {
	o.defaults()
	c, err := newClient(o.Config)
	if err != nil {
		return err
	}
	if o.LeaderElection && o.LeaseNamespace == "" {
		return errors.New("leader election needs the Lease's namespace (--lease-namespace, or POD_NAMESPACE)")
	}
	m := newOpMetrics()
	c.OnAnswer(m.kubeAnswer)
	r := &reconciler{c: c, o: o, log: o.Log, m: m}
	l, err := o.listen()
	if err != nil {
		return err
	}
	if l != nil {
		sctx, stop := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() { defer close(served); m.serve(sctx, l) }()
		defer func() { stop(); <-served }()
	}
	if !o.LeaderElection {
		r.run(ctx)
		return nil
	}
	m.standby.Store(true)
	e := &elector{c: c, namespace: o.LeaseNamespace, name: o.LeaseName, identity: o.Identity, log: o.Log,
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	return e.run(ctx, func(ctx context.Context) {
		m.standby.Store(false)
		r.run(ctx)
	})
}

// run starts the informers and workers and blocks until ctx ends; then it
// drains the queue and waits for the workers.
func (r *reconciler) run(ctx context.Context) {
	r.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "bridgejobs"})
	r.recheck = workqueue.NewTypedItemExponentialFailureRateLimiter[string](recheckMin, recheckMax)
	r.cqueue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "bridgeclusters"})
	sel := LabelName
	r.jobs = r.informer(BridgeJobs, "", func() runtime.Object { return &BridgeJobList{} }, &BridgeJob{}, r.enqueue)
	r.cms = r.informer(kube.ConfigMaps, sel, func() runtime.Object { return &kube.ConfigMapList{} }, &kube.ConfigMap{}, r.enqueueOwner)
	r.kjobs = r.informer(kube.Jobs, sel, func() runtime.Object { return &kube.JobList{} }, &kube.Job{}, r.enqueueOwner)
	r.clusters = r.informer(BridgeClusters, "", func() runtime.Object { return &BridgeClusterList{} }, &BridgeCluster{}, r.clusterChanged)
	r.deploys = r.informer(Deployments, record.LabelManagedBy+"="+managedByOperator, func() runtime.Object { return &DeploymentList{} }, &Deployment{}, r.enqueueCluster)
	// Every other record bridge-runner made (workflow steps', plain
	// invokes'), without a BridgeJob's (counted through r.cms): the same
	// series, each record counted once.
	r.steps = r.informer(kube.ConfigMaps, record.LabelManagedBy+"=bridge-runner,!"+LabelName,
		func() runtime.Object { return &kube.ConfigMapList{} }, &kube.ConfigMap{}, func(any) {})
	r.m.records.watch(r.cms)
	r.m.records.watch(r.steps)
	r.watchPlacements(r.cms)
	r.beats = r.watchAgentBeats()
	var wg sync.WaitGroup
	for _, inf := range []cache.SharedIndexInformer{r.jobs, r.cms, r.kjobs, r.clusters, r.deploys, r.steps, r.beats} {
		wg.Add(1)
		go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	}
	if !cache.WaitForCacheSync(ctx.Done(), r.jobs.HasSynced, r.cms.HasSynced, r.kjobs.HasSynced, r.clusters.HasSynced, r.deploys.HasSynced) {
		r.queue.ShutDown()
		r.cqueue.ShutDown()
		wg.Wait()
		return
	}
	r.m.r.Store(r)
	r.m.leader.Set(1)
	defer r.m.leader.Set(0)
	r.log.Info("operator started", "namespace", orAll(r.o.Namespace), "workers", r.o.Workers)
	for range r.o.Workers {
		wg.Add(1)
		go func() { defer wg.Done(); r.work(ctx) }()
	}
	// One worker writes the BridgeClusters' status: a status write is
	// rare (a new placement) and cheap.
	wg.Add(1)
	go func() { defer wg.Done(); r.workClusters(ctx) }()
	<-ctx.Done()
	r.queue.ShutDownWithDrain()
	r.cqueue.ShutDownWithDrain()
	wg.Wait()
	r.log.Info("operator stopped", "kube_requests", r.c.Requests(), "retries", r.retries.Load())
}

// result names a reconcile's outcome for the metrics.
func result(err error) string {
	switch {
	case err == nil:
		return "success"
	case apierrors.IsConflict(err):
		return "conflict"
	}
	return "error"
}

func orAll(ns string) string {
	if ns == "" {
		return "(all)"
	}
	return ns
}

func (r *reconciler) informer(res kube.Resource, selector string, list func() runtime.Object,
	obj runtime.Object, on func(any)) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(r.c.ListWatch(res, r.o.Namespace, selector, list), obj, r.o.Resync, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, n any) { on(n) },
		DeleteFunc: on,
	})
	return inf
}

func (r *reconciler) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		r.queue.Add(key)
	}
}

// enqueueOwner queues the BridgeJob that controls a ConfigMap or Job.
func (r *reconciler) enqueueOwner(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if o := metav1.GetControllerOf(m); o != nil && o.Kind == "BridgeJob" && o.APIVersion == GroupVersion.String() {
		r.queue.Add(m.GetNamespace() + "/" + o.Name)
	}
}

// work reconciles queued BridgeJobs: an error requeues with the queue's
// rate limit (per-item exponential backoff, overall token bucket), so a
// failing BridgeJob never spins.
func (r *reconciler) work(ctx context.Context) {
	for {
		key, quit := r.queue.Get()
		if quit {
			return
		}
		start := time.Now()
		after, err := r.reconcile(ctx, key)
		r.m.observeReconcile(start, result(err))
		switch {
		case apierrors.IsConflict(err):
			// A newer version of what was written exists; its watch event
			// queues the key again, so a retry now would only conflict again.
			r.queue.Forget(key)
			r.retries.Add(1)
		case apierrors.IsForbidden(err):
			// Not a fault that passes: the namespace's admin must grant it.
			r.retries.Add(1)
			r.grantMissing(ctx, key, err)
			r.queue.Forget(key)
			r.queue.AddAfter(key, grantRetry)
		case err != nil:
			r.retries.Add(1)
			r.log.Warn("reconcile failed; retrying", "bridgejob", key, "err", err)
			r.queue.AddRateLimited(key)
		case after > 0:
			r.queue.Forget(key)
			r.queue.AddAfter(key, after)
		default:
			r.queue.Forget(key)
		}
		r.queue.Done(key)
	}
}
