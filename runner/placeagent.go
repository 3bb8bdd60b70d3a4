package runner

import (
	"context"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// publishedLoad is the load of job at the target of d as the agent of
// cluster (the target's: record.Target.Cluster) measured it
// (backends.LoadPublisher): read
// from the agent's heartbeat with one Kubernetes request, judged here
// without a request to the cluster. ok is false, and the caller probes,
// unless the heartbeat verifies under the target's own key (so it is the
// agent of this very backend, URL and credentials: another target's
// cluster, or a namespace writer's edit, does not verify), is current by
// this step's clock, and says the job fits: like a neighbour's shared
// probe, a published "does not fit" or a partition it does not list
// decides no refusal; this step's own probe does.
func (r *run) publishedLoad(ctx context.Context, d *record.Description, cluster string, be backends.Backend, job backends.Job) (backends.Load, bool) {
	lp, ok := be.(backends.LoadPublisher)
	cs := record.ConfigMapOf(r.Store)
	if !ok || cs == nil || cluster == "" {
		return backends.Load{}, false
	}
	c, err := r.clusterOf(d)
	if err != nil || c.Key() == nil {
		return backends.Load{}, false
	}
	cm := &kube.ConfigMap{}
	if err := cs.Client.Get(ctx, kube.ConfigMaps, cs.Namespace, record.AgentConfigMap(cluster), cm); err != nil {
		return backends.Load{}, false // none, not ours to read, or the API's fault: probe
	}
	hb, ok := watcher.ReadHeartbeat(c.Key(), cs.Namespace, cluster, cm.Data)
	if !ok || hb.Load == "" || !hb.Current(time.Now()) {
		return backends.Load{}, false
	}
	l, err := lp.LoadFrom(hb.Load, job, d.Array)
	if err != nil || !l.Fits {
		return backends.Load{}, false
	}
	r.Log.Debug("placement reads the load the cluster's agent measured", "target", d.Target, "cluster", cluster)
	return l, true
}
