package examples_test

import (
	"os"
	"path/filepath"
	"sort"
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
	"lsf/job.yaml":              "TestExampleLSFJobAgainstFake",
	"quantum/job.yaml":          "TestExampleQuantumJobAgainstFake",
}

// owed are the examples no test runs end to end yet (issue 40), each with
// what it would take; the list only shrinks.
var owed = map[string]string{
	"array/workflow.yaml":      "an Argo run on the e2e cluster",
	"htcondor/bridgejob.yaml":  "the operator in the e2e cluster against the suite's HTCondor",
	"htcondor/job.yaml":        "a Job in the e2e cluster against the suite's HTCondor",
	"htcondor/workflow.yaml":   "an Argo run on the e2e cluster",
	"lsf/bridgejob.yaml":       "the operator in the e2e cluster against the LSF fake (hack/fakes lsf)",
	"lsf/workflow.yaml":        "an Argo run on the e2e cluster against the LSF fake (hack/fakes lsf)",
	"placement/bridgejob.yaml": "the operator in the e2e cluster with two BridgeClusters",
	"quantum/bridgejob.yaml":   "the operator in the e2e cluster against the Quantum fake (hack/fakes quantum)",
	"quantum/workflow.yaml":    "an Argo run on the e2e cluster against the Quantum fake (hack/fakes quantum)",
	"ray/job.yaml":             "a Job in the e2e cluster against the suite's Ray",
	"retry/workflow.yaml":      "an Argo run on the e2e cluster",
	"slurm/bridgejob.yaml":     "the operator in the e2e cluster as shipped (TestOperatorSlurmBridgeJob builds its own)",
	"slurm/job.yaml":           "a Job in the e2e cluster against the suite's Slurm",
	"slurm/workflow.yaml":      "an Argo run on the e2e cluster",
}

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
	tests := testSources(t)
	for _, ex := range shipped {
		by, run := runLedger[ex]
		why, isOwed := owed[ex]
		switch {
		case run && isOwed:
			t.Errorf("examples/%s is run by %s and owed (%s): take it off the owed list", ex, by, why)
		case !run && !isOwed:
			t.Errorf("examples/%s: no test runs it end to end; write one (and list it in runLedger), or say in owed what it would take", ex)
		case run && strings.HasPrefix(by, "Test") && !strings.Contains(tests, "func "+by+"("):
			t.Errorf("examples/%s: runLedger names %s, which no test file defines", ex, by)
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

// testSources is the text of the Go tests that run examples: the CLI's
// (against the suite's services) and the e2e suite's.
func testSources(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, pat := range []string{"*_test.go", "../cmd/bridge-runner/*_test.go", "../e2e/*_test.go"} {
		m, _ := filepath.Glob(pat)
		for _, f := range m {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(raw)
		}
	}
	return b.String()
}
