package agent_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
	"github.com/bridge-runner/bridge-runner/runner/watcher"
)

// inStepWatcher is what an invoke logs when it starts an in-step watcher.
const inStepWatcher = "watching the cluster's jobs of this group"

// The agent killed mid-run (nothing cleaned up, as after SIGKILL): its
// heartbeat stops advancing, the steps fall back to the in-step watcher
// or their own polls, and every job ends in its true state within its
// budget (the window of trust, three heartbeat periods, plus the job).
func TestStepsFallBackWhenTheAgentDies(t *testing.T) {
	e := newEnv(t, 2)
	_, stop := e.startAgent(300 * time.Millisecond)
	for _, ns := range e.nss {
		e.awaitBeat(ns, 1)
	}
	const run = 8 * time.Second
	go func() {
		time.Sleep(3 * time.Second)
		stop()
	}()
	res, took := e.runSteps(2, fmt.Sprintf(`{"run":"%s"}`, run), 30*time.Second)
	for i, r := range res {
		assert.Equal(t, "DONE", r.Status)
		// A generous ceiling: the job, the window (3 periods of 2 s), the
		// fallback's first rounds and a loaded machine.
		assert.Less(t, took[i], run+3*watcher.HeartbeatFloor+15*time.Second, "job %d", i)
	}
	assert.Contains(t, e.logs.String(), inStepWatcher, "the steps fell back to the in-step watcher")
	assert.Zero(t, e.leases(), "the fallback's leases went with their jobs")
}

// A heartbeat written without the cluster's key (its sequence advancing
// all the same), or an old one written again, makes no step trust it: the
// steps do as without an agent and their jobs end in their true state.
func TestForgedOrReplayedHeartbeatIsIgnored(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(e *env, ns string, seq uint64) map[string]string
	}{
		{"forged", func(e *env, ns string, seq uint64) map[string]string {
			return watcher.SealHeartbeat([]byte("not the cluster's key"), ns, cluster, watcher.Heartbeat{Agent: "forger", Seq: seq, Interval: time.Second})
		}},
		{"replayed", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, 1)
			ns := e.nss[0]
			write := c.write
			if write == nil {
				// A real heartbeat of an agent now gone, written again and again.
				_, stop := e.startAgent(200 * time.Millisecond)
				e.awaitBeat(ns, 2)
				stop()
				old := e.readBeat(ns)
				write = func(*env, string, uint64) map[string]string { return old }
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); e.keepWriting(ctx, ns, write) }()
			res, took := e.runSteps(2, `{"run":"9s"}`, 30*time.Second)
			cancel()
			wg.Wait()
			for i, r := range res {
				assert.Equal(t, "DONE", r.Status)
				assert.Less(t, took[i], 9*time.Second+3*watcher.HeartbeatFloor+15*time.Second, "job %d", i)
			}
			assert.Contains(t, e.logs.String(), inStepWatcher, "the steps did not follow the heartbeat")
		})
	}
}

// readBeat is the heartbeat ConfigMap's data in ns.
func (e *env) readBeat(ns string) map[string]string {
	cm := &kube.ConfigMap{}
	require.NoError(e.t, e.kube.Get(context.Background(), kube.ConfigMaps, ns, record.AgentConfigMap(cluster), cm))
	return cm.Data
}

