package runner

import (
	"go/ast"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestChunkIDsReachBackendsThroughRoute: a spread array's chunk id names
// its cluster ("b:77"), so a chunk's id (a chunkRef's id) handed straight
// to a backend's Status, ArrayStatus, Cancel or FindByKey would ask the
// placed cluster about another cluster's job, or a job of the same number
// there. In the array files every such call takes the id route returned.
func TestChunkIDsReachBackendsThroughRoute(t *testing.T) {
	fset, files := sources(t, "array*.go")
	calls := 0
	for _, f := range files {
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

// TestTaskLogReadersRouteChunks: a function that finds the backend's
// TaskLogReader reads tasks' logs through taskReader, which routes a
// spread array's chunk ids ("b:77") to the cluster that ran them; the
// backend's own reader asked for another cluster's chunk finds no log
// (job.log said "-" for every task of a spread's other clusters).
func TestTaskLogReadersRouteChunks(t *testing.T) {
	fset, files := sources(t, "*.go")
	finders := 0
	for _, fn := range funcDecls(files) {
		if isChunkTasksMethod(fn) || !assertsTo(fn.Body, "TaskLogReader") {
			continue
		}
		finders++
		if !calledNames(fn.Body)["taskReader"] {
			t.Errorf("%s: %s finds a TaskLogReader and reads tasks' logs without taskReader (a spread's chunks on other clusters get no log)",
				fset.Position(fn.Pos()), fn.Name.Name)
		}
	}
	require.GreaterOrEqual(t, finders, 2, "no reader of tasks' logs found: the walk reads nothing")
}

func isChunkTasksMethod(fn *ast.FuncDecl) bool {
	if fn.Recv == nil || len(fn.Recv.List) != 1 {
		return false
	}
	id, ok := fn.Recv.List[0].Type.(*ast.Ident)
	return ok && id.Name == "chunkTasks"
}

// assertsTo reports whether body has a type assertion to backends.<name>.
func assertsTo(body *ast.BlockStmt, name string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if ta, ok := n.(*ast.TypeAssertExpr); ok {
			if sel, ok := ta.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == name {
				found = true
			}
		}
		return true
	})
	return found
}
