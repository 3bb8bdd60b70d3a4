package htcondor_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// TestIntegrationTestsRunOnEveryPool: the tests of this package reach a
// real pool only through testssh.EachCondor, which runs them on every
// HTCondor release line the suite starts (23.9 and 25); a call of
// testssh.Condor (the 23.9 pool alone) or a pick from testssh.CondorPools
// would test one of them and let the other drift.
func TestIntegrationTestsRunOnEveryPool(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	fset := token.NewFileSet()
	each := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "testssh" {
				switch sel.Sel.Name {
				case "Condor", "CondorPools":
					t.Errorf("%s: testssh.%s reaches one HTCondor pool; use testssh.EachCondor", fset.Position(sel.Pos()), sel.Sel.Name)
				case "EachCondor":
					each++
				}
			}
			return true
		})
	}
	if each < 10 {
		t.Errorf("only %d tests use testssh.EachCondor: did the integration tests move?", each)
	}
}
