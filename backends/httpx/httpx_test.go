package httpx_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

func TestKind(t *testing.T) {
	for status, want := range map[int]error{
		200: nil, 204: nil, 400: backends.ErrInvalid, 422: backends.ErrInvalid, 401: backends.ErrAuth, 403: backends.ErrAuth,
		404: backends.ErrNotFound, 410: backends.ErrNotFound, 408: backends.ErrTransient, 429: backends.ErrTransient,
		500: backends.ErrTransient, 503: backends.ErrTransient,
	} {
		assert.Equal(t, want, httpx.Kind(status), "HTTP %d", status)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	assert.Zero(t, httpx.RetryAfter(h, now))
	h.Set("Retry-After", "7")
	assert.Equal(t, 7*time.Second, httpx.RetryAfter(h, now))
	h.Set("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat))
	assert.Equal(t, 90*time.Second, httpx.RetryAfter(h, now))
	h.Set("Retry-After", "-3")
	assert.Zero(t, httpx.RetryAfter(h, now))
	h.Set("Retry-After", "soon")
	assert.Zero(t, httpx.RetryAfter(h, now))
}

func TestAuthErrorCarriesNoBody(t *testing.T) {
	err := httpx.AuthError("GET /jobs/1", 403, "the server refused the token", "token", "username")
	assert.ErrorIs(t, err, backends.ErrAuth)
	assert.Equal(t, `GET /jobs/1: HTTP 403 Forbidden: the server refused the token; check the keys "token" and "username" in the credentials Secret: credentials refused`, err.Error())
	assert.Equal(t, " (code BXNIM0415E)", httpx.Code("BXNIM0415E"))
	assert.Equal(t, "", httpx.Code("Bearer abc"), "a code with spaces may be an echo")
}

func TestClip(t *testing.T) {
	assert.Equal(t, "abc", httpx.Clip("abc", 3))
	assert.Equal(t, "ab...", httpx.Clip("abc", 2))
	assert.Equal(t, "a...", httpx.Clip("aé", 2), "never half a rune")
}

func TestOpenReadStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("X-Test"))
		_, _ = w.Write([]byte(strings.Repeat("x", 10) + string(b)))
	}))
	defer srv.Close()
	ctx := context.Background()
	body := func() (io.Reader, error) { return strings.NewReader("yz"), nil }
	req := httpx.Request{Method: "POST", URL: srv.URL + "/a?key=SECRET", Header: http.Header{"X-Test": {"1"}}, Body: body, Timeout: time.Second}
	assert.Equal(t, "POST /a", req.Op(), "the query may hold a key")

	resp, err := httpx.Open(ctx, srv.Client(), req)
	require.NoError(t, err)
	assert.Equal(t, "1", resp.Header.Get("X-Echo"))
	b, err := httpx.ReadAll(ctx, req.Op(), resp, 4)
	require.NoError(t, err)
	assert.Equal(t, "xxxx", string(b), "read within the limit")

	resp, err = httpx.Open(ctx, srv.Client(), req)
	require.NoError(t, err)
	var sb strings.Builder
	n, err := httpx.Stream(ctx, req.Op(), resp, &sb, -1)
	require.NoError(t, err)
	assert.Equal(t, int64(12), n)
	assert.Equal(t, "xxxxxxxxxxyz", sb.String())

	_, err = httpx.Open(ctx, srv.Client(), httpx.Request{Method: "GET", URL: srv.URL + "/slow", Timeout: 50 * time.Millisecond})
	assert.ErrorIs(t, err, backends.ErrTransient, "a timeout is transient")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = httpx.Open(cctx, srv.Client(), httpx.Request{Method: "GET", URL: srv.URL})
	assert.True(t, errors.Is(err, context.Canceled), "the caller's own cancellation stays itself: %v", err)

	_, err = httpx.Open(ctx, srv.Client(), httpx.Request{Method: "GET", URL: "http://[::1"})
	assert.ErrorIs(t, err, backends.ErrInvalid)
}

func TestWithRetryAfter(t *testing.T) {
	base := backends.Transient(errors.New("HTTP 503 from x"))
	err := fmt.Errorf("submitting: %w", httpx.WithRetryAfter(base, 30*time.Second))
	assert.Equal(t, 30*time.Second, httpx.RetryAfterOf(err))
	assert.ErrorIs(t, err, backends.ErrTransient)
	assert.Equal(t, "submitting: HTTP 503 from x", err.Error())
	assert.Same(t, base, httpx.WithRetryAfter(base, 0))
	assert.Zero(t, httpx.RetryAfterOf(base))
}
