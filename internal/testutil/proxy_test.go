package testutil_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// TestProxyModes: each mode does to a real HTTP exchange what it says.
func TestProxyModes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 1000))
	}))
	defer srv.Close()
	p := testutil.NewProxy(t, strings.TrimPrefix(srv.URL, "http://"))
	get := func(timeout time.Duration) (int, int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Addr+"/", nil)
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, len(b), err
	}
	if code, n, err := get(5 * time.Second); err != nil || code != 200 || n != 1000 {
		t.Fatalf("pass: %d %d %v", code, n, err)
	}
	p.Set(t, testutil.Blackhole)
	start := time.Now()
	if _, _, err := get(300 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("blackhole: %v after %s", err, time.Since(start))
	}
	p.Set(t, testutil.Refuse)
	if _, _, err := get(5 * time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("refuse: %v", err)
	}
	p.Set(t, testutil.Reset)
	if _, _, err := get(5 * time.Second); err == nil {
		t.Fatal("reset: no error")
	}
	for m, want := range map[testutil.Mode]int{testutil.HTTP502: 502, testutil.HTTP503: 503} {
		p.Set(t, m)
		if code, _, err := get(5 * time.Second); err != nil || code != want {
			t.Fatalf("%s: %d %v", m, code, err)
		}
	}
	p.SetTruncate(100)
	p.Set(t, testutil.Truncate)
	if _, _, err := get(5 * time.Second); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncate: %v", err)
	}
	p.SetDelay(300 * time.Millisecond)
	p.Set(t, testutil.Delay)
	start = time.Now()
	if code, _, err := get(5 * time.Second); err != nil || code != 200 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("delay: %d %v after %s", code, err, time.Since(start))
	}
	p.Set(t, testutil.Pass)
	if code, _, err := get(5 * time.Second); err != nil || code != 200 {
		t.Fatalf("pass again: %d %v", code, err)
	}
}

// TestProxyBlackholeMutesOpenConnections: a partition silences a
// connection that was already open, as keep-alive clients meet it.
func TestProxyBlackholeMutesOpenConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c) }() // echo
		}
	}()
	p := testutil.NewProxy(t, ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2)
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	p.Set(t, testutil.Blackhole)
	_, _ = c.Write([]byte("hi"))
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var ne net.Error
	if _, err := c.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("an open connection after the blackhole: %v, want silence (a read timeout)", err)
	}
}
