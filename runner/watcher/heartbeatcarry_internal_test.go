package watcher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// carryCase is one step's record and its agent's heartbeat, each labelled
// for the one watch or not, under a Role that allows a watch by label or
// names its ConfigMaps.
type carryCase struct {
	name              string
	hbLabel, recLabel bool
	named             bool   // the Role names the two ConfigMaps
	want              string // the view's client's requests, by verb
}

// carried: the record is to ride in the view's watch.
func (c carryCase) carried() bool { return c.hbLabel && c.recLabel && !c.named }

const carryCluster = "hpc-1"

var carryJob = record.ConfigMapName("carried")

// On the real kube-apiserver: a step's record rides in its heartbeat
// view's watch when both carry record.LabelFollow, one request for both
// (the heartbeat read and the record's changes carried); whatever keeps
// the label from bringing both (a heartbeat an older agent wrote, a record
// IBM's operator made, a Role that names its ConfigMaps) has each watched
// alone, and the record's changes still come, as do the heartbeat's. A
// carried record whose label is taken off is watched alone from there.
func TestTheRecordRidesInTheHeartbeatsWatch(t *testing.T) {
	admin := testkube.KubeClient(t, testkube.Config(t))
	for _, c := range []carryCase{
		{"both labelled", true, true, false, "watch=2"}, // the second once the record's label is taken off
		{"heartbeat unlabelled", false, true, false, "get=1 watch=2"},
		{"record unlabelled", true, false, false, "watch=1"},
		{"a Role that names them", true, true, true, "watch=2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns, v, cs, from := carrySetUp(t, admin, c)
			defer v.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			hb, ok := v.Published(ctx, time.Minute)
			require.True(t, ok, "the heartbeat is read")
			assert.Equal(t, uint64(3), hb.Seq)

			ch, carried := v.Carry(ctx, cs, from)
			if !carried {
				ch = cs.Watch(ctx, from) // as runner does
			}
			if c.carried() {
				assert.True(t, carried, "both labelled: the record is carried")
			}
			// Another writer (the agent's observation, a kill): its
			// change comes, by whichever watch.
			writeKill(ctx, t, admin, ns, "requested", false)
			assert.Equal(t, from.UID, awaitKill(ctx, t, ch, "requested").UID)
			if carried {
				// The label taken off (a namespace writer): the watch by
				// label says the record is gone, which the view cannot
				// tell from a delete; it is watched alone from there.
				writeKill(ctx, t, admin, ns, "again", true)
				awaitKill(ctx, t, ch, "again")
			}
			// The heartbeat's next beat comes too.
			cm := &kube.ConfigMap{}
			require.NoError(t, admin.Get(ctx, kube.ConfigMaps, ns, record.AgentConfigMap(carryCluster), cm))
			cm.Data = SealHeartbeat(testKey, ns, carryCluster, Heartbeat{Agent: "agent-1", Seq: 4, Interval: time.Second})
			require.NoError(t, admin.Update(ctx, kube.ConfigMaps, ns, cm.Name, cm, &kube.ConfigMap{}))
			require.Eventually(t, func() bool {
				v.mu.Lock()
				defer v.mu.Unlock()
				return v.hb.Seq == 4
			}, time.Minute, 20*time.Millisecond, "the heartbeat's beat is seen")
			assert.Equal(t, c.want, v.c.RequestsByVerb(), "the view's requests (the record's own watch, when not carried, is the store's)")
		})
	}
}

// carrySetUp makes case c's namespace, heartbeat (seq 3) and record (by
// the step's store, labelled, or by another hand without the label), and
// starts the step's view: it has a client of its own, to count its
// requests.
func carrySetUp(t *testing.T, admin *kube.Client, c carryCase) (string, *HeartbeatView, *record.ConfigMapStore, *record.Record) {
	kc := testkube.Client(t)
	ns := testkube.Namespace(t, kc)
	hbName := record.AgentConfigMap(carryCluster)
	beat := &kube.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: hbName},
		Data: SealHeartbeat(testKey, ns, carryCluster, Heartbeat{Agent: "agent-1", Seq: 3, Interval: time.Second})}
	if c.hbLabel {
		beat.Labels = map[string]string{record.LabelFollow: record.FollowValue(hbName)}
	}
	require.NoError(t, admin.Create(context.Background(), kube.ConfigMaps, ns, beat, &kube.ConfigMap{}))
	stepCfg := testkube.Config(t)
	if c.named {
		stepCfg = testkube.ServiceAccountWithRules(t, kc, ns, "named",
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
				ResourceNames: []string{carryJob, hbName}, Verbs: []string{"get", "list", "watch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	}
	cs := &record.ConfigMapStore{Client: testkube.KubeClient(t, stepCfg), Namespace: ns, Name: carryJob}
	v := startHeartbeatView(context.Background(), testkube.KubeClient(t, stepCfg), ns, carryCluster, carryJob, testKey, newAgentTrust(time.Now, time.Minute), clockOf(nil))
	data := map[string]string{"jobStatus": "SUBMITTING"}
	if c.recLabel {
		from, err := cs.Create(context.Background(), data)
		require.NoError(t, err)
		return ns, v, cs, from
	}
	require.NoError(t, admin.Create(context.Background(), kube.ConfigMaps, ns, &kube.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: carryJob}, Data: data}, &kube.ConfigMap{}))
	from, err := cs.Get(context.Background())
	require.NoError(t, err)
	return ns, v, cs, from
}

// writeKill writes kill=value into the record as another writer, first
// taking its LabelFollow off when unlabel.
func writeKill(ctx context.Context, t *testing.T, admin *kube.Client, ns, value string, unlabel bool) {
	cm := &kube.ConfigMap{}
	if unlabel {
		require.NoError(t, admin.Get(ctx, kube.ConfigMaps, ns, carryJob, cm))
		delete(cm.Labels, record.LabelFollow)
		require.NoError(t, admin.Update(ctx, kube.ConfigMaps, ns, carryJob, cm, &kube.ConfigMap{}))
	}
	require.NoError(t, admin.Get(ctx, kube.ConfigMaps, ns, carryJob, cm))
	cm.Data["kill"] = value
	require.NoError(t, admin.Update(ctx, kube.ConfigMaps, ns, carryJob, cm, &kube.ConfigMap{}))
}

// awaitKill reads the record's versions from ch until one says kill=value.
func awaitKill(ctx context.Context, t *testing.T, ch <-chan *record.Record, value string) *record.Record {
	for {
		select {
		case rec, ok := <-ch:
			require.True(t, ok, "the record's watch ended before kill=%s came", value)
			if rec.Data["kill"] == value {
				return rec
			}
		case <-ctx.Done():
			t.Fatalf("the record's change (kill=%s) never came", value)
		}
	}
}
