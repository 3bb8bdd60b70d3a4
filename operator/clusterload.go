package operator

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// A BridgeCluster's status.load is what the cluster's own agent measured
// (backends.LoadPublisher), copied from the heartbeat it writes in the
// cluster's namespace: fresh without any placement, and still no request
// of the operator's to the cluster. Anyone who may write ConfigMaps in the
// namespace could write that heartbeat, so the operator trusts it exactly
// as a step does (watcher.ReadHeartbeat): only when it verifies under the
// key of the agent's backend, URL and Secret, and only while it is current
// by the operator's clock. The status takes a measure at most once per
// the agent's measuring period (agent.LoadEvery, or its query interval
// when longer), and never an older one than it shows.

// agentBeatSelector selects the agents' heartbeat ConfigMaps (agent.go
// labels them so).
const agentBeatSelector = "app.kubernetes.io/component=agent," + record.LabelCluster

// keyRecheck is the least time between two reads of a cluster's Secret
// for its heartbeat's key: a heartbeat that does not verify (a rotated
// Secret, or a forged heartbeat) costs at most one GET per keyRecheck.
const keyRecheck = time.Minute

// beatKeys remembers, by cluster, the heartbeat key and what it was
// derived from (clusterKey).
type beatKey struct {
	memo string
	key  []byte
	at   time.Time
}

// watchAgentBeats queues a cluster when its agent's heartbeat carries a
// new measure, or one the status may take again (a period went by): not
// at every heartbeat, whose data changes at each.
func (r *reconciler) watchAgentBeats() cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(r.c.ListWatch(kube.ConfigMaps, r.o.Namespace, agentBeatSelector,
		func() runtime.Object { return &kube.ConfigMapList{} }), &kube.ConfigMap{}, r.o.Resync, cache.Indexers{})
	var last sync.Map // cluster key -> beatTrigger
	type beatTrigger struct {
		load string
		at   time.Time
	}
	on := func(obj any) {
		cm, ok := obj.(*kube.ConfigMap)
		if !ok {
			return
		}
		key := cm.Namespace + "/" + cm.Labels[record.LabelCluster]
		load := loadLine(cm.Data["memo"]) // unverified: it only decides when to look
		if p, ok := last.Load(key); ok && p.(beatTrigger).load == load && time.Since(p.(beatTrigger).at) < agent.LoadEvery {
			return
		}
		last.Store(key, beatTrigger{load: load, at: time.Now()})
		r.cqueue.Add(key)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, n any) { on(n) }})
	return inf
}

// loadLine is the load figure's line of a heartbeat's memo ("" none).
func loadLine(memo string) string {
	for _, l := range strings.Split(memo, "\n") {
		if strings.HasPrefix(l, "load=") {
			return l
		}
	}
	return ""
}

// clusterLoad is bc's status.load: the figures of its agent's newest
// verified, current heartbeat when they may replace the shown ones, else
// those shown (nil when the cluster has no running agent of backend).
func (r *reconciler) clusterLoad(ctx context.Context, bc *BridgeCluster, backend string) *ClusterLoad {
	prev := bc.Status.Load
	// Without an opt-in label the operator reads no Secret at all
	// (policy.go), so it cannot verify a heartbeat: no load is shown.
	if backend == "" || r.o.Registry == nil || r.beats == nil || r.o.SecretOptIn == "" {
		return nil
	}
	cm, _ := r.cached(r.beats, bc.Namespace, record.AgentConfigMap(bc.Name)).(*kube.ConfigMap)
	if cm == nil {
		return prev
	}
	hb, ok := r.verifiedBeat(ctx, bc, backend, cm.Data)
	now := time.Now()
	if !ok || hb.Load == "" || !hb.Current(now) {
		return prev
	}
	at := metav1.NewTime(hb.At.UTC().Truncate(time.Second))
	if prev != nil && (at.Before(&prev.MeasuredAt) || hb.At.Sub(prev.MeasuredAt.Time) < max(agent.LoadEvery, hb.Interval)) {
		return prev // at most once per measuring period, never back in time
	}
	l, ok := r.readMeasure(bc, backend, hb.Load)
	if !ok {
		return prev
	}
	return loadStatus(l, at, hb.Agent)
}