// keepWriting writes the heartbeat data write gives, every 300 ms, with
// a sequence that advances, until ctx ends: a namespace writer without
// the cluster's credentials.
func (e *env) keepWriting(ctx context.Context, ns string, write func(*env, string, uint64) map[string]string) {
	name := record.AgentConfigMap(cluster)
	for seq := uint64(1); ctx.Err() == nil; seq++ {
		cm := &kube.ConfigMap{}
		err := e.kube.Get(ctx, kube.ConfigMaps, ns, name, cm)
		cm.Name, cm.Namespace, cm.Data = name, ns, write(e, ns, seq)
		if err != nil {
			_ = e.kube.Create(ctx, kube.ConfigMaps, ns, cm, &kube.ConfigMap{})
		} else {
			_ = e.kube.Update(ctx, kube.ConfigMaps, ns, name, cm, &kube.ConfigMap{})
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// A step whose Role names only its own record (the operator's per-job
// Role) may not read the agent's heartbeat: it polls its job alone, ends
// in its true state, and does not ask for the heartbeat again and again.
func TestStepForbiddenTheHeartbeatPollsAlone(t *testing.T) {
	e := newEnv(t, 1)
	ns := e.nss[0]
	_, _ = e.startAgent(200 * time.Millisecond)
	e.awaitBeat(ns, 1)
	name := record.ConfigMapName("own-record")
	cfg := testkube.ServiceAccountWithRules(t, testkube.Client(t), ns, "own-record",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{name}, Verbs: []string{"get", "watch", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	iv := e.invoker(ns, "own-record", `{"run":"12s"}`, cluster, 30*time.Second)
	sa := testkube.KubeClient(t, cfg)
	iv.Store = &record.ConfigMapStore{Client: sa, Namespace: ns, Name: name}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	require.NoError(t, iv.Run(ctx))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.GreaterOrEqual(t, e.fake.Count("status"), 2, "it polled its job itself")
	// Reads: its record's, the lease's one denied read; watches: its
	// record's and the heartbeat's one denied watch. Not one every few
	// seconds for as long as the job runs.
	by := sa.RequestsByVerb()
	t.Logf("requests by verb: %s", by)
	assert.LessOrEqual(t, verbCounts(by)["get"], 4, by)
	assert.LessOrEqual(t, verbCounts(by)["watch"], 3, by)
}

// verbCounts reads a client's RequestsByVerb ("get=1 watch=2") as counts
// by verb.
func verbCounts(s string) map[string]int {
	by := map[string]int{}
	for _, m := range regexp.MustCompile(`(\w+)=(\d+)`).FindAllStringSubmatch(s, -1) {
		by[m[1]], _ = strconv.Atoi(m[2])
	}
	return by
}

// The operator's pods run invoke with --watcher=false under a Role that
// names their record and the agent's heartbeat only: they follow the
// agent (a poll to start and one confirm per change it told, not a poll
// per update interval), never touch the in-step watcher's lease, and end
// in the true state. Before, --watcher=false turned the agent off too, and
// every BridgeJob polled alone.
func TestOperatorPodFollowsTheAgent(t *testing.T) {
	e := newEnv(t, 1)
	ns := e.nss[0]
	_, _ = e.startAgent(200 * time.Millisecond)
	e.awaitBeat(ns, 1)
	name := record.ConfigMapName("operator-pod")
	cfg := testkube.ServiceAccountWithRules(t, testkube.Client(t), ns, "operator-pod",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{name}, Verbs: []string{"get", "watch", "update", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{record.AgentConfigMap(cluster)}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	iv := e.invoker(ns, "operator-pod", `{"pending":"1s","run":"12s"}`, cluster, 30*time.Second)
	iv.Spec.UpdateInterval = "1" // polling alone: about one status request a second
	iv.Watch = runner.WatchConfig{Off: true}
	sa := testkube.KubeClient(t, cfg)
	iv.Store = &record.ConfigMapStore{Client: sa, Namespace: ns, Name: name}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	require.NoError(t, iv.Run(ctx))
	assert.Equal(t, "DONE", iv.Result().Status, "the true state, from the backend")
	assert.LessOrEqual(t, e.fake.Count("status"), 5, "it followed the agent: a first poll and confirms, not a poll a second (%s)", e.logs.String())
	assert.Zero(t, e.leases(), "no in-step watcher's lease")
	assert.NotContains(t, e.logs.String(), "may not read the watcher's lease", "it asked for no lease its Role denies")
}
