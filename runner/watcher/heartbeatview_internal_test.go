package watcher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// A step reads its agent's heartbeat with one request: a watch from the
// apiserver's newest version, which brings the heartbeat as a synthetic
// ADDED, where a list for its version and a watch from it were two (on
// the real kube-apiserver). A heartbeat that is not there is known from
// one list once the watch brought nothing for a moment, not from the
// submit's wait running out; a watch the Role forbids ends the view.
func TestHeartbeatViewReadsTheHeartbeatWithOneWatch(t *testing.T) {
	admin := testkube.KubeClient(t, testkube.Config(t))
	ns := testkube.Namespace(t, testkube.Client(t))
	hb := Heartbeat{Agent: "agent-1", Seq: 3, Interval: time.Second}
	cm := &kube.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: record.AgentConfigMap("hpc-1")}, Data: SealHeartbeat(testKey, ns, "hpc-1", hb)}
	require.NoError(t, admin.Create(context.Background(), kube.ConfigMaps, ns, cm, &kube.ConfigMap{}))

	for _, c := range []struct {
		cluster string
		present bool
		want    string // the requests, by verb
	}{{"hpc-1", true, "watch=1"}, {"hpc-2", false, "get=1 watch=1"}} {
		kc := testkube.KubeClient(t, testkube.Config(t))
		clk := clockOf(nil)
		if c.present {
			// Its timers never fire: only the watch can bring the
			// heartbeat, however slow a loaded apiserver is to send it.
			clk = clockOf(stillClock{})
		}
		v := startHeartbeatView(context.Background(), kc, ns, c.cluster, "", testKey, newAgentTrust(clk.Now, time.Minute), clk)
		// A ceiling far past any answer: a view that does not know the
		// heartbeat missing waits all of it.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		got, ok := v.Published(ctx, time.Minute)
		cancel()
		read := v.wasRead()
		st, _ := v.trust.state()
		v.Stop()
		by := kc.RequestsByVerb()
		require.True(t, read, "%s: the view read the heartbeat (or knew it missing): %s", c.cluster, by)
		if c.present {
			assert.True(t, ok, "%s: the heartbeat is there: %s", c.cluster, by)
			assert.Equal(t, hb.Agent, got.Agent)
			assert.Equal(t, hb.Seq, got.Seq)
		} else {
			assert.False(t, ok, "%s: no heartbeat", c.cluster)
			assert.Equal(t, agentStale, st, "%s: a missing heartbeat ends the trust at once", c.cluster)
		}
		assert.Equal(t, c.want, by, c.cluster)
	}
}

// stillClock is the real clock whose timers never fire.
type stillClock struct{ RealClock }

func (stillClock) NewTimer(time.Duration) Timer { return stillTimer{} }

type stillTimer struct{}

func (stillTimer) C() <-chan time.Time { return nil }
func (stillTimer) Stop()               {}
