package quantum

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// RateLimitError is a 429 answer; RetryAfter is the server's Retry-After
// (zero when it gave none). It is wrapped as backends.ErrTransient.
type RateLimitError struct {
	Err        *apiError
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	s := e.Err.Error() + " (rate limited: IBM Quantum accepts 5 jobs a minute per user"
	if e.RetryAfter > 0 {
		s += "; Retry-After: " + e.RetryAfter.String()
	}
	return s + ")"
}

func (e *RateLimitError) Unwrap() error { return e.Err }

// apiError is a non-2xx answer of the service or of IAM. msg is the
// reason as the server wrote it (Error makes it fit with httpx.Reason);
// code and trace are shown only in the shapes httpx.Code and traceID
// accept.
type apiError struct {
	op         string
	server     string
	status     int
	code       string
	msg        string
	trace      string
	retryAfter time.Duration
}

func (e *apiError) Error() string {
	s := e.op + ": " + httpx.Failure(e.status, e.server, e.msg, "") + httpx.Code(e.code)
	if traceID().MatchString(e.trace) {
		s += " [trace " + e.trace + "; IBM support can look it up]"
	}
	return s
}

// traceID is the shape of the service's trace: a UUID.
var traceID = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
})

// readAPIError reads the documented error shapes: the service's
// {"errors":[{"code","message"}],"trace"} and IAM's
// {"errorCode","errorMessage"}. Of the errors, the first one's message is
// kept (one field: a value split over two is not joined again), and every
// code. Any other body is not read at all.
func readAPIError(op, server string, resp *http.Response) *apiError {
	buf := httpx.ReadError(resp)
	e := &apiError{op: op, server: server, status: resp.StatusCode, retryAfter: httpx.RetryAfter(resp.Header, time.Now())}
	var body struct {
		Errors []struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"errors"`
		Trace        string `json:"trace"`
		ErrorCode    string `json:"errorCode"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(buf, &body) != nil {
		return e
	}
	e.trace = body.Trace
	var codes []string
	for _, x := range body.Errors {
		if c := rawScalar(x.Code); c != "" && c != "null" {
			codes = append(codes, c)
		}
	}
	e.code = strings.Join(codes, ",")
	if len(body.Errors) > 0 {
		e.msg = body.Errors[0].Message
	}
	if e.msg == "" && e.code == "" {
		e.msg, e.code = body.ErrorMessage, body.ErrorCode
	}
	return e
}

// classify turns an apiError into what the runner understands.
func classify(e *apiError) error {
	switch {
	case e.status == http.StatusTooManyRequests:
		return httpx.WithRetryAfter(backends.Transient(&RateLimitError{Err: e, RetryAfter: e.retryAfter}), e.retryAfter)
	case e.status >= 500 || e.status == http.StatusRequestTimeout:
		return httpx.WithRetryAfter(backends.Transient(e), e.retryAfter)
	case httpx.IsAuth(e.status):
		// Never the server's words: an echo of the request would carry the
		// bearer token (see httpx.AuthError).
		return httpx.AuthError(e.op, e.status, "IBM Quantum refused the IAM token made from the API key, or the service CRN"+httpx.Code(e.code), "apikey", "crn")
	}
	return e
}

// open sends one service request (JSON body when body is not nil); a 401
// makes a new IAM token and sends it once more. A 2xx answer comes back
// open; any other status is a classified error.
func (b *Backend) open(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	op := method + " " + path
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		crn, apikey, err := b.credentials()
		if err != nil {
			return nil, err
		}
		tok, err := b.bearer(ctx, apikey)
		if err != nil {
			return nil, err
		}
		u := b.base + path
		if len(query) > 0 {
			u += "?" + query.Encode()
		}
		req := httpx.Request{Method: method, URL: u, Timeout: b.requestTimeout, Header: http.Header{}, Server: "IBM Quantum"}
		if payload != nil {
			req.Body = func() (io.Reader, error) { return bytes.NewReader(payload), nil }
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Service-CRN", crn)
		b.mu.Lock()
		req.Header.Set("IBM-API-Version", cmp.Or(b.apiVersion, DefaultAPIVersion))
		b.mu.Unlock()
		req.Header.Set("Accept", "application/json")
		resp, err := httpx.Open(ctx, b.client, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		e := readAPIError(op, "IBM Quantum", resp)
		if e.status == http.StatusUnauthorized && attempt == 1 {
			b.dropToken(tok)
			b.log.Debug("IBM Quantum refused the IAM token; making a new one", "request", op)
			continue
		}
		return nil, classify(e)
	}
}

// do is open followed by reading the whole answer.
func (b *Backend) do(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	resp, err := b.open(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	return httpx.ReadAll(ctx, method+" "+path, resp, httpx.MaxBody)
}
