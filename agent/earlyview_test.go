package agent_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
)

// A step whose flags name a cluster starts reading its agent's heartbeat
// before it creates its record, in parallel with the create: at a burst
// (N = 1,000 in one process) one after the other, the read came later
// than the 2 s the submit waits for it, and 434 of 1,000 steps asked
// slurmrestd for its API version themselves. The step's Kubernetes
// client holds the record's create until the heartbeat's read was sent
// (for up to a ceiling): the step that reads only after its create lets
// the ceiling pass.
func TestStepReadsTheHeartbeatWhileItCreatesItsRecord(t *testing.T) {
	e := newEnv(t, 1)
	ns := e.nss[0]
	e.startAgent(500 * time.Millisecond)
	e.awaitBeat(ns, 1)

	gate := &createGate{beat: "metadata.name=" + record.AgentConfigMap(cluster), label: record.FollowValue(record.AgentConfigMap(cluster)), sent: make(chan struct{})}
	cfg := testkube.Config(t)
	cfg.Wrap(gate.wrap)
	iv := e.invoker(ns, "early", `{"run":"1s"}`, cluster, 30*time.Second)
	iv.Store = &record.ConfigMapStore{Client: testkube.KubeClient(t, cfg), Namespace: ns, Name: record.ConfigMapName("early")}
	// A ceiling, not a figure: an invoke that never ends fails here.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, iv.Run(ctx))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.True(t, gate.creates.Load() > 0, "the step created its record")
	assert.True(t, gate.readFirst.Load(), "the heartbeat's read was sent while the record's create waited (not only after it)")
}

// createGate holds a client's first ConfigMap create until a read of the
// heartbeat (a watch or list selecting it by name, or a watch by its
// label with the record's) was sent, or createWait passed.
type createGate struct {
	beat      string // the read's field selector
	label     string // or the value in its label selector
	sent      chan struct{}
	once      sync.Once
	creates   atomic.Int64
	readFirst atomic.Bool
}

// createWait is the ceiling on the hold: generous, for a loaded machine.
const createWait = 10 * time.Second

func (g *createGate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		isCM := strings.HasSuffix(r.URL.Path, "/configmaps")
		switch {
		case isCM && r.Method == http.MethodGet && (strings.Contains(r.URL.Query().Get("fieldSelector"), g.beat) ||
			strings.Contains(r.URL.Query().Get("labelSelector"), g.label)):
			g.once.Do(func() { close(g.sent) })
		case isCM && r.Method == http.MethodPost && g.creates.Add(1) == 1:
			t := time.NewTimer(createWait)
			select {
			case <-g.sent:
				g.readFirst.Store(true)
			case <-t.C:
			}
			t.Stop()
		}
		return next.RoundTrip(r)
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
