package examples_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// runLedger says, for every shipped example a user runs (an Argo
// workflow, a plain Job, a BridgeJob, a KFP pipeline), which test runs it
// end to end and checks what it did, or why none does yet. An example
// added without an entry fails TestEveryExampleIsRunOrOwed, and so does an
// entry naming a test that does not exist: "compiled" or "walked" is not
// "run".
var runLedger = map[string]string{
	"local/workflow.yaml":       "TestExampleLocalWorkflow",
	"local/job.yaml":            "TestExampleLocalJob",
	"local/bridgejob.yaml":      "TestOperatorLocalBridgeJob",
	"ray/workflow.yaml":         "TestExampleRayWorkflow",
	"ray/bridgejob.yaml":        "TestOperatorRayBridgeJob",
	"branching/workflow.yaml":   "TestExampleBranchingSlurm",
	"loop/workflow.yaml":        "TestExampleLoopSlurm",
	"placement/workflow.yaml":   "TestExamplePlacementRunsOnBothClusters",
	"replace/workflow.yaml":     "TestExampleReplaceWorkflow",
	"spread/workflow.yaml":      "TestExampleSpreadWorkflow",
	"spread/bridgejob.yaml":     "TestExampleSpreadBridgeJob",
	"kfp-local/kfp_pipeline.py": "hack/kfp_local.py",
	"local/kfp_pipeline.py":     "hack/kfp_local.py",
	"loop/kfp_pipeline.py":      "hack/kfp_local.py",
	"branching/kfp_pipeline.py": "hack/kfp_local.py",
	"slurm/kfp_pipeline.py":     "hack/kfp_local.py",
	"retry/kfp_pipeline.py":     "hack/kfp_local.py",
	"array/kfp_pipeline.py":     "hack/kfp_local.py",
	"htcondor/kfp_pipeline.py":  "hack/kfp_local.py",
	"ray/kfp_pipeline.py":       "hack/kfp_local.py",
	"lsf/kfp_pipeline.py":       "hack/kfp_local.py",
	"quantum/kfp_pipeline.py":   "hack/kfp_local.py",
	"placement/kfp_pipeline.py": "hack/kfp_local.py",
	"replace/kfp_pipeline.py":   "hack/kfp_local.py",
	"spread/kfp_pipeline.py":    "hack/kfp_local.py",
	"lsf/job.yaml":              "TestExampleLSFJobAgainstFake",
	"quantum/job.yaml":          "TestExampleQuantumJobAgainstFake",
	// The e2e suite's (hack/e2e.sh): each as a user submits it to the
	// cluster, the LSF and Quantum ones against the fakes it serves.
	"array/workflow.yaml":      "TestExampleArrayWorkflow",
	"retry/workflow.yaml":      "TestExampleRetryWorkflow",
	"slurm/workflow.yaml":      "TestExampleSlurmWorkflow",
	"slurm/job.yaml":           "TestExampleSlurmJob",
	"slurm/bridgejob.yaml":     "TestExampleSlurmBridgeJob",
	"placement/bridgejob.yaml": "TestDashboardOnRealPrometheus",
	"ray/job.yaml":             "TestExampleRayJob",
	"lsf/workflow.yaml":        "TestExamplesLSF",
	"lsf/bridgejob.yaml":       "TestExamplesLSF",
	"quantum/workflow.yaml":    "TestExamplesQuantum",
	"quantum/bridgejob.yaml":   "TestExamplesQuantum",
	"htcondor/workflow.yaml":   "TestExamplesHTCondor",
	"htcondor/bridgejob.yaml":  "TestExamplesHTCondor",
	"htcondor/job.yaml":        "TestExamplesHTCondor",
}

// owed are the examples no test runs end to end yet (issue 40), each with
// what it would take; the list only shrinks.
var owed = map[string]string{}

func TestEveryExampleIsRunOrOwed(t *testing.T) {
	var shipped []string
	for _, pat := range []string{"*/workflow.yaml", "*/job.yaml", "*/bridgejob.yaml", "*/kfp_pipeline.py"} {
		m, _ := filepath.Glob(pat)
		shipped = append(shipped, m...)
	}
	sort.Strings(shipped)
	if len(shipped) == 0 {
		t.Fatal("no examples found")
	}
	tests := testFuncs(t)
	for _, ex := range shipped {
		by, run := runLedger[ex]
		why, isOwed := owed[ex]
		switch {
		case run && isOwed:
			t.Errorf("examples/%s is run by %s and owed (%s): take it off the owed list", ex, by, why)
		case !run && !isOwed:
			t.Errorf("examples/%s: no test runs it end to end; write one (and list it in runLedger), or say in owed what it would take", ex)
		case run && strings.HasPrefix(by, "Test") && tests[by] == nil:
			t.Errorf("examples/%s: runLedger names %s, which no test file defines", ex, by)
		case run && strings.HasPrefix(by, "Test") && !mentions(tests, by, filepath.Dir(ex)):
			t.Errorf("examples/%s: runLedger names %s, which (nor a function it calls) never names %q", ex, by, filepath.Dir(ex))
		case run && !strings.HasPrefix(by, "Test"):
			raw, err := os.ReadFile(filepath.Join("..", by))
			if err != nil || !strings.Contains(string(raw), "examples/"+ex) {
				t.Errorf("examples/%s: runLedger names %s, which does not run it", ex, by)
			}
		}
	}
	for ex := range runLedger {
		if _, err := os.Stat(ex); err != nil {
			t.Errorf("runLedger lists examples/%s, which is gone", ex)
		}
	}
	for ex := range owed {
		if _, err := os.Stat(ex); err != nil {
			t.Errorf("owed lists examples/%s, which is gone", ex)
		}
	}
}

// testFuncs are the functions of the Go tests that run examples, by name:
// the CLI's (against the suite's services) and the e2e suite's.
func testFuncs(t *testing.T) map[string]*ast.FuncDecl {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]*ast.FuncDecl{}
	for _, pat := range []string{"*_test.go", "../cmd/bridge-runner/*_test.go", "../e2e/*_test.go"} {
		m, _ := filepath.Glob(pat)
		for _, f := range m {
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					out[fd.Name.Name] = fd
				}
			}
		}
	}
	return out
}

// mentions says whether the function name, or one it calls directly,
// names the example directory dir in a string literal: "dir" itself, or
// a path through examples/dir/.
func mentions(funcs map[string]*ast.FuncDecl, name, dir string) bool {
	var called []string
	found := false
	ast.Inspect(funcs[name].Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			found = found || (n.Kind == token.STRING && (n.Value == strconv.Quote(dir) || strings.Contains(n.Value, "examples/"+dir+"/")))
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
		// One call deep: the callee's own literals only.
		return c != name && funcs[c] != nil && mentions(map[string]*ast.FuncDecl{c: funcs[c]}, c, dir)
	})
}
