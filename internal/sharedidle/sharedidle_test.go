// Package sharedidle holds the check that no test of a real service waits
// for, or expects, that service idle. CI runs make test in three lanes
// against one set of services (and hack/noise.sh keeps other users' jobs
// on them): a shared Slurm partition, HTCondor pool or Ray cluster is never
// idle, so such a test waits out its whole budget and then checks nothing,
// or fails (TestSSHProbeLoad's waitIdle waited 90 s per cluster under the
// noise, past go test's 10 minutes for the package).
package sharedidle

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realMarkers name the helpers that give a test a real, shared service.
var realMarkers = []string{"realSlurms(", "eventSlurms(", "sshBackend(", "testssh.", "needRay(", "BRIDGE_TEST_"}

// TestNoRealServiceTestAssumesItIdle: in a test file that uses a real
// service, no comparison reads the service's load as idle: FreeCPUs equal
// to TotalCPUs (FreeNodes to TotalNodes), or no job running or pending.
// Count the test's own jobs, or compare with the queue read around the
// probe (backends/slurm's waitSettled).
func TestNoRealServiceTestAssumesItIdle(t *testing.T) {
	files := 0
	eachTestFile(t, func(rel, path string, src []byte) {
		if !usesRealService(string(src)) {
			return
		}
		files++
		for _, at := range idleAssumptions(t, path, src) {
			t.Errorf("%s: %s reads a shared service as idle; count the test's own jobs, or compare with the queue read around the probe", rel, at)
		}
	})
	if files == 0 {
		t.Fatal("no test file of a real service found: the check looks at nothing")
	}
}

// testDirs are the directories whose tests the checks read.
var testDirs = []string{"backends", "record", "agent", "runner", "operator", "cmd", "bench"}

// eachTestFile calls f with every test file of testDirs: its path from
// the module's root (slashes), its path and its source.
func eachTestFile(t *testing.T, f func(rel, path string, src []byte)) {
	root := filepath.Join("..", "..")
	for _, dir := range testDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			f(filepath.ToSlash(rel), path, src)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// parse parses the Go source src of path, failing the test when it cannot.
func parse(t *testing.T, path string, src []byte) (*token.FileSet, *ast.File) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return fset, f
}

func usesRealService(src string) bool {
	for _, m := range realMarkers {
		if strings.Contains(src, m) {
			return true
		}
	}
	return false
}

// idleAssumptions are the places that compare a free count with its total
// (x.FreeCPUs == x.TotalCPUs; assert.Equal(t, x.TotalCPUs, x.FreeCPUs)) or
// a job count with zero (x.RunningJobs == 0).
func idleAssumptions(t *testing.T, path string, src []byte) []string {
	fset, f := parse(t, path, src)
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		var a, b ast.Expr
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op != token.EQL {
				return true
			}
			a, b = n.X, n.Y
		case *ast.CallExpr:
			if !isEqualCall(n) || len(n.Args) < 3 {
				return true
			}
			a, b = n.Args[1], n.Args[2]
		default:
			return true
		}
		if idlePair(a, b) || idlePair(b, a) {
			pos := fset.Position(n.Pos())
			found = append(found, fmt.Sprintf("line %d:%d", pos.Line, pos.Column))
		}
		return true
	})
	return found
}

// isEqualCall: assert.Equal, require.Equal, assert.EqualValues...
func isEqualCall(c *ast.CallExpr) bool {
	s, ok := c.Fun.(*ast.SelectorExpr)
	return ok && strings.HasPrefix(s.Sel.Name, "Equal")
}

// idlePair: a is a free count and b its total, or a is a job count and b zero.
func idlePair(a, b ast.Expr) bool {
	switch field(a) {
	case "FreeCPUs":
		return field(b) == "TotalCPUs"
	case "FreeNodes":
		return field(b) == "TotalNodes"
	case "RunningJobs", "PendingJobs":
		lit, ok := b.(*ast.BasicLit)
		return ok && lit.Value == "0"
	}
	return false
}

func field(e ast.Expr) string {
	if s, ok := e.(*ast.SelectorExpr); ok {
		return s.Sel.Name
	}
	return ""
}

// TestTheCheckSeesWaitIdle: the old waitIdle of backends/slurm, as it was,
// is found (its four comparisons); the comparison with the queue that replaced it is not.
func TestTheCheckSeesWaitIdle(t *testing.T) {
	old := `package p
func waitIdle(probe func() backends.Load) bool {
	l := probe()
	if l.RunningJobs == 0 && l.PendingJobs == 0 {
		return l.FreeCPUs == l.TotalCPUs
	}
	assert.Equal(t, l.TotalCPUs, l.FreeCPUs)
	return false
}`
	if got := idleAssumptions(t, "old.go", []byte(old)); len(got) != 4 {
		t.Errorf("the old waitIdle: found %v, want its 4 comparisons", got)
	}
	settled := `package p
func readsQueue(l backends.Load, v queueView) bool {
	return l.RunningJobs == v.running && l.PendingJobs == v.pending && l.FreeCPUs == l.TotalCPUs-v.busyCPUs
}`
	if got := idleAssumptions(t, "new.go", []byte(settled)); len(got) != 0 {
		t.Errorf("readsQueue: found %v, want none", got)
	}
	if !usesRealService("for _, rs := range realSlurms(t) {") || usesRealService("newFake(t)") {
		t.Error("usesRealService misreads its markers")
	}
}
