package runner

import (
	"go/ast"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every ask of an array limit in the runner goes through its cluster
// (cluster.Cluster.ArrayLimit takes the context and the backend): a call
// of a backend's own ArrayLimit(ctx) would ask once per step again.
func TestArrayLimitsAreAskedThroughTheCluster(t *testing.T) {
	fset, files := sources(t, "*.go")
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "ArrayLimit" {
				assert.Len(t, call.Args, 2, "%s: a backend's ArrayLimit asked directly; ask the target's cluster.Cluster.ArrayLimit", fset.Position(call.Pos()))
			}
			return true
		})
	}
}
