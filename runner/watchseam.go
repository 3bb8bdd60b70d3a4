package runner

import (
	"bytes"
	"context"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// The follow loop's seam to the cluster's watcher (package watcher): what
// runner tells it (the job's record, its cluster and a backend of its own)
// and what it takes from it (when to look, and whether its own poll may
// wait). The watcher imports nothing of runner.

// WatchConfig shapes the watcher of a run whose record is a ConfigMap.
type WatchConfig = watcher.Config

// newWatchMember makes this run a member of its cluster's watch group,
// or returns nil when the watcher does not apply: turned off (unless the
// record names a cluster, whose agent it still follows), a record that is
// not a ConfigMap, a backend without batched status, or a target without
// credentials to key the group's shared state on.
func (r *run) newWatchMember(desc *record.Description, be backends.Backend, id string) *watcher.Member {
	cs := record.ConfigMapOf(r.Store)
	if cs == nil || (r.Watch.Off && desc.Cluster == "") {
		return nil
	}
	if _, ok := be.(backends.StatusBatcher); !ok {
		return nil
	}
	c, err := r.agentCluster, error(nil)
	if c.Key() == nil {
		c, err = r.clusterOf(desc)
	}
	if err != nil || c.Key() == nil {
		r.Log.Debug("no credentials to authenticate a shared watcher with; polling this job alone")
		return nil
	}
	return watcher.NewMember(watcher.MemberConfig{
		Store: cs, Data: r.rec.Data, ID: id, Holder: r.Holder,
		Cluster: c, ClusterName: desc.Cluster, Watch: r.Watch, RetryBudget: r.RetryBudget,
		NewBatcher: func() (backends.StatusBatcher, func(), error) {
			b, err := r.newBackend(desc)
			if err != nil {
				return nil, nil, err
			}
			sb, _ := b.(backends.StatusBatcher)
			return sb, func() { closeBackend(b, r.Log) }, nil
		},
		Submitted: func(d map[string]string) time.Time { // the submit intent's time, to the nanosecond
			in, _ := parseIntent(d[record.KeyIntent])
			return in.at
		},
		AgentView: r.takeAgentView(),
		Log:       r.Log,
	})
}

// publishedWait bounds the wait for the first read of the agent's
// heartbeat before the submit: past it, the step finds for itself what
// the agent would have told it.
const publishedWait = 2 * time.Second

// followAgent starts following the heartbeat of the cluster desc names
// (when the cluster's agent can serve the job: as newWatchMember decides)
// before the job is submitted, and hands the backend what the agent
// published, so that the step does not ask the cluster what its agent
// asked once: its memo (Slurm's API version) unless the record had one,
// and the cluster's array limit while the heartbeat is current. The view
// is the watch member's later (the same watch): it costs no
// Kubernetes request of its own.
func (r *run) followAgent(ctx context.Context, desc *record.Description, be backends.Backend) {
	defer r.stopEarlyView() // not taken: not needed
	cs := record.ConfigMapOf(r.Store)
	if desc.Cluster == "" || cs == nil {
		return
	}
	c, err := r.clusterOf(desc)
	if err != nil || c.Key() == nil {
		return
	}
	learnMemo := r.memo != nil && r.rec.Data[record.KeyBackendMemo] == "" && r.rec.Data[record.KeyID] == ""
	arr, _ := be.(*arrayBackend)
	_, batched := be.(backends.StatusBatcher)
	if !batched && !learnMemo && !arr.needsLimit() {
		return
	}
	v := r.takeEarlyView(desc.Cluster, c.Key())
	if v == nil {
		v = watcher.StartHeartbeatView(context.Background(), cs.Client, cs.Namespace, desc.Cluster, "", c.Key(), r.RetryBudget)
	}
	if batched {
		r.agentView, r.agentCluster = v, c
	} else {
		defer v.Stop() // an array: the agent does not follow it, but it tells what it read
	}
	if !learnMemo && !arr.needsLimit() {
		return // nothing to learn, or learnt by an earlier invoke of the job
	}
	hb, ok := v.Published(ctx, publishedWait)
	if !ok {
		return
	}
	if learnMemo && hb.Memo != "" {
		r.memo.Recall(hb.Memo)
		r.Log.Debug("using what the cluster's agent published", "cluster", desc.Cluster, "memo", hb.Memo)
	}
	if hb.ArrayLimit > 0 && hb.Current(time.Now()) && arr.useLimit(hb.ArrayLimit) {
		r.Log.Debug("using the array limit the cluster's agent read", "cluster", desc.Cluster, "limit", hb.ArrayLimit)
	}
}

// takeAgentView is the heartbeat view followAgent started, for the watch
// member (nil when none was).
func (r *run) takeAgentView() *watcher.HeartbeatView {
	v := r.agentView
	r.agentView = nil
	return v
}

// earlyView is the heartbeat view a step starts while it creates its
// record (startEarlyView), and what it follows.
type earlyView struct {
	cluster string
	key     []byte
	v       *watcher.HeartbeatView
}

// startEarlyView starts reading the heartbeat of the cluster a step's own
// flags name (desc, parsed from them) while the step creates its record,
// so that the read is there when the step submits. One after the other,
// at a burst of steps (each waiting for a loaded apiserver), the read came
// later than the submit waits for it (publishedWait), and hundreds of
// steps asked slurmrestd for its API version themselves. followAgent
// takes the view over when it follows the same cluster under the same
// key; stopEarlyView ends it otherwise.
func (r *run) startEarlyView(desc *record.Description) {
	cs := record.ConfigMapOf(r.Store)
	if desc.Cluster == "" || len(desc.Targets) > 0 || cs == nil {
		return // a placed job's cluster is known only once it is placed
	}
	c, err := r.clusterOf(desc)
	if err != nil || c.Key() == nil {
		return
	}
	// The record rides in the view's watch (watchRecord takes it), unless
	// it was read and lacks the label (the operator's, whose pods' Role
	// would refuse the watch by label besides).
	rec := cs.Name
	if r.rec != nil && !cs.Followed() {
		rec = ""
	}
	r.early = &earlyView{cluster: desc.Cluster, key: c.Key(),
		v: watcher.StartHeartbeatView(context.Background(), cs.Client, cs.Namespace, desc.Cluster, rec, c.Key(), r.RetryBudget)}
}

// takeEarlyView is the early view if it follows cluster under key (nil
// otherwise, and an early view of another is ended).
func (r *run) takeEarlyView(cluster string, key []byte) *watcher.HeartbeatView {
	e := r.early
	r.early = nil
	if e == nil {
		return nil
	}
	if e.cluster != cluster || !bytes.Equal(e.key, key) {
		e.v.Stop()
		return nil
	}
	e.v.Join() // the create's time does not count against the agent
	return e.v
}

// stopEarlyView ends the early view unless followAgent took it.
func (r *run) stopEarlyView() {
	if r.early != nil {
		r.early.v.Stop()
		r.early = nil
	}
}
