package watcher

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The class, not the cases: every function of runner and of its watcher
// (this package and its parent, which seals the shared load entries) that reads shared
// state a writer of the namespace's ConfigMaps can forge (an observation in
// a record, a lease's fields, a shared load entry) also verifies its tag.
// A new reader that does not fails here.
func TestSharedStateIsReadOnlyWhereItIsVerified(t *testing.T) {
	var files []string
	for _, dir := range []string{".", ".."} { // the watcher and runner
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		files = append(files, m...)
	}
	leaseKeys := map[string]bool{}
	for _, k := range leaseFields {
		leaseKeys[`"`+k+`"`] = true
	}
	fset := token.NewFileSet()
	readers, dirs := 0, map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			what, verifies := sharedStateReads(fn, leaseKeys)
			if len(what) > 0 {
				readers, dirs[filepath.Dir(name)] = readers+1, true
				assert.True(t, verifies, "%s: %s reads %s without verifying its tag (see cluster.Cluster.Key)", fset.Position(fn.Pos()), fn.Name.Name, strings.Join(what, ", "))
			}
		}
	}
	assert.GreaterOrEqual(t, readers, 4, "the walk finds the readers there are (Changed, covers, observe, successors, stateOf, read)")
	assert.Len(t, dirs, 2, "readers are found in both the watcher and runner (the load share's): the walk covers both")
}

// sharedStateReads says what shared state fn reads (an observation, a
// lease's field, a shared load entry) and whether it verifies a tag.
func sharedStateReads(fn *ast.FuncDecl, leaseKeys map[string]bool) (what []string, verifies bool) {
	written := map[ast.Expr]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				written[l] = true
			}
		case *ast.CallExpr:
			switch name := calleeName(n); name {
			case "observation", "TagOK":
				verifies = true
			case "Unmarshal":
				if len(n.Args) == 2 && strings.Contains(exprText(n.Args[1]), "&e") {
					what = append(what, "a shared load entry")
				}
			}
		case *ast.IndexExpr:
			if written[n] {
				return true
			}
			switch idx := exprText(n.Index); {
			case idx == "record.KeyWatchObserved":
				what = append(what, "an observation")
			case leaseKeys[idx] && strings.HasSuffix(exprText(n.X), "Data"), leaseKeys[idx] && exprText(n.X) == "d":
				what = append(what, "a lease's "+idx)
			}
		}
		return true
	})
	return what, verifies
}

func calleeName(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// exprText is a selector, identifier, literal or &x as written.
func exprText(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.BasicLit:
		return e.Value
	case *ast.SelectorExpr:
		return exprText(e.X) + "." + e.Sel.Name
	case *ast.UnaryExpr:
		return e.Op.String() + exprText(e.X)
	}
	return ""
}

// The class, not the case: a writer's own times decide no trust and no
// lapse (leases are judged by the reader's clock: leaseJudge,
// collectLapsed). The times a lease holder writes ("renewed", "taken") are
// never parsed back in the watcher or in runner; a new reader of them
// fails here.
func TestNoWritersTimeIsReadBack(t *testing.T) {
	var files []string
	for _, dir := range []string{".", ".."} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		files = append(files, m...)
	}
	written := map[string]bool{`"renewed"`: true, `"taken"`: true}
	fset, walked := token.NewFileSet(), 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		walked++
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Parse" {
				return true
			}
			if idx, ok := call.Args[1].(*ast.IndexExpr); ok {
				if lit, ok := idx.Index.(*ast.BasicLit); ok && written[lit.Value] {
					t.Errorf("%s: parses a lease's written time %s; judge by the reader's clock (leaseJudge)", fset.Position(call.Pos()), lit.Value)
				}
			}
			return true
		})
	}
	assert.Greater(t, walked, 20, "the walk reads the watcher's and runner's files")
}
