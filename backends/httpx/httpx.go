// Package httpx is the HTTP plumbing the backends share: sending a request
// with a per-request timeout, reading answers within a size limit (or
// streaming them), sorting a failed answer into the runner's sentinel errors,
// the server's Retry-After, and error text that carries no secret.
//
// A backend keeps what is its own: the wire format of its bodies and errors,
// its authentication and session handling.
package httpx

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Size limits for what is read of one answer.
const (
	// MaxBody bounds a whole answer that is read into memory (a job's
	// complete log included).
	MaxBody = 256 << 20
	// MaxErrorBody bounds the body of a failed answer: only its message
	// is of use.
	MaxErrorBody = 1 << 20
)

// Request is one HTTP request. Body is a factory so that the request can be
// sent again (after a new logon, say).
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   func() (io.Reader, error)
	// Timeout bounds the whole exchange, reading the body included; zero
	// means none beyond ctx.
	Timeout time.Duration
	// Server names the server in messages as the user knows it
	// ("slurmrestd"); "the server" when empty.
	Server string
	// Field is the setting that gives the URL, named when the URL is
	// wrong (a refused redirect); "resourceURL" when empty.
	Field string
}

func (r Request) server() string { return cmp.Or(r.Server, "the server") }
func (r Request) field() string  { return cmp.Or(r.Field, "resourceURL") }

// Op names the request in messages: method and path, never the query
// (which may carry a key) nor user info.
func (r Request) Op() string {
	if u, err := url.Parse(r.URL); err == nil {
		return r.Method + " " + u.EscapedPath()
	}
	return r.Method
}

// Open sends r and returns the answer with its body open, whatever the
// status: the caller reads or streams it and must close it. Closing the body
// ends r's timeout. A failure to send is wrapped as ErrTransient (the
// caller's own cancellation is returned as ctx.Err()); a URL that cannot
// make a request, and a redirect the policy refuses (CheckRedirect) or the
// client could not follow, are ErrInvalid naming r.Field.
func Open(ctx context.Context, client *http.Client, r Request) (*http.Response, error) {
	var body io.Reader
	if r.Body != nil {
		var err error
		if body, err = r.Body(); err != nil {
			return nil, err
		}
	}
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if r.Timeout > 0 {
		rctx, cancel = context.WithTimeout(ctx, r.Timeout)
	}
	req, err := http.NewRequestWithContext(rctx, r.Method, r.URL, body)
	if err != nil {
		cancel()
		return nil, backends.Invalid(r.field(), "%v", unwrapURLError(err))
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	c := *client // the redirect policy holds whoever built the client
	c.CheckRedirect = CheckRedirect
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		if rerr := RedirectError(err, r.server(), r.Op(), r.field()); rerr != nil {
			return nil, rerr
		}
		return nil, Transport(ctx, r.Op(), err)
	}
	if isRedirect(resp.StatusCode) {
		resp.Body.Close()
		cancel()
		return nil, unfollowed(resp, r.server(), r.Op(), r.field())
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

// Transport classifies a failure to talk to the server: the caller's own
// cancellation stays itself, anything else is transient. net/url's
// "Get \"URL\": " prefix is dropped: op names the request already, and the
// URL's query could hold a key.
func Transport(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return backends.Transient(fmt.Errorf("%s: %w", op, unwrapURLError(err)))
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// cancelOnClose ends the request's timeout context when the body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// ReadAll reads and closes resp's body, at most limit bytes; a failure while
// reading is transient.
func ReadAll(ctx context.Context, op string, resp *http.Response, limit int64) ([]byte, error) {
	defer resp.Body.Close()
	buf, err := readSized(io.LimitReader(resp.Body, limit), resp.ContentLength, limit)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, backends.Transient(fmt.Errorf("%s: reading the answer: %w", op, err))
	}
	return buf, nil
}

// readSized reads r to the end into one buffer of the announced size (plus
// one byte, to see the end without growing). io.ReadAll grows its buffer by
// copying, which allocates two to three times the answer: for slurmrestd's
// /openapi/v3 (200–650 KB, read once per process) that was the largest
// single use of the heap. Without a usable size it is io.ReadAll.
func readSized(r io.Reader, size, limit int64) ([]byte, error) {
	if size <= 0 || size > limit {
		return io.ReadAll(r)
	}
	buf := make([]byte, 0, size+1)
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) { // longer than announced: grow as io.ReadAll does
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// Stream copies resp's body to w (at most limit bytes, limit < 0 for no
// limit) and closes it, for answers that are passed on rather than parsed
// (logs, output files). It returns the bytes copied.
func Stream(ctx context.Context, op string, resp *http.Response, w io.Writer, limit int64) (int64, error) {
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if limit >= 0 {
		r = io.LimitReader(r, limit)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		return n, backends.Transient(fmt.Errorf("%s: reading the answer: %w", op, err))
	}
	return n, nil
}

// ReadError reads a failed answer's body (at most MaxErrorBody) and closes it.
func ReadError(resp *http.Response) []byte {
	defer resp.Body.Close()
	buf, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	return buf
}

// Kind sorts an HTTP status into the runner's sentinels: 401/403 ErrAuth,
// 404/410 ErrNotFound, 408/429/5xx ErrTransient, other 4xx ErrInvalid, nil
// for the rest. A backend refines it where its protocol says more (Slurm's
// error numbers, LSF's refused session).
func Kind(status int) error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return backends.ErrAuth
	case status == http.StatusNotFound || status == http.StatusGone:
		return backends.ErrNotFound
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return backends.ErrTransient
	case status >= 400:
		return backends.ErrInvalid
	}
	return nil
}

// IsAuth reports whether status means the credentials were refused.
func IsAuth(status int) bool { return Kind(status) == backends.ErrAuth }

// IsTransient reports whether status is worth a later retry.
func IsTransient(status int) bool { return Kind(status) == backends.ErrTransient }

// RetryAfter reads a Retry-After header (seconds or an HTTP date); zero
// when there is none or it cannot be read.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return max(time.Duration(n)*time.Second, 0)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now).Round(time.Second), 0)
	}
	return 0
}

