package runner

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// The backends' client unwraps to its *http.Transport, so that a client
// that dials itself (Ray's WebSocket log tail) finds the user's CA bundle:
// the chain used to stop at the TLS-fault wrapper, and the tail verified
// against the system roots only.
func TestBackendClientUnwrapsToItsTLSSettings(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	c, err := NewHTTPClient(ca, false)
	require.NoError(t, err)
	rt := c.Transport
	var tr *http.Transport
	for rt != nil && tr == nil {
		if t, ok := rt.(*http.Transport); ok {
			tr = t
			break
		}
		u, ok := rt.(interface{ Unwrap() http.RoundTripper })
		if !ok {
			break
		}
		rt = u.Unwrap()
	}
	require.NotNil(t, tr, "no *http.Transport under the client's wrappers (%T)", rt)
	require.NotNil(t, tr.TLSClientConfig)
	require.NotNil(t, tr.TLSClientConfig.RootCAs, "the CA bundle is not in the transport found")
	_, err = srv.Certificate().Verify(x509.VerifyOptions{Roots: tr.TLSClientConfig.RootCAs})
	assert.NoError(t, err, "the transport found does not trust the server of --ca-file")
}

// connCounter counts a server's open connections and the most at once.
type connCounter struct {
	open, most atomic.Int64
}

func (c *connCounter) hook(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		n := c.open.Add(1)
		for {
			m := c.most.Load()
			if n <= m || c.most.CompareAndSwap(m, n) {
				break
			}
		}
	case http.StateClosed, http.StateHijacked:
		c.open.Add(-1)
	}
}

// A process holds at most httpx.ServerMaxConns connections to a daemon at
// once however many requests it has under way, and none between polls:
// slurmrestd 22.05 serves 124 connections at once, and 200 steps that each
// kept theirs open for the whole job wedged it (issue 37). The old client
// opened one connection per concurrent request and kept each idle for 90 s.
func TestBackendClientHoldsFewConnectionsAndNoneIdle(t *testing.T) {
	var cc connCounter
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
	}))
	srv.Config.ConnState = cc.hook
	srv.Start()
	defer srv.Close()
	c, err := NewHTTPClient("", false)
	require.NoError(t, err)

	const burst = 20
	var wg sync.WaitGroup
	for range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(srv.URL + "/slow")
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // let the burst queue up
	// Counted while every request is under way: once they are answered,
	// the server sees a closed connection's end only after the client's
	// next one is open, so the churn that follows can count one more.
	most := cc.most.Load()
	close(release)
	wg.Wait()
	assert.LessOrEqual(t, most, int64(httpx.ServerMaxConns), "connections at once from %d concurrent requests", burst)

	// A poll later: its connection is gone well before the next poll
	// (generous ceiling: it is closed after the exchange).
	resp, err := c.Get(srv.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for cc.open.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	assert.Zero(t, cc.open.Load(), "connections still open 5 s after the last answer")
}

// After a first-byte timeout the client does not open a fresh connection
// to the same daemon at once: the abandoned one may still sit in the
// daemon's queue, and a retry at once adds another (issue 37: hundreds of
// CLOSE-WAIT connections on slurmrestd's port). The next request waits the
// cool-down (at least 0.8 s); the old client connected again at once.
func TestBackendClientCoolsDownAfterATimeout(t *testing.T) {
	var mu sync.Mutex
	var accepted []time.Time
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() { // a daemon that accepts and never answers
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, time.Now())
			mu.Unlock()
			defer conn.Close()
		}
	}()
	c, err := NewHTTPClient("", false)
	require.NoError(t, err)
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	require.Error(t, get(200*time.Millisecond))
	timedOut := time.Now()
	require.Error(t, get(3*time.Second))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, accepted, 2, "each request opened one connection")
	assert.GreaterOrEqual(t, accepted[1].Sub(timedOut), 700*time.Millisecond, "the retry connected again at once")
}
