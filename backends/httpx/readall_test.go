package httpx_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// ReadAll returns the whole answer, with or without a Content-Length, and
// cuts it at the limit; with a Content-Length it allocates the answer once
// instead of growing a buffer by copies (2–3 times the answer's size).
func TestReadAllSizes(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sized" {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		} else {
			w.(http.Flusher).Flush() // no Content-Length: chunked
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	read := func(path string, limit int64) ([]byte, uint64) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b, err := httpx.ReadAll(context.Background(), "GET "+path, resp, limit)
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		return b, after.TotalAlloc - before.TotalAlloc
	}
	b, alloc := read("/sized", 2<<20)
	assert.Equal(t, body, string(b))
	assert.Less(t, alloc, uint64(len(body))*5/4, "bytes allocated to read a 1 MiB answer with its Content-Length")
	b, _ = read("/chunked", 2<<20)
	assert.Equal(t, body, string(b))
	b, _ = read("/sized", 1000)
	assert.Equal(t, body[:1000], string(b))
	b, _ = read("/chunked", 1000)
	assert.Equal(t, body[:1000], string(b))
}
