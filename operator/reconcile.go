package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

type reconciler struct {
	c     *kube.Client
	o     Options
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[string]
	// cqueue holds BridgeClusters whose status may be behind (clusterstatus.go).
	cqueue workqueue.TypedRateLimitingInterface[string]

	jobs, cms, kjobs cache.SharedIndexInformer
	// steps are the records of workflow steps (and of plain invokes): the
	// records bridge-runner made that no BridgeJob owns, for the metrics.
	steps    cache.SharedIndexInformer
	clusters cache.SharedIndexInformer // BridgeClusters
	deploys  cache.SharedIndexInformer // the clusters' agents (agent.go)
	beats    cache.SharedIndexInformer // the agents' heartbeats (clusterload.go)
	// beatKeys holds, by cluster, the key its agent's heartbeat verifies
	// under (a beatKey).
	beatKeys sync.Map
	// agentAccess and agentSecret remember, by cluster, for what its
	// agent's ServiceAccount and grants were made and its Secret was
	// checked, and when (agentMemo).
	agentAccess, agentSecret sync.Map

	retries atomic.Int64 // reconciles that failed (conflicts included)
	m       *opMetrics

	// recheck spaces the looks at BridgeJobs refused for a Secret
	// (secretFault), per BridgeJob: doubling from recheckMin to recheckMax.
	recheck workqueue.TypedRateLimiter[string]
}

// A BridgeJob refused for a Secret is looked at again after recheckMin,
// doubling to recheckMax (a ceiling, jitter included): the Secret's owner
// labels or binds it in their own time, and the operator cannot watch
// Secrets (its ClusterRole reads none), so it asks again; each look is one
// GET of that Secret.
const (
	recheckMin = time.Second
	recheckMax = 30 * time.Second
)

// errRecheck: the BridgeJob was refused for a Secret and is to be looked
// at again (recheck).
var errRecheck = errors.New("refused for a Secret; looking again later")

// pollDeleting is how often a deleted BridgeJob's cancellation is looked at
// besides the record's watch events.
const pollDeleting = 2 * time.Second

// reconcile brings one BridgeJob's children and status in line with its
// spec and its record; it reads only the informers' caches and writes only
// what differs, so running it again changes nothing (level-triggered).
func (r *reconciler) reconcile(ctx context.Context, key string) (time.Duration, error) {
	after, err := r.reconcileOnce(ctx, key)
	if errors.Is(err, errRecheck) {
		return r.recheckAfter(key), nil
	}
	if err == nil {
		r.recheck.Forget(key)
	}
	return after, err
}

// recheckAfter is when to look again at a BridgeJob refused for a Secret:
// the key's back-off with up to a quarter of jitter, within recheckMax.
func (r *reconciler) recheckAfter(key string) time.Duration {
	d := r.recheck.When(key)
	return min(d+rand.N(d/4+1), recheckMax)
}

func (r *reconciler) reconcileOnce(ctx context.Context, key string) (time.Duration, error) {
	obj, ok, err := r.jobs.GetStore().GetByKey(key)
	if err != nil || !ok {
		return 0, err // gone: its children went with it
	}
	bj := obj.(*BridgeJob).DeepCopyObject().(*BridgeJob)
	if bj.DeletionTimestamp != nil {
		return r.finalize(ctx, bj)
	}
	if !slices.Contains(bj.Finalizers, Finalizer) {
		bj.Finalizers = append(bj.Finalizers, Finalizer)
		out := &BridgeJob{}
		if err := r.c.Update(ctx, BridgeJobs, bj.Namespace, bj.Name, bj, out); err != nil {
			return 0, err
		}
		bj = out
	}
	cm, err := r.ensureRecord(ctx, bj)
	if err != nil || cm == nil {
		return 0, err
	}
	if err := r.ensureKill(ctx, bj, cm); err != nil {
		return 0, err
	}
	kj, stop, err := r.ensureJob(ctx, bj, cm)
	if err != nil || stop {
		return 0, err
	}
	s := r.observe(bj, cm, kj)
	after := r.checkStart(ctx, bj, kj, &s)
	return after, r.mirror(ctx, bj, s)
}

