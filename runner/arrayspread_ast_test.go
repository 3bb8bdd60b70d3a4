package runner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChunkIDsReachBackendsThroughRoute: a spread array's chunk id names
// its cluster ("b:77"), so a chunk's id (a chunkRef's id) handed straight
// to a backend's Status, ArrayStatus, Cancel or FindByKey would ask the
// placed cluster about another cluster's job, or a job of the same number
// there. In the array files every such call takes the id route returned.
func TestChunkIDsReachBackendsThroughRoute(t *testing.T) {
	files, err := filepath.Glob("array*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !backendCall[sel.Sel.Name] {
				return true
			}
			calls++
			for _, arg := range call.Args {
				if s, ok := arg.(*ast.SelectorExpr); ok && s.Sel.Name == "id" {
					t.Errorf("%s: a chunk's id goes to %s without route (arrayspread.go)", fset.Position(arg.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	require.Positive(t, calls, "no backend call found: the walk reads nothing")
}

var backendCall = map[string]bool{"Status": true, "ArrayStatus": true, "Cancel": true, "FindByKey": true}
