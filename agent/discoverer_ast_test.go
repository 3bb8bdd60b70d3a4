package agent_test

import (
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

// Whatever a backend learns of its cluster before its first request
// (backends.Rememberer: Slurm's API version) is what the cluster's agent
// asks once and publishes for every step, and it can only do so through
// backends.Discoverer. So every backend type that recalls a memo must
// also discover it: the next Rememberer without Discover (an HTCondor
// schedd address, a Ray version) fails here instead of costing each step
// its own discovery.
func TestEveryRemembererDiscovers(t *testing.T) {
	methods := map[string]map[string]bool{} // "dir.Type" -> method names
	fset := token.NewFileSet()
	err := filepath.WalkDir("../backends", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			typ := fn.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			id, ok := typ.(*ast.Ident)
			if !ok {
				continue
			}
			k := filepath.Dir(path) + "." + id.Name
			if methods[k] == nil {
				methods[k] = map[string]bool{}
			}
			methods[k][fn.Name.Name] = true
		}
		return nil
	})
	require.NoError(t, err)
	found := 0
	for typ, m := range methods {
		if m["Recall"] && m["Remember"] {
			found++
			assert.True(t, m["Discover"], "%s remembers a memo but cannot discover it: give it Discover (backends.Discoverer), so that the cluster's agent asks once for every step", typ)
		}
	}
	assert.Positive(t, found, "the walk found no Rememberer at all: has the interface moved?")
}
