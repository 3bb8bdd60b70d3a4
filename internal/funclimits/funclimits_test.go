package funclimits

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// The project's limits for runner/ and backends/ (HELPERS standards and
// issue 20): a function longer or more branched than this is split.
const (
	maxLines      = 80
	maxCyclomatic = 20
)

func TestRunnerAndBackendsWithinLimits(t *testing.T) {
	for _, dir := range []string{"runner", "backends", "record", "kube", "cluster"} {
		funcs, err := Measure(filepath.Join("..", "..", dir))
		if err != nil {
			t.Fatal(err)
		}
		if len(funcs) == 0 {
			t.Fatalf("no functions found under %s", dir)
		}
		for _, f := range funcs {
			if f.Lines > maxLines || f.Cyclomatic > maxCyclomatic {
				t.Errorf("%s: over the limit of %d lines or cyclomatic %d; split it", f, maxLines, maxCyclomatic)
			}
		}
	}
}

func TestCyclomaticCountsLikeGocyclo(t *testing.T) {
	src := `package p
func f(a, b bool, c chan int, xs []int) {
	if a && b || a { }
	for i := 0; i < 1; i++ { }
	for range xs { }
	switch { case a: ; case b, a: ; default: }
	select { case <-c: ; default: }
	_ = func() { if b { } }
}`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 1 + if + && + || + for + range + 2 cases + 1 comm case + closure's if.
	if got, want := Cyclomatic(file.Decls[0]), 10; got != want {
		t.Errorf("Cyclomatic = %d, want %d", got, want)
	}
}

func TestLinesSpanDeclaration(t *testing.T) {
	funcs, err := Measure(filepath.Join("testdata", "sample"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"short": 1, "(*T).long": 5}
	for _, f := range funcs {
		if f.Lines != want[f.Name] {
			t.Errorf("%s: %d lines, want %d", f.Name, f.Lines, want[f.Name])
		}
		delete(want, f.Name)
	}
	if len(want) != 0 {
		t.Errorf("not measured: %v", want)
	}
}
