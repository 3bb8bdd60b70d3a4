package httpx

import (
	"context"
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// This file is the one place where the binary builds an http.Client or an
// http.Transport (oneclient_test.go walks the module's syntax trees and
// holds it): every client carries the redirect policy (CheckRedirect),
// verifies TLS unless the user asked otherwise, takes its proxy from the
// environment, and treats connections to a cluster's daemon as the
// cluster's resource, not ours (Server below).

// Use says what a transport talks to; each has its own connection policy.
type Use int

const (
	// Server is a cluster's REST daemon (slurmrestd, LSF Application
	// Center, a Ray dashboard, IBM Quantum). Many steps share one daemon,
	// which serves a bounded number of connections at once (slurmrestd
	// 22.05: 124; past that a new connection waits unanswered in the
	// kernel's queue, and idle keep-alive connections of 200 steps wedged
	// it). A step's requests are seconds apart, so each exchange has a
	// connection of its own, closed after it: the daemon's slots are
	// always working, never held idle by us. A process holds at most
	// ServerMaxConns at once, and after a connect or first-byte timeout it
	// waits (coolDown) rather than opening a fresh connection at once.
	Server Use = iota
	// Objects is an S3 endpoint: parallel part uploads and downloads
	// reuse a pool of connections; S3 servers are built for many.
	Objects
	// Kubernetes is the API server: long-lived watches and a pool that
	// client-go's defaults size (the kube package finishes the transport
	// with apimachinery's SetTransportDefaults, for HTTP/2 health pings).
	Kubernetes
)

// ServerMaxConns caps the connections one process holds to one daemon at
// once (a poll, a watcher's batched query, a cancel and a download may
// overlap); further requests wait for one to free.
const ServerMaxConns = 4

// Options configure a transport.
type Options struct {
	Use Use
	// TLS verifies servers; nil: the system roots, TLS 1.2 or later.
	// Callers build it from --ca-file (or a kubeconfig) and set
	// InsecureSkipVerify only on the user's explicit request.
	TLS *tls.Config
	// Proxy picks the proxy of a request; nil: the environment's
	// (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
	Proxy func(*http.Request) (*url.URL, error)
	// Dial, when set, opens connections (client-go's rest.Config.Dial).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// NewTransport returns the transport for o.Use. A Server transport comes
// wrapped in its cool-down (an http.RoundTripper that unwraps to the
// *http.Transport, for a WebSocket dialer that needs its TLS settings).
func NewTransport(o Options) http.RoundTripper {
	tr := newTransport(o)
	if o.Use == Server {
		return &coolDown{next: tr, until: map[string]time.Time{}, step: map[string]time.Duration{}}
	}
	return tr
}

// NewObjectTransport is NewTransport for Use Objects, as the concrete type
// an S3 client (minio-go) takes.
func NewObjectTransport(o Options) *http.Transport {
	o.Use = Objects
	return newTransport(o)
}

// NewKubernetesTransport is NewTransport for Use Kubernetes, as the
// concrete type apimachinery's SetTransportDefaults finishes.
func NewKubernetesTransport(o Options) *http.Transport {
	o.Use = Kubernetes
	return newTransport(o)
}

func newTransport(o Options) *http.Transport {
	tlsConf := o.TLS
	if tlsConf == nil {
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	proxy := o.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	dial := o.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		Proxy:                 proxy,
		DialContext:           dial,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
	switch o.Use {
	case Server:
		// Measured with 200 steps on slurmrestd 22.05
		// (bench/conns_test.go): keep-alive connections closed after
		// 0.5 s idle left up to 149 open and 47 in CLOSE-WAIT; one per
		// exchange, 68-121 for a second or two of the burst of submits,
		// then 0-12.
		tr.DisableKeepAlives = true
		tr.MaxConnsPerHost = ServerMaxConns
	case Objects:
		// Go would otherwise ask for gzip and transparently unpack it,
		// making object sizes and checksums disagree.
		tr.DisableCompression = true
		tr.MaxIdleConnsPerHost = 16
	case Kubernetes:
		// A watch waits for events as long as the server holds it.
		tr.ResponseHeaderTimeout = 0
		tr.MaxIdleConnsPerHost = 25
		tr.ForceAttemptHTTP2 = false // SetTransportDefaults configures HTTP/2 itself
	}
	return tr
}

// NewClient returns a client over rt with the redirect policy
// (CheckRedirect). timeout bounds a whole exchange; zero means none
// (backends bound each request with a context instead, since downloads
// may be large).
func NewClient(rt http.RoundTripper, timeout time.Duration) *http.Client {
	return &http.Client{Transport: rt, CheckRedirect: CheckRedirect, Timeout: timeout}
}

// DefaultClient is a client with the default policy for a server (system
// roots, proxy from the environment), for a caller given none.
func DefaultClient() *http.Client {
	return NewClient(NewTransport(Options{Use: Server}), 0)
}

// coolDown keeps a process from re-sending at once on a fresh connection
// to a daemon that did not answer in time. A timed-out exchange leaves a
// connection the server may not even have accepted yet (it then lingers in
// CLOSE-WAIT on the server's side until the daemon gets to it); a
// retry at once adds another to the same queue. After a connect or
// first-byte timeout, requests to that origin wait a back-off (1 s doubling
// to 15 s, jittered by ±20 %, within their own deadline); any answer ends it.
type coolDown struct {
	next  *http.Transport
	mu    sync.Mutex
	until map[string]time.Time     // origin → no new request before
	step  map[string]time.Duration // origin → the next back-off
}

const (
	coolDownFirst = time.Second
	coolDownMax   = 15 * time.Second
)

func (c *coolDown) RoundTrip(r *http.Request) (*http.Response, error) {
	key := r.URL.Scheme + "://" + r.URL.Host
	c.mu.Lock()
	wait := time.Until(c.until[key])
	c.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, r.Context().Err()
		}
	}
	resp, err := c.next.RoundTrip(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		delete(c.until, key)
		delete(c.step, key)
	case isTimeout(r.Context(), err):
		step := c.step[key]
		if step == 0 {
			step = coolDownFirst
		}
		c.until[key] = time.Now().Add(time.Duration(float64(step) * (0.8 + 0.4*rand.Float64())))
		c.step[key] = min(2*step, coolDownMax)
	}
	return resp, err
}

// Unwrap returns the transport underneath.
func (c *coolDown) Unwrap() http.RoundTripper { return c.next }

// isTimeout reports whether err is a timeout (the request's deadline, a
// dial or response-header timeout), not the caller's own cancellation.
func isTimeout(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// NewWebSocketDialer is the dialer of a WebSocket to a server that client
// c talks to (Ray's log stream): it takes c's TLS settings (CA bundle,
// verification) and proxy, found by unwrapping c's transport. The dialer
// follows no redirect; its caller follows one CheckRedirectURL allows.
func NewWebSocketDialer(c *http.Client, handshake time.Duration, readBuffer int) *websocket.Dialer {
	d := &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: handshake, ReadBufferSize: readBuffer}
	if t := baseTransport(c); t != nil {
		d.TLSClientConfig = t.TLSClientConfig
		d.Proxy = t.Proxy
	}
	return d
}

// baseTransport is the *http.Transport under c's wrappers (each with an
// Unwrap() http.RoundTripper), or nil.
func baseTransport(c *http.Client) *http.Transport {
	if c == nil {
		return nil
	}
	rt := c.Transport
	for rt != nil {
		if t, ok := rt.(*http.Transport); ok {
			return t
		}
		u, ok := rt.(interface{ Unwrap() http.RoundTripper })
		if !ok {
			return nil
		}
		rt = u.Unwrap()
	}
	return nil
}
