package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestExampleSpreadWorkflow: examples/spread/workflow.yaml as shipped, its
// two clusters made of the suite's one Slurm (as TestExampleReplaceWorkflow
// does): hpc-a is partition short (at most two CPUs), hpc-b is debug (the
// node's CPUs), an array of 8 tasks. Both can start tasks now, so `spread`
// gives each a share: the Workflow Succeeds with target "hpc-a,hpc-b",
// array_counts DONE=8 and no task failed; job_id names one array on each
// (hpc-b's qualified "hpc-b:"), and Slurm ran each share as one native
// array in its partition, every task COMPLETED, 8 tasks in all.
//
// Not parallel: a share follows what each partition can start now, which
// the other tests' jobs would take (then hpc-a could get no task).
func TestExampleSpreadWorkflow(t *testing.T) {
	e := setup(t)
	e.waitSlurmQuiet(t)
	e.apply(t, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "slurm-b-credentials"},
		"stringData": map[string]any{"username": e.slurmUser, "token": e.slurmToken, originsKey: origins(e.slurmPodURL, e.slurmURL)}}})
	wf := e.runSiteWorkflow(t, "spread", map[string]string{
		"https://slurm-a.example.org:6820": e.slurmPodURL,
		"https://slurm-b.example.org:6820": e.slurmPodURL,
		`{"partition": "batch"}`:           `{"partition": "short"}`,
		`{"partition": "compute"}`:         `{"partition": "debug"}`,
		`{name: array, value: "0-199"}`:    `{name: array, value: "0-7"}`,
	}, 8*time.Minute, `"current_working_directory":"/tmp"`)
	name := wf.GetName()
	tasks, ok := nodeNamed(wf, "tasks")
	if !ok || tasks.Params["status"] != "DONE" || tasks.Params["array_counts"] != "DONE=8" || tasks.Params["array_failed"] != "" {
		t.Fatalf("the array step's outputs %v, want DONE, DONE=8, no failed task", tasks.Params)
	}
	if tasks.Params["target"] != "hpc-a,hpc-b" {
		t.Errorf("the step's output target %q, want hpc-a,hpc-b (a share on each)", tasks.Params["target"])
	}
	if root, _ := nodeNamed(wf, name); root.Params["target"] != "hpc-a,hpc-b" || root.Params["array_counts"] != "DONE=8" {
		t.Errorf("the workflow's outputs %v, want target hpc-a,hpc-b and DONE=8", root.Params)
	}
	e.checkSpreadRan(t, name, tasks.Params["job_id"])
	e.waitNoConfigMap(t, name, 30*time.Second)
}

// TestExampleSpreadBridgeJob: examples/spread/bridgejob.yaml as shipped
// through the operator, with examples/placement/secret.yaml: its two
// BridgeClusters on the suite's one Slurm, hpc-a partition short and hpc-b
// debug, the BridgeJob's array 0-7. The BridgeJob ends DONE, its record's
// placement shares the tasks between both clusters, and Slurm ran each
// share as one native array in its partition, every task COMPLETED.
//
// Not parallel, as TestExampleSpreadWorkflow.
func TestExampleSpreadBridgeJob(t *testing.T) {
	e := setup(t)
	e.installOperator(t)
	slurmBridgeJobs.Lock()
	defer slurmBridgeJobs.Unlock()
	e.placementSecrets(t)
	e.waitSlurmQuiet(t)
	var bj *unstructured.Unstructured
	for _, o := range e.example(t, "spread", "bridgejob.yaml") {
		switch o.GetKind() {
		case "BridgeCluster":
			part := map[string]string{"hpc-a": "short", "hpc-b": "debug"}[o.GetName()]
			_ = unstructured.SetNestedField(o.Object, e.slurmPodURL, "spec", "resourceURL")
			_ = unstructured.SetNestedField(o.Object, fmt.Sprintf(`{"partition":%q}`, part), "spec", "jobproperties")
			e.createOwned(t, bridgeClusters, o)
		case "BridgeJob":
			bj = o
		}
	}
	if bj == nil {
		t.Fatal("examples/spread/bridgejob.yaml has no BridgeJob")
	}
	bj.SetName("spread-" + randHex(3))
	_ = unstructured.SetNestedField(bj.Object, "0-7", "spec", "array")
	_ = unstructured.SetNestedField(bj.Object, fmt.Sprintf(`{"time_limit":10,"current_working_directory":%q}`, e.slurmWorkDir), "spec", "jobproperties")
	e.runBridgeJob(t, bj, func(id string) {
		cm := e.configMap(t, bj.GetName())
		if cm == nil || !strings.Contains(cm.Data["status.placement"], `"shares"`) || cm.Data["status.arrayCounts"] != "DONE=8" {
			t.Errorf("the record of the spread BridgeJob: %v, want shares in status.placement and DONE=8", cm)
		}
		e.checkSpreadRan(t, bj.GetName(), id)
	})
}

