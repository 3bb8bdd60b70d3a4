package httpx

import (
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

type unwrapper struct{ next http.RoundTripper }

func (u unwrapper) RoundTrip(r *http.Request) (*http.Response, error) { return u.next.RoundTrip(r) }
func (u unwrapper) Unwrap() http.RoundTripper                         { return u.next }

// TestWebSocketDialerTakesTheClientsTLS: Ray's log stream is dialled with
// the TLS settings (CA bundle, verification) and proxy of the client the
// backend's REST calls use, found under the runner's wrappers; before, a
// dialer of its own checked the system's roots only.
func TestWebSocketDialerTakesTheClientsTLS(t *testing.T) {
	inner := NewTransport(Options{Use: Server, TLS: &tls.Config{ServerName: "ray.example", MinVersion: tls.VersionTLS12}})
	d := NewWebSocketDialer(NewClient(unwrapper{inner}, 0), 5*time.Second, 1024)
	if assert.NotNil(t, d.TLSClientConfig) {
		assert.Equal(t, "ray.example", d.TLSClientConfig.ServerName, "found under a wrapper (the runner counts requests)")
	}
	assert.Equal(t, 5*time.Second, d.HandshakeTimeout)
	d = NewWebSocketDialer(nil, time.Second, 1024)
	assert.Nil(t, d.TLSClientConfig, "no client: the system's roots")
}
