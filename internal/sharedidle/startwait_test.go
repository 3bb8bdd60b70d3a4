package sharedidle

import (
	"fmt"
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
	"time"
)

// minStartWait is the least ceiling a test may give a job to start. A
// shared Slurm's nodes are full of the other lanes' jobs, Ray's driver
// starts in tens of seconds under CI's load, HTCondor negotiates a slot:
// 30 s was too little in CI runs (a Ray job still PENDING, 2026-11-30). A
// ceiling costs nothing when the job starts at once.
const minStartWait = time.Minute

// TestAWaitForAJobToStartAllowsABusyService: every Eventually whose
// condition waits for a job to be RUNNING gives it at least minStartWait.
// It holds for tests of fakes too: one rule, and a loaded machine is
// slow for them as well.
func TestAWaitForAJobToStartAllowsABusyService(t *testing.T) {
	seen := 0
	eachTestFile(t, func(rel, path string, src []byte) {
		for _, w := range startWaits(t, path, src) {
			seen++
			if w.err != "" || w.ceiling < minStartWait {
				t.Errorf("%s:%d: a wait for RUNNING of %s%s; give a job at least %s to start (the shared service may be busy)",
					rel, w.line, w.text, w.err, minStartWait)
			}
		}
	})
	if seen == 0 {
		t.Fatal("no wait for RUNNING found: the check looks at nothing")
	}
}

type startWait struct {
	line    int
	text    string // the ceiling as written
	ceiling time.Duration
	err     string // why the ceiling could not be read
}

// startWaits are the Eventually calls (testify's) of src whose condition
// holds the literal "RUNNING", with their ceilings.
func startWaits(t *testing.T, path string, src []byte) []startWait {
	fset, f := parse(t, path, src)
	var out []startWait
	ast.Inspect(f, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := c.Fun.(*ast.SelectorExpr)
		if !ok || !strings.HasPrefix(sel.Sel.Name, "Eventually") || len(c.Args) < 3 {
			return true
		}
		fl, ok := c.Args[1].(*ast.FuncLit)
		if !ok || !holdsRunning(fl) {
			return true
		}
		arg := c.Args[2]
		w := startWait{line: fset.Position(c.Pos()).Line, text: string(src[fset.Position(arg.Pos()).Offset:fset.Position(arg.End()).Offset])}
		if d, ok := duration(arg); ok {
			w.ceiling = d
		} else {
			w.err = " (not a constant the check can read: write it as N*time.Unit)"
		}
		out = append(out, w)
		return true
	})
	return out
}

func holdsRunning(fl *ast.FuncLit) bool {
	found := false
	ast.Inspect(fl, func(n ast.Node) bool {
		if b, ok := n.(*ast.BasicLit); ok && b.Value == `"RUNNING"` {
			found = true
		}
		return !found
	})
	return found
}

var units = map[string]time.Duration{"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}

// duration reads time.Unit and N*time.Unit.
func duration(e ast.Expr) (time.Duration, bool) {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "time" {
			u, ok := units[e.Sel.Name]
			return u, ok
		}
	case *ast.BinaryExpr:
		if e.Op != token.MUL {
			return 0, false
		}
		lit, ok := e.X.(*ast.BasicLit)
		if !ok || lit.Kind != token.INT {
			return 0, false
		}
		n, err := strconv.Atoi(lit.Value)
		u, uok := duration(e.Y)
		return time.Duration(n) * u, err == nil && uok
	case *ast.ParenExpr:
		return duration(e.X)
	}
	return 0, false
}

// TestTheCheckSeesAShortStartWait: the wait of
// TestRayCancelDuringOutageIsPending as it was (30 s) is found, its
// ceiling read; a minute passes; a wait on another state is no concern
// of the check.
func TestTheCheckSeesAShortStartWait(t *testing.T) {
	src := `package p
func f() {
	require.Eventually(t, func() bool {
		rec, err := store.Get(context.Background())
		return err == nil && rec.Data[record.KeyJobStatus] == "RUNNING"
	}, 30*time.Second, 50*time.Millisecond, "status RUNNING: %s", out)
	assert.Eventually(t, func() bool { return st() == "RUNNING" }, time.Minute, time.Second)
	assert.Eventually(t, func() bool { return st() == "DONE" }, time.Second, time.Millisecond)
	assert.Eventually(t, func() bool { return st() == "RUNNING" }, wait, time.Millisecond)
}`
	got := startWaits(t, "p.go", []byte(src))
	want := []string{"30s ", "1m0s ", "0s  (not a constant the check can read: write it as N*time.Unit)"}
	if len(got) != len(want) {
		t.Fatalf("found %+v, want 3 waits", got)
	}
	for i, w := range got {
		if s := fmt.Sprintf("%s %s", w.ceiling, w.err); s != want[i] {
			t.Errorf("wait %d: %q, want %q", i, s, want[i])
		}
	}
}
