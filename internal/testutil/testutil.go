// Package testutil holds small helpers that the tests share.
package testutil

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Creds is an in-memory backends.Credentials whose values can change while
// a test runs (as a rotated Secret's files do).
type Creds struct {
	mu sync.Mutex
	m  map[string]string
}

// NewCreds returns credentials holding kv.
func NewCreds(kv map[string]string) *Creds {
	c := &Creds{m: map[string]string{}}
	for k, v := range kv {
		c.m[k] = v
	}
	return c
}

// Get returns the first of names present, trimmed like DirCredentials does.
func (c *Creds) Get(names ...string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		if v, ok := c.m[n]; ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", backends.Invalid("credentials", "none of %s is in the credentials", strings.Join(names, ", "))
}

// Set changes one value.
func (c *Creds) Set(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = v
}

// Delete removes one value.
func (c *Creds) Delete(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (log handlers
// of several goroutines).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Reset empties the buffer.
func (b *SyncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// MapCreds is a fixed backends.Credentials (values as given, no trimming).
type MapCreds map[string]string

// Get returns the first of names with a non-empty value.
func (c MapCreds) Get(names ...string) (string, error) {
	for _, n := range names {
		if v := c[n]; v != "" {
			return v, nil
		}
	}
	return "", backends.Invalid("credentials", "none of %v", names)
}

// RoundTripFunc answers every request with its response, without a network
// (the request body is read and closed, as a server would).
type RoundTripFunc func(*http.Request) *http.Response

func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return f(r), nil
}

// Response is a canned HTTP response; ctype may be empty.
func Response(status int, ctype string, body []byte) *http.Response {
	h := http.Header{}
	if ctype != "" {
		h.Set("Content-Type", ctype)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
}

// RequireFieldError fails t unless err is an ErrInvalid FieldError naming
// one of fields.
func RequireFieldError(t testing.TB, err error, fields ...string) {
	t.Helper()
	var fe *backends.FieldError
	if !errors.As(err, &fe) || !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("an ErrInvalid that is no FieldError: %v", err)
	}
	for _, f := range fields {
		if fe.Field == f {
			return
		}
	}
	t.Fatalf("refusal names %q, want one of %v: %v", fe.Field, fields, err)
}

var (
	yamlDocSep  = regexp.MustCompile(`(?m)^---\s*$`)
	yamlComment = regexp.MustCompile(`(?m)^\s*#.*$`)
)

// YAMLDocs splits the multi-document YAML file at path, dropping documents
// that hold nothing but comments and blank lines.
func YAMLDocs(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range yamlDocSep.Split(string(b), -1) {
		if strings.TrimSpace(yamlComment.ReplaceAllString(d, "")) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}
