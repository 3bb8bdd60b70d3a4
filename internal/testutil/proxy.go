package testutil

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Mode is what the fault proxy does with a connection: the faults a
// network, a load balancer or a dying server inflict on a client.
type Mode int

const (
	// Pass forwards both ways.
	Pass Mode = iota
	// Blackhole accepts and never answers (a partition, a dropped route):
	// connections already open go silent too.
	Blackhole
	// Refuse stops listening: connection refused, as when the server stopped.
	Refuse
	// Reset accepts and resets the connection at once (TCP RST).
	Reset
	// Delay forwards after holding each new connection for Proxy.Delay.
	Delay
	// Truncate forwards the request but only the first Proxy.TruncateAt
	// bytes of the answer, then closes.
	Truncate
	// HTTP502 and HTTP503 read one request and answer it with that status
	// and an empty body, as a gateway in front of a dead server does.
	HTTP502
	HTTP503
)

func (m Mode) String() string {
	return [...]string{"pass", "blackhole", "refuse", "reset", "delay", "truncate", "http-502", "http-503"}[m]
}

// Proxy is the tests' fault proxy: it forwards TCP connections on a
// loopback port to a target, and injects one fault at a time (Set), so a
// test can take a real server (slurmrestd, the kube-apiserver, Ray, sshd)
// away from the client under test without disturbing the other tests that
// share it.
type Proxy struct {
	Addr   string
	target string

	mu         sync.Mutex
	mode       Mode
	delay      time.Duration
	truncateAt int
	ln         net.Listener
	conns      map[*link]struct{}
}

// link is one proxied connection: the client's side and the server's.
type link struct {
	client, server net.Conn
	silent         bool // blackholed: the client's side is kept open and mute
}

// NewProxy starts a proxy to target (host:port) in Pass mode; it is closed
// at cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, conns: map[*link]struct{}{}}
	p.serve(ln)
	t.Cleanup(func() { p.close(Refuse) })
	return p
}

// Set switches the proxy to mode m for new connections. Leaving Pass ends
// the connections already open the way m would (a blackhole mutes them, the
// other faults reset them); going back to Pass keeps them.
func (p *Proxy) Set(t testing.TB, m Mode) {
	t.Helper()
	p.close(m)
	p.mu.Lock()
	p.mode = m
	listening := p.ln != nil
	p.mu.Unlock()
	if m == Refuse || listening {
		return
	}
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}

// SetDelay sets how long Delay holds a new connection.
func (p *Proxy) SetDelay(d time.Duration) { p.mu.Lock(); p.delay = d; p.mu.Unlock() }

// SetTruncate sets how many bytes of an answer Truncate lets through.
func (p *Proxy) SetTruncate(n int) { p.mu.Lock(); p.truncateAt = n; p.mu.Unlock() }

// Cut is Set(Refuse) and Restore is Set(Pass): the outage most tests need.
func (p *Proxy) Cut() { p.close(Refuse) }

// Restore listens again and passes connections.
func (p *Proxy) Restore(t testing.TB) { p.Set(t, Pass) }

// close ends the open connections as mode m would, and stops listening for
// Refuse.
func (p *Proxy) close(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == Pass {
		return
	}
	if m == Refuse && p.ln != nil {
		p.ln.Close()
		p.ln = nil
		p.mode = Refuse
	}
	for l := range p.conns {
		l.server.Close()
		if m == Blackhole {
			l.silent = true
			continue
		}
		resetConn(l.client)
		delete(p.conns, l)
	}
}

func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST, not FIN
	}
	c.Close()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			m, delay, n := p.mode, p.delay, p.truncateAt
			p.mu.Unlock()
			go p.handle(c, m, delay, n)
		}
	}()
}

// handle serves one connection in mode m.
func (p *Proxy) handle(c net.Conn, m Mode, delay time.Duration, n int) {
	switch m {
	case Blackhole:
		_, _ = io.Copy(io.Discard, c) // read and ignore until the client gives up
		c.Close()
		return
	case Reset, Refuse:
		resetConn(c)
		return
	case HTTP502, HTTP503:
		answerHTTP(c, map[Mode]int{HTTP502: http.StatusBadGateway, HTTP503: http.StatusServiceUnavailable}[m])
		return
	case Delay:
		time.Sleep(delay)
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		resetConn(c)
		return
	}
	l := &link{client: c, server: s}
	p.mu.Lock()
	p.conns[l] = struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	var from io.Reader = s
	if m == Truncate {
		from = io.LimitReader(s, int64(n))
	}
	_, _ = io.Copy(c, from)
	p.mu.Lock()
	silent := l.silent
	delete(p.conns, l)
	p.mu.Unlock()
	s.Close()
	if silent {
		_, _ = io.Copy(io.Discard, c)
	}
	c.Close()
}

// answerHTTP reads one HTTP request from c and answers it with status.
func answerHTTP(c net.Conn, status int) {
	defer c.Close()
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status, http.StatusText(status))
}
