// Package cluster is a remote cluster as the code knows it: one value that
// backend construction, placement and the watcher all take, so that
// nobody rebuilds its identity (the watch group's digest and key) from a
// backend name, a URL and a credentials directory again.
//
// It imports record and backends only: runner (which resolves a target's
// credentials and builds the backend), its watcher and the agent take it.
package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// Cluster is one remote cluster a job runs on, with the credentials it
// is asked with. Its identity (Group, Key) is New's, derived once.
type Cluster struct {
	// Backend is the registry's name of the system (slurm, htcondor, ...).
	Backend string
	// URL is the resourceURL as the description gives it; Origin its
	// scheme://host:port (record.CanonicalOrigin; "" for a URL without a
	// host, such as the local backend's).
	URL    string
	Origin string
	// Credentials are those bound to Origin: the target's resolved
	// credentials directory, or the step's.
	Credentials backends.Credentials
	// Limits are what the cluster allows, as far as known (zero: unknown).
	Limits Limits
	// Budget is the site's budget for batched queries to the cluster, in
	// requests a second (0: the watcher's default).
	Budget float64
	// APIVersion is what discovery found (the backend's memo, such as
	// Slurm's REST API version; "" until discovered).
	APIVersion string

	id   *identity
	book *Book // where its limits are asked once (nil: by each step)
}

// identity is a cluster's Group and Key, each derived at its first
// asking: building a backend needs neither, and the group's digest is slow
// on purpose, so a step that needs only the Key (to read its agent's
// heartbeat) never pays for it.
type identity struct {
	groupOnce, keyOnce sync.Once
	backend, url, text string
	group              string
	key                []byte
}

func (id *identity) groupOf() string {
	id.groupOnce.Do(func() { id.group = groupDigest(id.backend, id.url, []byte(id.text)) })
	return id.group
}

func (id *identity) keyOf() []byte {
	id.keyOnce.Do(func() { id.key = groupKey(id.backend, id.url, []byte(id.text)) })
	return id.key
}

// Limits are a cluster's limits that a step plans with.
type Limits struct {
	// MaxArraySize is the largest array the cluster takes in one submit.
	MaxArraySize int
	// Partitions the cluster offers (nil: unknown).
	Partitions []string
}

// Spec is what a Cluster is made of: its target as resolved by the step.
type Spec struct {
	Backend, URL string
	Credentials  backends.Credentials
	// CredentialText is every credential of the directory, names and
	// values (see runner's credentialBytes): the group's digest and key
	// are derived from it, never written. Empty: no credentials to key
	// shared state on (Key is nil).
	CredentialText []byte
	Limits         Limits
	Budget         float64
	APIVersion     string
	// Book, when the process keeps one, is what its steps learnt of their
	// clusters: Limits the book knows are filled in, and ArrayLimit asks
	// through it, once per cluster.
	Book *Book
}

// New makes the cluster of spec and its identity. (A spec without a
// backend is refused where the backend is built, by the registry.)
func New(spec Spec) Cluster {
	origin, _ := record.CanonicalOrigin(spec.URL)
	c := Cluster{Backend: spec.Backend, URL: spec.URL, Origin: origin, Credentials: spec.Credentials,
		Limits: spec.Limits, Budget: spec.Budget, APIVersion: spec.APIVersion,
		id: &identity{backend: spec.Backend, url: spec.URL, text: string(spec.CredentialText)}, book: spec.Book}
	if c.book != nil && c.Limits.MaxArraySize == 0 {
		c.Limits.MaxArraySize = c.book.known(c.id.bookKey()).MaxArraySize
	}
	return c
}

// ArrayLimit is the largest array the cluster takes in one submit: its
// Limits' when known, else asked with l (the cluster's backend) through
// the cluster's Book, once for every step of the process on this cluster
// (each step asks for itself without a book).
func (c Cluster) ArrayLimit(ctx context.Context, l backends.ArrayLimiter) (int, error) {
	if c.Limits.MaxArraySize > 0 {
		return c.Limits.MaxArraySize, nil
	}
	if c.book == nil || c.id == nil {
		return l.ArrayLimit(ctx)
	}
	return c.book.arrayLimit(ctx, c.id.bookKey(), l.ArrayLimit)
}

// Group names the jobs one watcher may follow together: the same backend,
// URL and credentials (the watcher asks with its own, so a job joins only
// the group of the very credentials it runs with). Records carry it
// (status.watchGroup) and the group's lease is named by it.
func (c Cluster) Group() string {
	if c.id == nil {
		return ""
	}
	return c.id.groupOf()
}

// Key authenticates what the cluster's steps and agent share in
// ConfigMaps (leases, observations, heartbeats, load entries); nil
// without credentials: nothing is shared then.
func (c Cluster) Key() []byte {
	if c.id == nil {
		return nil
	}
	return c.id.keyOf()
}

// groupDigest is a slow salted digest, since it is written where more
// people may read it than may read the Secret. Its inputs are those of
// the watch group since it was one (backend, resourceURL, credentials):
// steps of two releases of one cluster stay one group.
func groupDigest(backend, url string, credentials []byte) string {
	salt := []byte("bridge-runner watch group\x00" + backend + "\x00" + url)
	k, err := pbkdf2.Key(sha256.New, string(credentials), salt, 50_000, 12)
	if err != nil { // only for parameters out of FIPS bounds, not these
		sum := sha256.Sum256(append(salt, credentials...))
		k = sum[:12]
	}
	return hex.EncodeToString(k)
}

// groupKey is derived from the credentials that define the group with a
// fixed label.
func groupKey(backend, url string, credentials []byte) []byte {
	if len(credentials) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, credentials)
	mac.Write([]byte("bridge-runner shared state v1\x00" + backend + "\x00" + url))
	return mac.Sum(nil)
}