// ensureRecord returns the BridgeJob's record, creating it from a valid
// spec. A spec found bad sets FAILED and returns no record: nothing is
// created until the spec (or a missing Secret) is fixed.
func (r *reconciler) ensureRecord(ctx context.Context, bj *BridgeJob) (*kube.ConfigMap, error) {
	name := record.ConfigMapName(bj.Name)
	if cm := r.cached(r.cms, bj.Namespace, name); cm != nil {
		cm := cm.(*kube.ConfigMap)
		if !ownedBy(cm, bj) {
			return nil, r.fail(ctx, bj, "RecordConflict", fmt.Sprintf("the ConfigMap %s exists and is not this BridgeJob's; delete it or rename the BridgeJob", name))
		}
		return cm, nil
	}
	data, secrets, err := r.validate(ctx, bj)
	if err != nil {
		return nil, r.refuse(ctx, bj, err)
	}
	cm := &kube.ConfigMap{Data: data}
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	cm.Name, cm.Namespace = name, bj.Namespace
	cm.Labels = childLabels(bj)
	cm.OwnerReferences = []metav1.OwnerReference{ownerRef(bj)}
	// A BridgeJob on one cluster is that cluster's: its agent serves the
	// records labelled with it. One placed among several is not labelled
	// (the place is chosen by invoke, after the record is made) unless
	// spec.cluster names the agent that follows it.
	if c := agentCluster(bj); c != "" {
		cm.Data[record.KeyCluster] = c
		cm.Labels[LabelCluster] = c
	}
	if len(secrets) > 0 {
		raw, _ := json.Marshal(secrets) // a map of strings always marshals
		cm.Annotations = map[string]string{AnnotationClusterSecrets: string(raw)}
	}
	out := &kube.ConfigMap{}
	err = r.c.Create(ctx, kube.ConfigMaps, bj.Namespace, cm, out)
	if apierrors.IsAlreadyExists(err) {
		// Created by an earlier pass that the cache has not seen yet.
		if err = r.c.Get(ctx, kube.ConfigMaps, bj.Namespace, name, out); err == nil {
			if !ownedBy(out, bj) {
				return nil, r.fail(ctx, bj, "RecordConflict", fmt.Sprintf("the ConfigMap %s exists and is not this BridgeJob's; delete it or rename the BridgeJob", name))
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ensureKill copies spec.kill into the record; invoke cancels the job.
func (r *reconciler) ensureKill(ctx context.Context, bj *BridgeJob, cm *kube.ConfigMap) error {
	if !bj.Spec.Kill || cm.Data[record.KeyKill] == "true" || isFinal(cm.Data[record.KeyJobStatus]) {
		return nil
	}
	if err := r.setKill(ctx, cm); err != nil {
		return err
	}
	r.event(ctx, bj, "Normal", "Killing", "spec.kill is true: asked the job to cancel")
	return nil
}

func (r *reconciler) setKill(ctx context.Context, cm *kube.ConfigMap) error {
	next := cm.DeepCopyObject().(*kube.ConfigMap)
	next.APIVersion, next.Kind = "v1", "ConfigMap"
	if next.Data == nil {
		next.Data = map[string]string{}
	}
	next.Data[record.KeyKill] = "true"
	// resourceVersion makes this a compare-and-swap: a conflict (invoke
	// wrote meanwhile) requeues and reads the newer record.
	return r.c.Update(ctx, kube.ConfigMaps, cm.Namespace, cm.Name, next, cm)
}

// ensureJob creates the Job that runs invoke, unless the record is final
// already (nothing left to run) or the Job exists. stop: the BridgeJob was
// failed instead (its pods' identity is taken).
func (r *reconciler) ensureJob(ctx context.Context, bj *BridgeJob, cm *kube.ConfigMap) (kj *kube.Job, stop bool, err error) {
	name := JobName(bj.Name)
	if kj, _ := r.cached(r.kjobs, bj.Namespace, name).(*kube.Job); kj != nil {
		if !ownedBy(kj, bj) {
			return nil, true, r.fail(ctx, bj, "JobConflict", fmt.Sprintf("the Job %s exists and is not this BridgeJob's; delete it or rename the BridgeJob", name))
		}
		return kj, false, nil
	}
	if isFinal(cm.Data[record.KeyJobStatus]) {
		return nil, false, nil
	}
	if stop, err := r.ensurePodAccess(ctx, bj); stop || err != nil {
		return nil, stop, err
	}
	mounts, err := r.checkMounts(ctx, bj, cm)
	if stop, err := r.refuseMounts(ctx, bj, err); stop || err != nil {
		return nil, stop, err
	}
	out := &kube.Job{}
	err = r.c.Create(ctx, kube.Jobs, bj.Namespace, r.buildJob(bj, mounts), out)
	if apierrors.IsAlreadyExists(err) {
		// Created by an earlier pass that the cache has not seen yet.
		return out, false, r.c.Get(ctx, kube.Jobs, bj.Namespace, name, out)
	}
	if err != nil {
		return nil, false, err
	}
	r.m.created.Inc(cm.Data["backend"])
	if _, ignored := r.jobImage(bj); ignored != "" {
		r.event(ctx, bj, "Warning", "ImageIgnored", fmt.Sprintf("spec.image %q is ignored: the Job runs %s, which serves every backend "+
			"(the operator's admin allows other images with --allowed-images)", ignored, r.o.JobImage))
	}
	r.event(ctx, bj, "Normal", "Created", "created the record "+cm.Name+" and the Job "+name+" that runs bridge-runner invoke")
	return out, false, nil
}

// ensurePodAccess makes the BridgeJob's own ServiceAccount for its pods
// (unless the admin gave one for all); stop: it failed the BridgeJob.
func (r *reconciler) ensurePodAccess(ctx context.Context, bj *BridgeJob) (stop bool, err error) {
	if r.o.JobServiceAccount != "" {
		return false, nil
	}
	err = r.ensureAccess(ctx, bj)
	var ac *accessConflict
	if errors.As(err, &ac) {
		return true, r.fail(ctx, bj, "AccessConflict", ac.Error())
	}
	return false, err
}

// refuseMounts fails the BridgeJob when its record's cluster Secrets may
// not be mounted (stop); any other error is transient.
func (r *reconciler) refuseMounts(ctx context.Context, bj *BridgeJob, err error) (stop bool, _ error) {
	var fe *fieldError
	if errors.As(err, &fe) {
		return true, r.refuse(ctx, bj, err)
	}
	return false, err
}

// refuse fails the BridgeJob for a bad spec (a *fieldError; errRecheck
// when a Secret's owner can fix it) and returns any other error as it is
// (transient).
func (r *reconciler) refuse(ctx context.Context, bj *BridgeJob, err error) error {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return err
	}
	if err := r.fail(ctx, bj, "InvalidSpec", fe.Error()); err != nil {
		return err
	}
	var sf secretFault
	if errors.As(err, &sf) {
		return errRecheck
	}
	return nil
}

// finalize cancels a deleted BridgeJob's job (kill=true in the record,
// which the running invoke obeys), waits for a final state up to
// DeleteTimeout, then deletes the children and lets the BridgeJob go.
func (r *reconciler) finalize(ctx context.Context, bj *BridgeJob) (time.Duration, error) {
	if !slices.Contains(bj.Finalizers, Finalizer) {
		return 0, nil
	}
	// Only what this BridgeJob owns is updated or deleted: a ConfigMap or
	// Job of the same name that someone else made is left alone.
	var cm *kube.ConfigMap
	if o, _ := r.cached(r.cms, bj.Namespace, record.ConfigMapName(bj.Name)).(*kube.ConfigMap); o != nil && ownedBy(o, bj) {
		cm = o
	}
	var kj *kube.Job
	if o, _ := r.cached(r.kjobs, bj.Namespace, JobName(bj.Name)).(*kube.Job); o != nil && ownedBy(o, bj) {
		kj = o
	}
	if cm != nil && !isFinal(cm.Data[record.KeyJobStatus]) {
		if after, err := r.cancel(ctx, bj, cm, kj); after > 0 || err != nil {
			return after, err
		}
	}
	if cj, _ := r.cached(r.kjobs, bj.Namespace, CleanupName(bj.Name)).(*kube.Job); cj != nil && ownedBy(cj, bj) {
		if err := r.c.Delete(ctx, kube.Jobs, bj.Namespace, cj.Name, cj.UID); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	if kj != nil {
		if err := r.c.Delete(ctx, kube.Jobs, bj.Namespace, kj.Name, kj.UID); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	if cm != nil {
		if err := r.c.Delete(ctx, kube.ConfigMaps, bj.Namespace, cm.Name, cm.UID); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	bj.Finalizers = slices.DeleteFunc(bj.Finalizers, func(f string) bool { return f == Finalizer })
	err := r.c.Update(ctx, BridgeJobs, bj.Namespace, bj.Name, bj, &BridgeJob{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	return 0, err
}

// cancel asks a deleted BridgeJob's job to stop and says how long to wait
// for it (0: stop waiting). First kill=true in the record, which the
// running invoke obeys; when no invoke runs (its Job ended) or it did not
// answer within DeleteTimeout, a cleanup Job, which cancels the remote job
// with the credentials and deletes the record; after that one has had
// DeleteTimeout as well, a Warning, and the BridgeJob goes anyway.
func (r *reconciler) cancel(ctx context.Context, bj *BridgeJob, cm *kube.ConfigMap, kj *kube.Job) (time.Duration, error) {
	if cm.Data[record.KeyKill] != "true" {
		if err := r.setKill(ctx, cm); err != nil {
			return 0, err
		}
		r.event(ctx, bj, "Normal", "Cancelling", "the BridgeJob is being deleted: asked the job to cancel")
	}
	waited := time.Since(bj.DeletionTimestamp.Time)
	if kj != nil && jobRunning(kj) && waited < r.o.DeleteTimeout {
		return pollDeleting, nil
	}
	if cm.Data[record.KeyID] == "" && cm.Data[record.KeyIntent] == "" {
		return 0, nil // nothing was submitted, nothing to cancel
	}
	cj, _ := r.cached(r.kjobs, bj.Namespace, CleanupName(bj.Name)).(*kube.Job)
	if cj == nil {
		if stop, err := r.ensurePodAccess(ctx, bj); stop || err != nil {
			return 0, err
		}
		mounts, err := r.checkMounts(ctx, bj, cm)
		if stop, err := r.refuseMounts(ctx, bj, err); stop || err != nil {
			return 0, err
		}
		err = r.c.Create(ctx, kube.Jobs, bj.Namespace, r.buildCleanup(bj, mounts), &kube.Job{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, err
		}
		r.event(ctx, bj, "Normal", "CleanupStarted", "no invoke confirmed the cancellation: started the Job "+CleanupName(bj.Name)+" (bridge-runner cleanup)")
		return pollDeleting, nil
	}
	if jobRunning(cj) && waited < 2*r.o.DeleteTimeout {
		return pollDeleting, nil
	}
	r.event(ctx, bj, "Warning", "CancelUnconfirmed", fmt.Sprintf(
		"no final state after kill and cleanup (state %q); the remote job %q may still run", cm.Data[record.KeyJobStatus], cm.Data[record.KeyID]))
	return 0, nil
}

// jobRunning: the Job has not finished (its pod may be running invoke).
func jobRunning(kj *kube.Job) bool {
	typ, _, _ := kj.Finished()
	return typ == ""
}

func (r *reconciler) cached(inf cache.SharedIndexInformer, ns, name string) any {
	o, ok, _ := inf.GetStore().GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	return o
}

func isFinal(st string) bool { return ourState(st).Final() }

// ourState turns a record's state word (IBM's KILL too) into ours.
func ourState(st string) backends.State { return record.StateOf(st) }

func ownerRef(bj *BridgeJob) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: GroupVersion.String(), Kind: "BridgeJob", Name: bj.Name, UID: bj.UID,
		Controller: &t, BlockOwnerDeletion: &t}
}

func childLabels(bj *BridgeJob) map[string]string {
	return map[string]string{
		LabelName:             labelValue(bj.Name),
		record.LabelManagedBy: "bridge-runner",
		record.LabelJob:       labelValue(bj.Name),
	}
}

func labelValue(v string) string {
	if len(v) > 63 {
		v = v[:63]
	}
	return v
}

// JobName is the name of the Job that runs a BridgeJob's invoke.
func JobName(bridgeJob string) string { return bridgeJob + "-bridge-job" }

// CleanupName is the name of the Job that runs a deleted BridgeJob's cleanup.
func CleanupName(bridgeJob string) string { return bridgeJob + "-bridge-cleanup" }
