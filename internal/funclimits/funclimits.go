// Package funclimits measures Go functions so that the project's size limits
// (at most 80 lines and cyclomatic complexity 20 per function in runner/, record/, kube/ and
// backends/) are checked by a test rather than by review.
package funclimits

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// Func is one measured function or method.
type Func struct {
	Pos        token.Position // where its declaration starts
	Name       string         // "f" or "(*T).m"
	Lines      int            // from the func keyword to the closing brace
	Cyclomatic int            // as gocyclo counts it
}

func (f Func) String() string {
	return fmt.Sprintf("%s:%d %s: %d lines, cyclomatic %d", f.Pos.Filename, f.Pos.Line, f.Name, f.Lines, f.Cyclomatic)
}

// Measure parses every .go file (tests included) under root and measures
// each function declaration.
func Measure(root string) ([]Func, error) {
	var out []Func
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			out = append(out, Func{
				Pos:        fset.Position(fn.Pos()),
				Name:       funcName(fn),
				Lines:      fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1,
				Cyclomatic: Cyclomatic(fn),
			})
		}
		return nil
	})
	return out, err
}

// Cyclomatic is 1 plus one for each if, for, range, non-default case or
// select case, && and ||, counted through nested function literals as
// gocyclo does.
func Cyclomatic(fn ast.Node) int {
	n := 1
	ast.Inspect(fn, func(node ast.Node) bool {
		switch x := node.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			n++
		case *ast.CaseClause:
			if x.List != nil {
				n++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				n++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				n++
			}
		}
		return true
	})
	return n
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	return "(" + typeName(fn.Recv.List[0].Type) + ")." + fn.Name.Name
}

func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + typeName(t.X)
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
