package operator

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// A BridgeCluster's status is what the newest placement of a BridgeJob of
// its namespace saw of it: invoke probes the targets before each first
// submit and records the figures in status.placement of the record, which
// the operator watches already. So the status costs the clusters nothing
// (the operator sends no probe of its own) and the operator needs no
// cluster's credentials (those stay in the pods that mount them). The
// price: the figures are as fresh as the namespace's newest placement;
// status.load, from the cluster's agent (clusterload.go), is fresh
// without one.

// clusterChanged queues the cluster's status, and the BridgeJobs of its
// namespace that list it and have no record yet: one refused for a cluster
// that did not exist is tried again when it appears.
func (r *reconciler) clusterChanged(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	r.cqueue.Add(key)
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	for _, o := range r.jobs.GetStore().List() {
		bj := o.(*BridgeJob)
		if bj.Namespace == ns && slices.Contains(bj.Spec.Clusters, name) && r.cached(r.cms, ns, record.ConfigMapName(bj.Name)) == nil {
			r.enqueue(bj)
		}
	}
}

// watchPlacements queues the clusters a record's targets came from
// whenever the record changes (its placement is written once per run).
func (r *reconciler) watchPlacements(inf cache.SharedIndexInformer) {
	on := func(obj any) {
		cm, ok := obj.(*kube.ConfigMap)
		if !ok || cm.Data[record.KeyPlacement] == "" {
			return
		}
		for _, t := range recordTargets(cm) {
			if t.Credentials == clusterCredentials(t.Name) {
				r.cqueue.Add(cm.Namespace + "/" + t.Name)
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, n any) { on(n) }})
}

func recordTargets(cm *kube.ConfigMap) []record.Target {
	var ts []record.Target
	_ = json.Unmarshal([]byte(cm.Data["targets"]), &ts) // the operator wrote it; anything else counts as none
	return ts
}

// workClusters writes queued clusters' status until the queue shuts down.
func (r *reconciler) workClusters(ctx context.Context) {
	for {
		key, quit := r.cqueue.Get()
		if quit {
			return
		}
		err := r.syncCluster(ctx, key)
		switch {
		case apierrors.IsConflict(err) || err == nil:
			// A conflict: the cluster changed, and its watch event queues it.
			r.cqueue.Forget(key)
		default:
			r.log.Warn("updating a BridgeCluster's status failed; retrying", "bridgecluster", key, "err", err)
			r.cqueue.AddRateLimited(key)
		}
		r.cqueue.Done(key)
	}
}

// syncCluster keeps the cluster's agent (agentsync.go) and writes the
// cluster's status if it differs from what the records and the agent say.
func (r *reconciler) syncCluster(ctx context.Context, key string) error {
	o, ok, err := r.clusters.GetStore().GetByKey(key)
	if err != nil || !ok {
		return err
	}
	bc := o.(*BridgeCluster).DeepCopyObject().(*BridgeCluster)
	if bc.DeletionTimestamp != nil {
		return r.finalizeCluster(ctx, bc)
	}
	v, err := r.syncAgent(ctx, bc)
	if err != nil {
		return err
	}
	if v.after > 0 {
		r.cqueue.AddAfter(key, v.after)
	}
	s := r.clusterStatus(bc)
	s.Agent, s.Conditions = v.status, r.agentConditions(ctx, bc, v.conds)
	s.Load = r.clusterLoad(ctx, bc, v.backend)
	if reflect.DeepEqual(kube.JSONCopy(&s), kube.JSONCopy(&bc.Status)) {
		return nil
	}
	bc.Status = s
	bc.APIVersion, bc.Kind = GroupVersion.String(), "BridgeCluster"
	return r.c.Update(ctx, BridgeClusters, bc.Namespace, bc.Name, bc, &BridgeCluster{}, "status")
}

// seen is one record's placement as it concerns one cluster.
type seen struct {
	job    string
	placed *record.Placed
	probe  record.Probe
}

// clusterStatus is the cluster's status from the newest probe of it among
// the records of its namespace, and the newest placement that chose it.
func (r *reconciler) clusterStatus(bc *BridgeCluster) BridgeClusterStatus {
	var newest, chosen *seen
	for _, o := range r.cms.GetStore().List() {
		cm := o.(*kube.ConfigMap)
		if cm.Namespace != bc.Namespace {
			continue
		}
		sn := clusterProbe(cm, bc)
		if sn == nil {
			continue
		}
		if newest == nil || sn.placed.At.After(newest.placed.At) {
			newest = sn
		}
		if sn.placed.Target == bc.Name && (chosen == nil || sn.placed.At.After(chosen.placed.At)) {
			chosen = sn
		}
	}
	s := BridgeClusterStatus{Host: targetOf(bc.Spec.ResourceURL)}
	s.StartErrors, s.StartError = r.clusterStartErrors(bc)
	if chosen != nil {
		s.LastPlacedJob = chosen.job
	}
	if newest == nil {
		s.Message = "no placement of a BridgeJob has probed it yet"
		return s
	}
	p := newest.probe
	reachable := !strings.HasPrefix(p.Skipped, "did not answer")
	at := metav1.NewMicroTime(newest.placed.At.UTC().Truncate(time.Microsecond))
	s.Reachable, s.LastProbe = &reachable, &at
	s.FreeCPUs, s.TotalCPUs, s.PendingJobs, s.RunningJobs = p.FreeCPUs, p.TotalCPUs, p.PendingJobs, p.RunningJobs
	s.Message = "probed by the placement of BridgeJob " + newest.job
	if p.Skipped != "" {
		s.Message += "; skipped: " + p.Skipped
	}
	return s
}

// clusterProbe is what the record's placement saw of bc, if the record's
// targets came from bc (its name, its credentials directory and its URL:
// a cluster since pointed elsewhere does not take an old probe).
func clusterProbe(cm *kube.ConfigMap, bc *BridgeCluster) *seen {
	p, err := record.ParsePlaced(cm.Data[record.KeyPlacement])
	if err != nil || p == nil {
		return nil
	}
	ok := false
	for _, t := range recordTargets(cm) {
		if t.Name == bc.Name && t.Credentials == clusterCredentials(bc.Name) && t.ResourceURL == strings.TrimSpace(bc.Spec.ResourceURL) {
			ok = true
		}
	}
	if !ok {
		return nil
	}
	job := cm.Labels[record.LabelJob]
	if c := metav1.GetControllerOf(cm); c != nil && c.Kind == "BridgeJob" {
		job = c.Name
	}
	for _, pr := range p.Probes {
		if pr.Target == bc.Name {
			return &seen{job: job, placed: p, probe: pr}
		}
	}
	return nil
}
