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

// TestNoLoggerCarriesTheRecordOnEveryLine: the class, not the case. A
// logger made with With(... "record", ...) repeats the record's full name
// on every line it writes (invoke's did: a state file's path or a
// ConfigMap's namespace/name on each of them); the record is said once, at
// start, by the command. Lines that are about the record may name it.
// (The step's log: runner, its watcher and the command.)
func TestNoLoggerCarriesTheRecordOnEveryLine(t *testing.T) {
	var files []string
	for _, dir := range []string{".", "watcher", "../cmd/bridge-runner"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		files = append(files, m...)
	}
	fset := token.NewFileSet()
	withs := 0
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
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "With" {
				return true
			}
			withs++
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Value == `"record"` {
					t.Errorf("%s: a logger made With(\"record\", ...) names the record on every line; say it once", fset.Position(call.Pos()))
				}
			}
			return true
		})
	}
	assert.Greater(t, withs, 3, "the loggers' With calls were found")
}
