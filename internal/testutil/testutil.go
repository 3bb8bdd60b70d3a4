// Package testutil holds small helpers that the backends' tests share.
package testutil

import (
	"bytes"
	"strings"
	"sync"

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

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
