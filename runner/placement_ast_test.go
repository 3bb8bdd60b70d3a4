package runner

import (
	"go/ast"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryPlacementCountsIntoTheSharedLoad: a function that probes the
// targets to put work on one (a placement, a spread, a move) counts that
// work into the shared figures it chose on (reserve, or reserveShares for
// a spread's shares), or the next placement of a burst piles onto the
// cluster it just filled: a spread counted nothing until issue 43.
func TestEveryPlacementCountsIntoTheSharedLoad(t *testing.T) {
	fset, files := sources(t, "*.go")
	placers := 0
	for _, fn := range funcDecls(files) {
		calls := calledNames(fn.Body)
		if fn.Name.Name == "probeTargets" || !calls["probeTargets"] {
			continue
		}
		placers++
		if !calls["reserve"] && !calls["reserveShares"] {
			t.Errorf("%s: %s probes the targets and places work without counting it into the shared load (reserve / reserveShares)",
				fset.Position(fn.Pos()), fn.Name.Name)
		}
	}
	require.GreaterOrEqual(t, placers, 2, "no placement found: the walk reads nothing")
}

// calledNames is the names of the functions and methods body calls.
func calledNames(body *ast.BlockStmt) map[string]bool {
	out := map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			switch f := call.Fun.(type) {
			case *ast.SelectorExpr:
				out[f.Sel.Name] = true
			case *ast.Ident:
				out[f.Name] = true
			}
		}
		return true
	})
	return out
}