// verifiedBeat reads heartbeat data d of bc's agent, verified under the
// key of backend, bc's URL and its Secret (read again, at most once per
// keyRecheck, when it does not verify).
func (r *reconciler) verifiedBeat(ctx context.Context, bc *BridgeCluster, backend string, d map[string]string) (watcher.Heartbeat, bool) {
	url := strings.TrimSpace(bc.Spec.ResourceURL)
	memo := strings.Join([]string{string(bc.UID), bc.Spec.ResourceSecret, backend, url}, "\x00")
	var k beatKey
	if v, ok := r.beatKeys.Load(bc.Namespace + "/" + bc.Name); ok {
		k = v.(beatKey)
	}
	if k.memo == memo {
		if hb, ok := watcher.ReadHeartbeat(k.key, bc.Namespace, bc.Name, d); ok {
			return hb, true
		}
		if time.Since(k.at) < keyRecheck {
			return watcher.Heartbeat{}, false
		}
	}
	key, err := r.clusterKey(ctx, bc.Namespace, bc.Spec.ResourceSecret, backend, url)
	if err != nil {
		r.log.Debug("could not read the cluster's Secret to verify its agent's heartbeat; status.load stays", "bridgecluster", bc.Namespace+"/"+bc.Name, "err", record.KubeErr(err))
	}
	r.beatKeys.Store(bc.Namespace+"/"+bc.Name, beatKey{memo: memo, key: key, at: time.Now()})
	return watcher.ReadHeartbeat(key, bc.Namespace, bc.Name, d)
}

// clusterKey is the key the agent seals its heartbeats with
// (the key of its mounted Secret: cluster.CredentialText of the same values): derived from the Secret's
// values, which are cleared at once; only the key is kept.
func (r *reconciler) clusterKey(ctx context.Context, ns, secret, backend, url string) ([]byte, error) {
	res := r.c.REST().Get().AbsPath(kube.Secrets.Path(ns), secret).Do(ctx)
	raw, _ := res.Raw()
	defer clear(raw)
	if err := res.Error(); err != nil {
		return nil, err
	}
	var v struct {
		Data map[string][]byte `json:"data"`
	}
	err := json.Unmarshal(raw, &v)
	defer func() {
		for _, b := range v.Data {
			clear(b)
		}
	}()
	if err != nil {
		return nil, err
	}
	b := cluster.CredentialText(v.Data)
	defer clear(b)
	return cluster.New(cluster.Spec{Backend: backend, URL: url, CredentialText: b}).Key(), nil
}

// readMeasure judges the cluster's partition or queue (its
// spec.jobproperties) against a published measure, with the backend's
// own reading (no request).
func (r *reconciler) readMeasure(bc *BridgeCluster, backend, measure string) (backends.Load, bool) {
	be, err := r.o.Registry.New(backend, backends.Config{URL: strings.TrimSpace(bc.Spec.ResourceURL)})
	if err != nil {
		return backends.Load{}, false
	}
	lp, ok := be.(backends.LoadPublisher)
	if !ok {
		return backends.Load{}, false
	}
	// The figures of the partition or queue are the same for any job; a
	// minimal one (one task, the backend's defaults) is what is judged.
	job := backends.Job{Name: bc.Name, Script: "#!/bin/sh\ntrue\n"}
	if p := strings.TrimSpace(bc.Spec.JobProperties); p != "" {
		job.Properties = json.RawMessage(p)
	}
	l, err := lp.LoadFrom(measure, job, nil)
	return l, err == nil
}

// loadStatus is l as status.load; the backend's -1 (unknown) is left out.
func loadStatus(l backends.Load, at metav1.Time, agentID string) *ClusterLoad {
	known := func(n int) *int {
		if n < 0 {
			return nil
		}
		return &n
	}
	s := &ClusterLoad{Queue: l.Queue, FreeCPUs: known(l.FreeCPUs), TotalCPUs: known(l.TotalCPUs),
		PendingJobs: known(l.PendingJobs), RunningJobs: known(l.RunningJobs), MeasuredAt: at, Agent: agentID}
	if l.CPUSecondsKnown {
		s.PendingCPUSeconds = &l.PendingCPUSeconds
	}
	return s
}
