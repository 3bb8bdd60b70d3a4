package cluster

import (
	"context"
	"encoding/hex"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A cluster's identity is what steps and agents of two releases must agree
// on (records carry status.watchGroup, leases are named by it, everything
// shared is tagged with the key): these are the values the watcher's
// WatchGroup and GroupKey gave before the cluster was a type (PBKDF2 and
// HMAC-SHA256 as RFC 8018 and 2104 define them, computed apart).
func TestIdentityIsTheWatchGroupsAsBefore(t *testing.T) {
	c := New(Spec{Backend: "slurm", URL: "https://slurm.test:6820", CredentialText: []byte("token")})
	assert.Equal(t, "8744c52901787fe4f2a4e5e7", c.Group())
	assert.Equal(t, "96115e0ae619d6c8d78fdbcaf60615b9970596336398c44cf024c070d88cb93e", hex.EncodeToString(c.Key()))
	assert.Equal(t, "https://slurm.test:6820", c.Origin)
}

// Each part of the identity counts, and a cluster without credentials has
// no key: nothing is shared then.
func TestIdentityTellsClustersApart(t *testing.T) {
	base := Spec{Backend: "slurm", URL: "https://slurm.test:6820", CredentialText: []byte("token")}
	a := New(base)
	for name, s := range map[string]Spec{
		"backend":     {Backend: "lsf", URL: base.URL, CredentialText: base.CredentialText},
		"url":         {Backend: base.Backend, URL: "https://other.test:6820", CredentialText: base.CredentialText},
		"credentials": {Backend: base.Backend, URL: base.URL, CredentialText: []byte("another")},
	} {
		b := New(s)
		assert.NotEqual(t, a.Group(), b.Group(), name)
		assert.NotEqual(t, a.Key(), b.Key(), name)
	}
	assert.Nil(t, New(Spec{Backend: "slurm", URL: base.URL}).Key())
	assert.Equal(t, "https://slurm.test:443", New(Spec{Backend: "slurm", URL: "HTTPS://Slurm.test/slurm"}).Origin, "scheme://host:port, the default port filled in")
}

// The class, not the case: a cluster's identity is derived here and
// nowhere else. A file outside this package that derives a slow digest
// (pbkdf2) or spells the identity's labels rebuilds it, and fails here
// (before, the watcher's file computed it and placement resolved the
// credentials it came from).
func TestIdentityIsDerivedOnlyHere(t *testing.T) {
	root := ".."
	walked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor" || n == "node_modules") || path == filepath.Join(root, "cluster") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		walked++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "pbkdf2" {
					t.Errorf("%s derives a digest with pbkdf2: a cluster's identity is cluster.New's (Group, Key)", path)
				}
			case *ast.BasicLit:
				if strings.Contains(n.Value, "bridge-runner watch group") || strings.Contains(n.Value, "bridge-runner shared state") {
					t.Errorf("%s spells a label of the cluster's identity: take cluster.New's Group and Key", path)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, walked, 300, "the walk reads the module's Go files")
}

// A book asks a cluster's array limit once for every caller, also for
// callers at once; a failed ask is not kept; a cluster made with the book
// has the limit filled in once known; another cluster is asked for its own.
func TestBookAsksTheArrayLimitOncePerCluster(t *testing.T) {
	book := NewBook()
	spec := Spec{Backend: "slurm", URL: "https://hpc.example:6820", CredentialText: []byte("token\x00a\x00"), Book: book}
	var asked atomic.Int32
	ask := limiterFunc(func(context.Context) (int, error) { asked.Add(1); return 1001, nil })
	fail := limiterFunc(func(context.Context) (int, error) { asked.Add(1); return 0, errors.New("slurmrestd: 503") })

	_, err := New(spec).ArrayLimit(context.Background(), fail)
	require.Error(t, err)
	assert.Zero(t, New(spec).Limits.MaxArraySize, "a failure is not kept")
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := New(spec).ArrayLimit(context.Background(), ask)
			assert.NoError(t, err)
			assert.Equal(t, 1001, n)
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(2), asked.Load(), "the failed ask, then one for all twenty")
	assert.Equal(t, 1001, New(spec).Limits.MaxArraySize, "filled in where the cluster is built")

	other := spec
	other.URL = "https://other.example:6820"
	assert.Zero(t, New(other).Limits.MaxArraySize)
	_, err = New(other).ArrayLimit(context.Background(), ask)
	require.NoError(t, err)
	assert.Equal(t, int32(3), asked.Load(), "another cluster is asked for its own")

	spec.Book = nil
	_, err = New(spec).ArrayLimit(context.Background(), ask)
	require.NoError(t, err)
	assert.Equal(t, int32(4), asked.Load(), "without a book each step asks")
}

type limiterFunc func(context.Context) (int, error)

func (f limiterFunc) ArrayLimit(ctx context.Context) (int, error) { return f(ctx) }

// The Key a step needs to read its agent's heartbeat (an HMAC) does not
// derive the Group, whose digest is slow on purpose: at a burst every step
// reads its heartbeat, and 1,000 steps in one process paid ~20 ms of CPU
// each for a digest they did not use.
func TestKeyDoesNotDeriveTheGroup(t *testing.T) {
	c := New(Spec{Backend: "slurm", URL: "https://hpc.example.org:6820", CredentialText: []byte("token")})
	require.NotNil(t, c.Key())
	assert.Empty(t, c.id.group, "the group's digest derived for the Key")
	assert.NotEmpty(t, c.Group())
}
