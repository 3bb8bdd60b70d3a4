package runner_test

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

// TestEstimatesReachPoliciesOnlyThroughTrust: the class, not the case.
// A scheduler's start estimate was trusted raw (one sweep saw the year
// 4068). So every function of runner that ranks candidates (calls choose)
// first passes them through trustEstimates, and a load's EstimatedStart is
// read only in estimates.go and in the policies' comparison (better) and
// the record's probe (probe): a new ranking, such as spreading an array
// over clusters, fails here until it trusts estimates the same way.
func TestEstimatesReachPoliciesOnlyThroughTrust(t *testing.T) {
	var files []string
	for _, glob := range []string{"*.go", "watcher/*.go"} { // runner and its watcher
		more, err := filepath.Glob(glob)
		require.NoError(t, err)
		files = append(files, more...)
	}
	fset := token.NewFileSet()
	ranked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			trusted := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if id, ok := n.Fun.(*ast.Ident); ok {
						trusted = trusted || id.Name == "trustEstimates"
						if id.Name == "choose" {
							ranked++
							assert.True(t, trusted, "%s: %s ranks candidates without trustEstimates first", fset.Position(n.Pos()), fn.Name.Name)
						}
					}
				case *ast.SelectorExpr:
					if n.Sel.Name == "EstimatedStart" && name != "estimates.go" && fn.Name.Name != "better" && fn.Name.Name != "probe" {
						t.Errorf("%s: %s reads a start estimate; go through trustEstimates (estimates.go)", fset.Position(n.Pos()), fn.Name.Name)
					}
				}
				return true
			})
		}
	}
	assert.Positive(t, ranked, "no ranking found: the walk reads nothing")
}
