package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// The agent's rounds keep their cadence while its writes lag (a loaded
// apiserver): a round queues its observations and does not wait for them.
// A round that waited wrote 1,000 new jobs' observations for 22 s at
// N = 1,000, and no job's end was seen meanwhile (detection p95 22 s).
// And a job's end found while earlier news still waits is written first.
func TestAgentKeepsItsCadenceWhileItsWritesLag(t *testing.T) {
	e := newEnv(t, 1)
	ns := e.nss[0]
	const jobs = 12
	for i := range jobs {
		cm := &kube.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rec-%d", i), Namespace: ns, Labels: map[string]string{record.LabelCluster: cluster}},
			Data: map[string]string{record.KeyID: fmt.Sprintf("%d", 100+i), record.KeyBackend: "fake", record.KeyResourceURL: fakeURL}}
		require.NoError(t, e.kube.Create(context.Background(), kube.ConfigMaps, ns, cm, &kube.ConfigMap{}))
	}
	b := &stateBatcher{ended: map[string]bool{}}
	w := &heldWrites{hold: make(chan struct{}), one: make(chan struct{})}
	defer w.release()
	cfg := testkube.Config(t)
	cfg.Wrap(w.wrap)
	ag, err := agent.New(agent.Config{Cluster: cluster, Backend: "fake", ResourceURL: fakeURL, Key: e.key, Namespaces: e.nss,
		Interval: 200 * time.Millisecond, Kube: testkube.KubeClient(t, cfg), Batcher: b, ID: "agent-test", Log: slog.New(slog.NewTextHandler(e.logs, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ag.Run(ctx) }()
	defer func() { cancel(); w.release(); <-done }()

	// Every writer holds a write (8 of the 12 RUNNING news).
	require.Eventually(t, func() bool { return len(w.names()) >= 8 }, 20*time.Second, 10*time.Millisecond, "the agent's writes")
	from := b.count()
	require.Eventually(t, func() bool { return b.count() >= from+5 }, 10*time.Second, 10*time.Millisecond,
		"the agent kept asking at its interval while its writes were held")
	held := w.names()
	ended := ""
	for i := range jobs {
		if name := fmt.Sprintf("rec-%d", i); !slices.Contains(held, name) {
			ended = name
			b.end(fmt.Sprintf("%d", 100+i))
			break
		}
	}
	require.NotEmpty(t, ended)
	at := b.count()
	require.Eventually(t, func() bool { return b.count() >= at+2 }, 10*time.Second, 10*time.Millisecond, "a round that saw the end")
	// The end is queued now. A writer that was free meanwhile (a loaded
	// machine) may have taken RUNNING news before it was, or the end
	// itself since: from here on, the end is the first write taken. One
	// write is let through, so that one writer is free and takes the
	// next: the order of the writes of several writers freed at once is
	// the order in which their requests happen to be sent, which says
	// nothing of the outbox's (it failed so on CI).
	queued := len(w.names())
	if !slices.Contains(w.names(), ended) {
		w.releaseOne()
	}
	require.Eventually(t, func() bool { return slices.Contains(w.names(), ended) || len(w.names()) > queued }, 20*time.Second, 10*time.Millisecond, "the next write")
	sent := w.names()
	i := slices.Index(sent, ended)
	assert.True(t, i >= 0 && i <= queued, "the job's end is the first write taken once it was queued (before the RUNNING news queued earlier): %v, %d sent before", sent, queued)
}

// stateBatcher answers RUNNING for every job but those ended (DONE), and
// counts its queries.
type stateBatcher struct {
	mu    sync.Mutex
	n     int
	ended map[string]bool
}

func (s *stateBatcher) StatusMany(_ context.Context, ids []string) (map[string]backends.Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	out := map[string]backends.Status{}
	for _, id := range ids {
		st := backends.Running
		if s.ended[id] {
			st = backends.Done
		}
		out[id] = backends.Status{State: st, Raw: string(st)}
	}
	return out, nil
}

func (s *stateBatcher) Status(context.Context, string) (backends.Status, error) {
	return backends.Status{}, fmt.Errorf("not asked")
}

func (s *stateBatcher) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *stateBatcher) end(id string) {
	s.mu.Lock()
	s.ended[id] = true
	s.mu.Unlock()
}

// heldWrites holds a client's ConfigMap patches until release (for up to
// a ceiling), noting the records they write in the order sent.
type heldWrites struct {
	hold chan struct{}
	one  chan struct{} // lets one held write through
	once sync.Once
	mu   sync.Mutex
	sent []string
}

func (w *heldWrites) release() { w.once.Do(func() { close(w.hold) }) }

// releaseOne lets one held write through (waiting for one to be held).
func (w *heldWrites) releaseOne() { w.one <- struct{}{} }

func (w *heldWrites) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.sent)
}

func (w *heldWrites) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		// The records' writes only (rec-N), not the agent's heartbeat.
		if r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/configmaps/rec-") {
			w.mu.Lock()
			w.sent = append(w.sent, path.Base(r.URL.Path))
			w.mu.Unlock()
			t := time.NewTimer(30 * time.Second) // a ceiling: the test releases them
			select {
			case <-w.hold:
			case <-w.one:
			case <-t.C:
			}
			t.Stop()
		}
		return next.RoundTrip(r)
	})
}