// AuthError is what a refused credential says, without a word of the
// server's answer: a server that echoes the request would put the
// credential into the message, in an encoding no scrubbing can be sure to
// recognize. It names what failed and the Secret keys to check.
func AuthError(op string, status int, what string, keys ...string) error {
	msg := fmt.Sprintf("%s: HTTP %d %s: %s", op, status, http.StatusText(status), what)
	if len(keys) > 0 {
		msg += "; check " + quoteKeys(keys) + " in the credentials Secret"
	}
	return fmt.Errorf("%s: %w", msg, backends.ErrAuth)
}

// Code returns " (code C)" for a server's error code made only of letters,
// digits, '-', '_', '.' and ',' (at most 64), which cannot carry a secret of
// ours back; anything else, or nothing, gives "".
func Code(c string) string {
	if c == "" || len(c) > 64 || strings.ContainsFunc(c, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.,", r))
	}) {
		return ""
	}
	return " (code " + c + ")"
}

func quoteKeys(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	if len(q) == 1 {
		return "the key " + q[0]
	}
	return "the keys " + strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// Clip shortens s to n bytes (on a rune boundary) and marks the cut with
// "...", which the runner's scrubber knows: a secret cut in two there is
// still redacted.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func isRuneStart(b byte) bool { return b&0xc0 != 0x80 }

// retryAfterError carries the wait a server asked for (Retry-After) with
// the fault it came with, for the runner's retries.
type retryAfterError struct {
	err  error
	wait time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// WithRetryAfter attaches the server's Retry-After to err (a transient
// fault), so that no retry comes sooner; a zero wait leaves err as it is.
func WithRetryAfter(err error, wait time.Duration) error {
	if err == nil || wait <= 0 {
		return err
	}
	return &retryAfterError{err: err, wait: wait}
}

// RetryAfterOf is the wait attached to err by WithRetryAfter, or zero.
func RetryAfterOf(err error) time.Duration {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.wait
	}
	return 0
}
