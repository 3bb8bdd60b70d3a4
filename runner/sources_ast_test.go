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

// sources parses the non-test Go files that globs match (relative to
// runner's directory), for the tests that hold a class of code by walking
// it: one parse, so every walker reads the files the same way.
func sources(t *testing.T, globs ...string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for _, glob := range globs {
		names, err := filepath.Glob(glob)
		require.NoError(t, err)
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			require.NoError(t, err)
			files = append(files, f)
		}
	}
	require.NotEmpty(t, files, "no Go file matches %v", globs)
	return fset, files
}

// funcDecls is every function with a body in files.
func funcDecls(files []*ast.File) []*ast.FuncDecl {
	var out []*ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				out = append(out, fn)
			}
		}
	}
	return out
}
