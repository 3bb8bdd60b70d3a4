// Package fakeserve starts a fake server (internal/fakelsf,
// internal/fakequantum) on an address a person chose, for trying a backend
// outside the tests (hack/fakes). Never linked into the product binary.
package fakeserve

import (
	"net"
	"net/http"
	"net/http/httptest"
)

// Listen serves h over plain HTTP on addr (a loopback address).
func Listen(addr string, h http.Handler) (*httptest.Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = l
	s.Start()
	return s, nil
}