// waitSlurmQuiet waits, two minutes at most, until the suite's Slurm has
// no job pending, running or completing (the tests before this one may
// leave some for a moment: a cancel takes effect asynchronously), so that
// both partitions can start tasks when the array is spread; past that it
// goes on, and the shares tell what each partition could start.
func (e *env) waitSlurmQuiet(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var busy []string
	if err := poll(ctx, time.Second, func() (bool, error) {
		busy = busy[:0]
		for _, j := range e.slurmJobs(t) {
			if j.JobState == "PENDING" || j.JobState == "RUNNING" || j.JobState == "COMPLETING" {
				busy = append(busy, fmt.Sprintf("%d %s %s", j.JobID, j.Name, j.JobState))
			}
		}
		return len(busy) == 0, nil
	}); err != nil {
		t.Logf("Slurm still has jobs after 2 min (%v): %v", err, busy)
	}
}

// checkSpreadRan checks that Slurm ran the spread array name (its job id
// jobID, hpc-a partition short and hpc-b debug) as one native array in
// each partition, every task COMPLETED, 8 in all, each the array jobID
// names for its target.
func (e *env) checkSpreadRan(t *testing.T, name, jobID string) {
	t.Helper()
	wantIDs := spreadArrayIDs(t, jobID)
	got := e.arraysNamed(t, name)
	if len(got) != 2 || got["short"].tasks+got["debug"].tasks != 8 {
		t.Fatalf("Slurm's arrays named %s by partition: %+v, want one in short and one in debug, 8 tasks in all", name, got)
	}
	for part, target := range map[string]string{"short": "hpc-a", "debug": "hpc-b"} {
		a := got[part]
		if a.tasks == 0 || a.ids != 1 || a.notCompleted != 0 {
			t.Errorf("partition %s ran %+v, want one array of at least one task, all COMPLETED", part, a)
		}
		if want := wantIDs[target]; fmt.Sprint(a.arrayID) != want {
			t.Errorf("partition %s ran array %d, job id %q names %s's as %q", part, a.arrayID, jobID, target, want)
		}
	}
	t.Logf("job id %s; by partition %+v", jobID, got)
}

// spreadArrayIDs reads a spread array's job_id, one chunk per target
// ("12@0+hpc-b:13@3"): the Slurm array id of each target's chunk (a chunk
// without a target is the placed one's, hpc-a here).
func spreadArrayIDs(t *testing.T, jobID string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, chunk := range strings.Split(jobID, "+") {
		id, _, ok := strings.Cut(chunk, "@")
		target, raw, qualified := strings.Cut(id, ":")
		if !qualified {
			target, raw = "hpc-a", id
		}
		if !ok || raw == "" || out[target] != "" {
			t.Fatalf("job_id %q: want one chunk id@offset per target, the other target's as hpc-b:id@offset", jobID)
		}
		out[target] = raw
	}
	if len(out) != 2 || out["hpc-b"] == "" {
		t.Fatalf("job_id %q names %v, want a chunk on hpc-a and one on hpc-b", jobID, out)
	}
	return out
}

// slurmArray is what Slurm ran of one job name in one partition.
type slurmArray struct {
	tasks        int   // array tasks
	ids          int   // distinct array job ids
	arrayID      int64 // the (last seen) array job id
	notCompleted int   // tasks that did not end COMPLETED
}

// arraysNamed groups the Slurm array tasks of the given job name by
// partition.
func (e *env) arraysNamed(t *testing.T, name string) map[string]slurmArray {
	t.Helper()
	out := map[string]slurmArray{}
	seen := map[string]map[int64]bool{}
	for _, j := range e.slurmJobs(t) {
		if j.Name != name {
			continue
		}
		a := out[j.Partition]
		if seen[j.Partition] == nil {
			seen[j.Partition] = map[int64]bool{}
		}
		seen[j.Partition][j.ArrayJobID] = true
		a.tasks, a.ids, a.arrayID = a.tasks+1, len(seen[j.Partition]), j.ArrayJobID
		if j.JobState != "COMPLETED" {
			a.notCompleted++
		}
		out[j.Partition] = a
	}
	return out
}
