package record_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestConfigMapStoreSaysItWaits: a ConfigMap store whose API server does not
// answer says so at the first failure (which server, the cause in a few
// words, until when the caller retries), then every Heartbeat while it
// goes on; its errors name the API server, not Go's `dial tcp` chain.
func TestConfigMapStoreSaysItWaits(t *testing.T) {
	for _, mode := range []testutil.Mode{testutil.Refuse, testutil.Blackhole} {
		t.Run(mode.String(), func(t *testing.T) {
			p := testutil.NewProxy(t, "127.0.0.1:9")
			p.Set(t, mode)
			c, err := kube.New(&rest.Config{Host: "http://" + p.Addr, QPS: 100, Burst: 100})
			require.NoError(t, err)
			var logs testutil.SyncBuffer
			s := &record.ConfigMapStore{Client: c, Namespace: "ns", Name: "job-bridge-cm", Server: "http://" + p.Addr + " (from the test)",
				Log: slog.New(slog.NewTextHandler(&logs, nil)), Heartbeat: 300 * time.Millisecond}

			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			var last error
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_, last = s.Get(rctx)
				rcancel()
				time.Sleep(50 * time.Millisecond)
			}
			require.ErrorIs(t, last, backends.ErrTransient)
			msg := last.Error()
			assert.Contains(t, msg, "the Kubernetes API server http://"+p.Addr+" (from the test) cannot be reached")
			assert.NotContains(t, msg, "dial tcp")
			assert.NotContains(t, msg, "/api/v1/")

			out := logs.String()
			assert.Equal(t, 1, strings.Count(out, "does not answer; retrying"), out)
			assert.Contains(t, out, "until=")
			assert.Contains(t, out, "server=\"http://"+p.Addr)
			beats := strings.Count(out, "still waiting for the Kubernetes API server")
			assert.GreaterOrEqual(t, beats, 2, "a heartbeat while the wait goes on:\n%s", out)
			assert.LessOrEqual(t, beats, 5, "not a line per request:\n%s", out)
			assert.NotContains(t, out, "dial tcp")
		})
	}
}

// TestConfigMapStoreSaysTheServerAnswersAgain: the wait's end is said once.
func TestConfigMapStoreSaysTheServerAnswersAgain(t *testing.T) {
	cfg := testkube.Config(t)
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	p := testutil.NewProxy(t, u.Host)
	u.Host = p.Addr
	cfg.Host = u.String()
	c, err := kube.New(cfg)
	require.NoError(t, err)
	var logs bytes.Buffer
	s := &record.ConfigMapStore{Client: c, Namespace: "default", Name: "never-made-bridge-cm", Log: slog.New(slog.NewTextHandler(&logs, nil))}
	p.Cut()
	_, err = s.Get(context.Background())
	require.ErrorIs(t, err, backends.ErrTransient)
	p.Restore(t)
	_, err = s.Get(context.Background())
	require.ErrorIs(t, err, record.ErrNoRecord)
	assert.Contains(t, logs.String(), "does not answer")
	assert.Equal(t, 1, strings.Count(logs.String(), "answers again"), logs.String())
}

// TestConfigMapStoreWatchSaysItWaits: the watch's own retries (the record
// watch invoke keeps for the kill flag) are said too, once, then a heartbeat.
func TestConfigMapStoreWatchSaysItWaits(t *testing.T) {
	p := testutil.NewProxy(t, "127.0.0.1:9")
	p.Cut()
	c, err := kube.New(&rest.Config{Host: "http://" + p.Addr, QPS: 100, Burst: 100})
	require.NoError(t, err)
	var logs testutil.SyncBuffer
	s := &record.ConfigMapStore{Client: c, Namespace: "ns", Name: "job-bridge-cm", Server: "http://" + p.Addr,
		Log: slog.New(slog.NewTextHandler(&logs, nil)), Heartbeat: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	for range s.Watch(ctx, &record.Record{Version: "1"}) {
	}
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "does not answer; retrying"), out)
	assert.GreaterOrEqual(t, strings.Count(out, "still waiting"), 1, out)
}
