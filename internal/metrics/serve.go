package metrics

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Route answers one path: its status, content type and body.
type Route func() (status int, contentType, body string)

// Limits of Serve: what one connection may take, and how many at once.
const (
	maxHeaderBytes = 8 << 10
	readTimeout    = 10 * time.Second
	maxConns       = 16
)

// Serve answers GET and HEAD requests on l with routes (by path, the query
// ignored) until ctx ends, then closes l. It speaks just enough HTTP/1.1
// for Prometheus and the kubelet's probes: one request per connection
// (Connection: close), headers read and ignored. Go's http.Server would do
// the same for 0.51 MiB more binary, a quarter of what is left under the
// 20 MiB goal; a scrape or a probe needs nothing more.
func Serve(ctx context.Context, l net.Listener, routes map[string]Route) {
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	slots := make(chan struct{}, maxConns)
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A transient accept failure (e.g. out of file descriptors).
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case slots <- struct{}{}:
			go func() {
				defer func() { <-slots }()
				answer(c, routes)
			}()
		default:
			_ = c.Close() // busy: the client retries at its next scrape or probe
		}
	}
}

// answer reads one request from c and writes its answer.
func answer(c net.Conn, routes map[string]Route) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(readTimeout))
	method, path, status := readRequest(bufio.NewReader(io.LimitReader(c, maxHeaderBytes)))
	ctype, body := "text/plain; charset=utf-8", ""
	switch r := routes[path]; {
	case status != 0:
	case method != http.MethodGet && method != http.MethodHead:
		status = http.StatusMethodNotAllowed
	case r == nil:
		status = http.StatusNotFound
	default:
		status, ctype, body = r()
	}
	if body == "" && status != http.StatusOK {
		body = http.StatusText(status) + "\n"
	}
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		status, http.StatusText(status), ctype, len(body))
	if method == http.MethodHead {
		body = ""
	}
	_, _ = io.WriteString(c, head+body)
}

// readRequest reads the request line and the headers; status is non-zero
// for a request that cannot be answered (malformed, or headers too long).
func readRequest(br *bufio.Reader) (method, path string, status int) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", "", http.StatusBadRequest
	}
	parts := strings.Fields(line)
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "HTTP/1.") || !strings.HasPrefix(parts[1], "/") {
		return "", "", http.StatusBadRequest
	}
	method = parts[0]
	path, _, _ = strings.Cut(parts[1], "?")
	for {
		h, err := br.ReadString('\n')
		if err != nil {
			return method, path, http.StatusRequestHeaderFieldsTooLarge
		}
		if strings.TrimRight(h, "\r\n") == "" {
			return method, path, 0
		}
	}
}
