// Package fixedwaits holds the check that no retry loop of the product
// waits a fixed time between its tries (issue 37: a pending cancel asked
// again every 250 ms sent 2,359 requests in a 5-minute outage).
package fixedwaits

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// waits are the calls that wait for a duration given as their last
// argument.
var waits = map[string]bool{"SleepCtx": true, "Sleep": true, "After": true, "NewTimer": true, "Tick": true, "NewTicker": true}

// allowed are the fixed waits inside loops that are no retry of a request,
// each with its reason.
var allowed = map[string]string{
	"backends/fake/fake.go":       "the test fake's hold polls its own flag, no server",
	"backends/local/reserve.go":   "rewrites a local file on a full disk, no server, for a bounded time",
	"backends/local/supervise.go": "the escalation from SIGTERM to SIGKILL, once, no retry",
}

// TestNoFixedWaitInALoop: a wait inside a for loop whose duration is a
// constant (a literal, a unit of package time, a constant of the package)
// is a retry at a fixed cadence. Every retry loop takes its delays from
// record.Backoff (growing, jittered, bounded by the budget), so a dark
// server gets fewer requests the longer it is away.
func TestNoFixedWaitInALoop(t *testing.T) {
	root := filepath.Join("..", "..")
	found := 0
	for _, dir := range []string{"runner", "record", "backends", "kube", "operator", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, w := range fixedWaitsInLoops(t, path) {
				found++
				if _, ok := allowed[filepath.ToSlash(rel)]; !ok {
					t.Errorf("%s: a fixed wait in a loop (%s); take the delays from record.Backoff", w, rel)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found == 0 {
		t.Fatal("the check found not even the allowed waits: it looks at nothing")
	}
}

func TestTheCheckSeesAFixedRetry(t *testing.T) {
	src := `package p
const pause = 250 * time.Millisecond
func retry(ctx context.Context, d time.Duration) {
	for {
		record.SleepCtx(ctx, 100*time.Millisecond)
		select { case <-time.After(pause): }
		record.SleepCtx(ctx, d)
		time.Sleep(b.Next())
	}
	time.Sleep(time.Second)
}`
	got := fixedWaits(t, src)
	if len(got) != 2 {
		t.Fatalf("found %v, want the two fixed waits in the loop", got)
	}
}

func fixedWaitsInLoops(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return scan(fset, f)
}

func fixedWaits(t *testing.T, src string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	return scan(fset, f)
}

// scan returns the position of each wait with a constant duration inside
// a for or range loop of f.
func scan(fset *token.FileSet, f *ast.File) []string {
	consts := map[string]bool{}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, sp := range g.Specs {
				for _, n := range sp.(*ast.ValueSpec).Names {
					consts[n.Name] = true
				}
			}
		}
	}
	var out []string
	var walk func(n ast.Node, inLoop bool)
	walk = func(n ast.Node, inLoop bool) {
		ast.Inspect(n, func(c ast.Node) bool {
			switch c := c.(type) {
			case *ast.ForStmt:
				if c != n {
					walk(c.Body, true)
					return false
				}
			case *ast.RangeStmt:
				if c != n {
					walk(c.Body, true)
					return false
				}
			case *ast.FuncLit:
				if c != n {
					walk(c.Body, false) // a closure runs on its own terms
					return false
				}
			case *ast.CallExpr:
				if inLoop && isWait(c) && constant(c.Args[len(c.Args)-1], consts) {
					out = append(out, fset.Position(c.Pos()).String())
				}
			}
			return true
		})
	}
	walk(f, false)
	return out
}

func isWait(c *ast.CallExpr) bool {
	if len(c.Args) == 0 {
		return false
	}
	switch fn := c.Fun.(type) {
	case *ast.SelectorExpr:
		return waits[fn.Sel.Name] && (fn.Sel.Name == "SleepCtx" || isIdent(fn.X, "time"))
	case *ast.Ident:
		return fn.Name == "SleepCtx"
	}
	return false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// constant reports whether e is made of literals, time's units and the
// file's constants only.
func constant(e ast.Expr, consts map[string]bool) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.Ident:
		return consts[e.Name]
	case *ast.SelectorExpr:
		return isIdent(e.X, "time")
	case *ast.ParenExpr:
		return constant(e.X, consts)
	case *ast.BinaryExpr:
		return constant(e.X, consts) && constant(e.Y, consts)
	case *ast.CallExpr: // a conversion such as time.Duration(3)
		return len(e.Args) == 1 && isConversion(e.Fun) && constant(e.Args[0], consts)
	}
	return false
}

func isConversion(fn ast.Expr) bool {
	s, ok := fn.(*ast.SelectorExpr)
	return ok && isIdent(s.X, "time") && s.Sel.Name == "Duration"
}
