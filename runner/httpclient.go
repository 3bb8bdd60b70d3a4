package runner

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/record"
)

// NewHTTPClient returns the client backends use, made by httpx's one
// constructor (its redirect, TLS, proxy and connection policy for a
// cluster's daemon). TLS is verified against the system roots plus caFile
// when given; insecure turns verification off (the user must ask for it).
// There is no overall timeout, because downloads may be large: backends
// bound each request with a context instead.
func NewHTTPClient(caFile string, insecure bool) (*http.Client, error) {
	tlsConf, err := tlsConfig(caFile, insecure)
	if err != nil {
		return nil, err
	}
	tr := httpx.NewTransport(httpx.Options{Use: httpx.Server, TLS: tlsConf})
	return httpx.NewClient(&countingTransport{next: tlsFaultTransport{next: tr}}, 0), nil
}

// maxCAFileBytes caps --ca-file: a bundle of every public CA is about
// 250 KiB.
const maxCAFileBytes = 4 << 20

// tlsConfig is the TLS configuration of --ca-file and
// --insecure-skip-tls-verify.
func tlsConfig(caFile string, insecure bool) (*tls.Config, error) {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // only on the user's request
	if caFile == "" {
		return tlsConf, nil
	}
	pem, err := record.ReadLocalFile(caFile, maxCAFileBytes)
	var le *record.LocalFileError
	if errors.As(err, &le) {
		return nil, backends.Invalid("ca-file", "%s; give a PEM CA bundle (a regular file)", le)
	}
	if err != nil {
		return nil, backends.Invalid("ca-file", "cannot read %s: %v; mount the CA bundle or fix --ca-file", caFile, unwrapPathErr(err))
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, backends.Invalid("ca-file", "%s holds no PEM certificate; give a PEM CA bundle", caFile)
	}
	tlsConf.RootCAs = pool
	return tlsConf, nil
}

// countingTransport counts requests, so that invoke can report how many
// requests a job cost the remote system, and by the class of their answer
// (record.RequestClasses) for the record's KeyBackendRequests.
type countingTransport struct {
	next    http.RoundTripper
	n       atomic.Int64
	classes [6]atomic.Int64 // in the order of record.RequestClasses
	// conns counts the requests that got a connection: only those can have
	// reached the server (see notSubmitted).
	conns atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { c.conns.Add(1) }}))
	resp, err := c.next.RoundTrip(r)
	i := len(c.classes) - 1 // error: no answer
	if err == nil && resp.StatusCode >= 100 && resp.StatusCode <= 599 {
		i = resp.StatusCode/100 - 1
	}
	c.classes[i].Add(1)
	return resp, err
}

// Unwrap returns the transport underneath, for a client (a WebSocket
// dialer) that needs its TLS settings.
func (c *countingTransport) Unwrap() http.RoundTripper { return c.next }

// CountRequests wraps rt so that RequestCounter can report its requests
// (for the Kubernetes client, whose transport client-go builds).
func CountRequests(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt} }

// RequestCounter returns a function reporting how many requests went
// through rt, if rt was made by CountRequests.
func RequestCounter(rt http.RoundTripper) func() int64 {
	if ct, ok := rt.(*countingTransport); ok {
		return ct.n.Load
	}
	return func() int64 { return 0 }
}

// RequestCount returns the number of requests sent through a client made by
// NewHTTPClient (0 for any other client).
func RequestCount(c *http.Client) int64 {
	if c == nil {
		return 0
	}
	if ct, ok := c.Transport.(*countingTransport); ok {
		return ct.n.Load()
	}
	return 0
}

// connectedCount returns how many requests sent through a client made by
// NewHTTPClient got a connection (0 for any other client).
func connectedCount(c *http.Client) int64 {
	if c == nil {
		return 0
	}
	if ct, ok := c.Transport.(*countingTransport); ok {
		return ct.conns.Load()
	}
	return 0
}

// RequestsByClass returns the requests sent through a client made by
// NewHTTPClient by the class of their answer (empty for any other client).
func RequestsByClass(c *http.Client) map[string]int64 {
	out := map[string]int64{}
	if c == nil {
		return out
	}
	if ct, ok := c.Transport.(*countingTransport); ok {
		for i, cl := range record.RequestClasses {
			if n := ct.classes[i].Load(); n > 0 {
				out[cl] = n
			}
		}
	}
	return out
}

// tlsFaultTransport turns a failed certificate verification into a Fault
// naming the certificate problem, so that it ends invoke at once with the
// problem in the final message and the record, rather than being retried as
// a network failure and seen only in WARN lines.
type tlsFaultTransport struct{ next http.RoundTripper }

// Unwrap returns the transport underneath (Ray's log tail dials its
// WebSocket with the TLS settings found there).
func (t tlsFaultTransport) Unwrap() http.RoundTripper { return t.next }

func (t tlsFaultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		if tf := record.TLSFault("ca-file", r.URL.Scheme+"://"+r.URL.Host, err); tf != nil {
			return nil, tf
		}
	}
	return resp, err
}
