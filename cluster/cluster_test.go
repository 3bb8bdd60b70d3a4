package cluster

import (
	"encoding/hex"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
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
