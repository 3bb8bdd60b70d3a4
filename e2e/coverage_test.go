package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// exampleRuns names the e2e test that runs each shipped example a user
// submits to a cluster (examples/<dir>/{workflow,bridgejob,job}.yaml;
// their secret.yaml goes with them) end to end and checks its outputs.
var exampleRuns = map[string]string{
	"array/workflow.yaml":      "TestExampleArrayWorkflow",
	"branching/workflow.yaml":  "TestExampleBranchingSlurm",
	"local/bridgejob.yaml":     "TestOperatorLocalBridgeJob",
	"local/job.yaml":           "TestExampleLocalJob",
	"local/workflow.yaml":      "TestExampleLocalWorkflow",
	"loop/workflow.yaml":       "TestExampleLoopSlurm",
	"lsf/bridgejob.yaml":       "TestExamplesLSF",
	"lsf/job.yaml":             "TestExamplesLSF",
	"lsf/workflow.yaml":        "TestExamplesLSF",
	"placement/bridgejob.yaml": "TestDashboardOnRealPrometheus",
	"placement/workflow.yaml":  "TestExamplePlacementWorkflow",
	"quantum/bridgejob.yaml":   "TestExamplesQuantum",
	"quantum/job.yaml":         "TestExamplesQuantum",
	"quantum/workflow.yaml":    "TestExamplesQuantum",
	"ray/bridgejob.yaml":       "TestOperatorRayBridgeJob",
	"ray/job.yaml":             "TestExampleRayJob",
	"ray/workflow.yaml":        "TestExampleRayWorkflow",
	"retry/workflow.yaml":      "TestExampleRetryWorkflow",
	"slurm/bridgejob.yaml":     "TestExampleSlurmBridgeJob",
	"slurm/job.yaml":           "TestExampleSlurmJob",
	"slurm/workflow.yaml":      "TestExampleSlurmWorkflow",
}

// exampleNotRun are the examples the e2e cluster cannot run, and why.
var exampleNotRun = map[string]string{
	"htcondor/bridgejob.yaml": "the e2e cluster has no HTCondor pool (hack/e2e.sh starts none)",
	"htcondor/job.yaml":       "the e2e cluster has no HTCondor pool",
	"htcondor/workflow.yaml":  "the e2e cluster has no HTCondor pool",
}

// TestEveryExampleHasAnE2ERun (issue 40): each shipped example is either
// run by the test exampleRuns names or listed in exampleNotRun with the
// reason; the named test exists in this package and names the example's
// directory (in its body or in a function it calls). A new example
// without an e2e run fails here. Needs no cluster.
func TestEveryExampleHasAnE2ERun(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example found under ../examples: %v", err)
	}
	funcs := e2eFuncs(t)
	seen := map[string]bool{}
	for _, f := range files {
		rel := filepath.ToSlash(strings.TrimPrefix(f, filepath.Join("..", "examples")+string(filepath.Separator)))
		if filepath.Base(rel) == "secret.yaml" {
			continue
		}
		seen[rel] = true
		test, run := exampleRuns[rel]
		why, notRun := exampleNotRun[rel]
		switch {
		case run && notRun:
			t.Errorf("examples/%s is both run (%s) and not run (%s); keep one", rel, test, why)
		case notRun:
			t.Logf("examples/%s: not run: %s", rel, why)
		case !run:
			t.Errorf("examples/%s has no e2e run: write a test that runs it as shipped and checks its outputs, and add it to exampleRuns", rel)
		case funcs[test] == nil:
			t.Errorf("examples/%s: exampleRuns names %s, which this package does not define", rel, test)
		case !mentions(funcs, test, strconv.Quote(filepath.Dir(rel))):
			t.Errorf("examples/%s: %s (nor a function it calls) never names %q", rel, test, filepath.Dir(rel))
		}
	}
	for rel := range exampleRuns {
		if !seen[rel] {
			t.Errorf("exampleRuns lists examples/%s, which does not exist", rel)
		}
	}
	for rel := range exampleNotRun {
		if !seen[rel] {
			t.Errorf("exampleNotRun lists examples/%s, which does not exist", rel)
		}
	}
}

// e2eFuncs parses this package's files: each function and method by name.
func e2eFuncs(t *testing.T) map[string]*ast.FuncDecl {
	t.Helper()
	paths, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	out := map[string]*ast.FuncDecl{}
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				out[fd.Name.Name] = fd
			}
		}
	}
	return out
}

// mentions says whether the function name, or one it calls directly,
// holds the string literal lit (quoted).
func mentions(funcs map[string]*ast.FuncDecl, name, lit string) bool {
	var called []string
	found := false
	ast.Inspect(funcs[name].Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			found = found || (n.Kind == token.STRING && n.Value == lit)
		case *ast.CallExpr:
			switch fn := n.Fun.(type) {
			case *ast.Ident:
				called = append(called, fn.Name)
			case *ast.SelectorExpr:
				called = append(called, fn.Sel.Name)
			}
		}
		return true
	})
	return found || slices.ContainsFunc(called, func(c string) bool {
		return c != name && funcs[c] != nil && mentions(map[string]*ast.FuncDecl{c: funcs[c]}, c, lit)
	})
}
