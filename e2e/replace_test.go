package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestExampleReplaceWorkflow: examples/replace/workflow.yaml as shipped,
// its two clusters made of the suite's one Slurm (as
// TestExamplePlacementWorkflow does): hpc-a is partition short (two CPUs),
// filled by this test's own sleeping jobs, and hpc-b is debug, where a
// job of the test's that asks for every CPU of the node waits for those
// CPUs (a held job would not do: it waits for no CPU, and placement does
// not count it), so that at placement neither starts the job now and
// `ordered` puts it on hpc-a, where it waits. Once the record names hpc-a,
// the test cancels its waiting job: hpc-b would start the job now, and
// after replace_after (10s here) invoke moves it there. The
// Workflow Succeeds with target hpc-b; the record's status.moves names
// hpc-a and the job left there; Slurm has exactly two jobs of the
// workflow's name: that one, cancelled without ever starting, and the
// one that ran, COMPLETED.
//
// Not parallel: the move waits for debug to have nothing pending, which
// the other tests' jobs (an array of 100 among them) would put off for
// minutes; alone, the test takes about a minute.
func TestExampleReplaceWorkflow(t *testing.T) {
	e := setup(t)
	e.apply(t, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "slurm-b-credentials"},
		"stringData": map[string]any{"username": e.slurmUser, "token": e.slurmToken, originsKey: origins(e.slurmPodURL, e.slurmURL)}}})
	for i := range 2 {
		e.startSlurmJob(t, fmt.Sprintf("replace-filler-%d", i), `"partition":"short"`)
	}
	waiting := e.waitingSlurmJob(t, "replace-waiting", "debug")
	wf := e.siteExample(t, "replace", "workflow.yaml", map[string]string{
		"https://slurm-a.example.org:6820":  e.slurmPodURL,
		"https://slurm-b.example.org:6820":  e.slurmPodURL,
		`{"partition": "batch"}`:            `{"partition": "short"}`,
		`{"partition": "compute"}`:          `{"partition": "debug"}`,
		"{name: replace_after, value: 15m}": "{name: replace_after, value: 10s}",
	}, `"current_working_directory":"/tmp"`)[0]
	name := e.submitWorkflow(t, wf)
	moves := e.followMoves(t, name, func() { e.cancelSlurmJob(t, waiting) })
	done := e.waitDone(t, name, 8*time.Minute)
	if got := phaseOf(done); got != "Succeeded" {
		t.Fatalf("workflow %s phase = %s, want Succeeded", name, got)
	}
	job, ok := nodeNamed(done, "job")
	if !ok || job.Params["status"] != "DONE" || job.Params["job_id"] == "" || job.Params["target"] != "hpc-b" {
		t.Fatalf("the job's outputs %v, want DONE on hpc-b with a job id", job.Params)
	}
	if root, _ := nodeNamed(done, name); root.Params["target"] != "hpc-b" {
		t.Errorf("the workflow's output target %q, want hpc-b", root.Params["target"])
	}
	left := moves()
	if len(left) != 1 || left[0].Target != "hpc-a" || left[0].To != "hpc-b" || left[0].ID == "" {
		t.Fatalf("the record's status.moves %+v, want one move from hpc-a to hpc-b", left)
	}
	t.Logf("moved: %+v", left[0])
	ran := map[string]string{}
	for _, j := range e.slurmJobs(t) {
		if j.Name == name {
			ran[fmt.Sprint(j.JobID)] = slurmOutcome(j)
		}
	}
	want := map[string]string{left[0].ID: "CANCELLED, never started", job.Params["job_id"]: "COMPLETED"}
	if fmt.Sprint(ran) != fmt.Sprint(want) {
		t.Errorf("Slurm's jobs named %s: %v, want %v", name, ran, want)
	}
	e.waitNoConfigMap(t, name, 30*time.Second)
}

// moved is one entry of a record's status.moves (record.Moved).
type moved struct {
	Target   string `json:"target"`
	ID       string `json:"id"`
	To       string `json:"to"`
	Evidence string `json:"evidence"`
}

// followMoves reads job's record every half second until the test ends:
// once it names a placement, placed is called (once); the returned
// function gives the last status.moves seen (the record is deleted by the
// workflow's cleanup, so it is kept from before).
func (e *env) followMoves(t *testing.T, job string, placed func()) func() []moved {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var last []moved
	done := make(chan struct{})
	go func() {
		defer close(done)
		once := sync.OnceFunc(placed)
		_ = poll(ctx, 500*time.Millisecond, func() (bool, error) {
			cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(ctx, job+"-bridge-cm", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if cm.Data["status.placement"] != "" {
				once()
			}
			var ms []moved
			if json.Unmarshal([]byte(cm.Data["status.moves"]), &ms) == nil && len(ms) > 0 {
				mu.Lock()
				last = ms
				mu.Unlock()
			}
			return false, nil
		})
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return func() []moved {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// slurmOutcome is a job's state, and for a cancelled one whether it ever
// started: slurmctld sets a pending job's start time to its end time when
// it is cancelled.
func slurmOutcome(j slurmJob) string {
	if j.JobState != "CANCELLED" {
		return j.JobState
	}
	if j.StartTime == j.EndTime {
		return "CANCELLED, never started"
	}
	return "CANCELLED after it started"
}

// startSlurmJob submits a one-CPU job of this test's that sleeps ten
// minutes (props adds its partition), cancelled when the test ends; it
// must be RUNNING within two minutes.
func (e *env) startSlurmJob(t *testing.T, name, props string) string {
	t.Helper()
	id := e.submitSlurmJob(t, name, `"cpus_per_task":1,`+props)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := poll(ctx, 500*time.Millisecond, func() (bool, error) { return e.slurmJob(t, id).JobState == "RUNNING", nil }); err != nil {
		t.Fatalf("Slurm job %s (%s) is %s, not RUNNING within 2 min", id, name, e.slurmJob(t, id).JobState)
	}
	return id
}

// waitingSlurmJob submits a job of this test's to partition that asks for
// every CPU it has, cancelled when the test ends, and waits until Slurm
// says it waits for them (reason Resources or Priority: something else
// runs on the node), within a minute.
func (e *env) waitingSlurmJob(t *testing.T, name, partition string) string {
	t.Helper()
	var parts struct {
		Partitions []struct {
			Name      string `json:"name"`
			TotalCPUs int    `json:"total_cpus"` // v0.0.38
		} `json:"partitions"`
	}
	if err := e.slurmREST(http.MethodGet, "partitions/", nil, &parts); err != nil {
		t.Fatalf("reading Slurm's partitions: %v", err)
	}
	cpus := 0
	for _, p := range parts.Partitions {
		if p.Name == partition {
			cpus = p.TotalCPUs
		}
	}
	if cpus == 0 {
		t.Fatalf("Slurm's partitions %+v: no CPUs of %s", parts.Partitions, partition)
	}
	id := e.submitSlurmJob(t, name, fmt.Sprintf(`"partition":%q,"cpus_per_task":%d`, partition, cpus))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		j := e.slurmJob(t, id)
		return j.JobState == "PENDING" && (j.StateReason == "Resources" || j.StateReason == "Priority"), nil
	}); err != nil {
		j := e.slurmJob(t, id)
		t.Fatalf("Slurm job %s (%s, %d CPUs) is %s (%s), not waiting for CPUs within a minute", id, name, cpus, j.JobState, j.StateReason)
	}
	return id
}

// submitSlurmJob submits a job of this test's that sleeps ten minutes
// (props adds its partition and CPUs), cancelled when the test ends.
func (e *env) submitSlurmJob(t *testing.T, name, props string) string {
	t.Helper()
	body := fmt.Sprintf(`{"script":"#!/bin/sh\nsleep 600\n","job":{"name":%q,"time_limit":10,`+
		`"current_working_directory":%q,"environment":{"PATH":"/bin:/usr/bin"},%s}}`, name, e.slurmWorkDir, props)
	var answer struct {
		JobID  int64 `json:"job_id"`
		Errors []any `json:"errors"`
	}
	if err := e.slurmREST(http.MethodPost, "job/submit", []byte(body), &answer); err != nil || answer.JobID == 0 {
		t.Fatalf("submitting %s to Slurm: %v %v", name, err, answer.Errors)
	}
	id := fmt.Sprint(answer.JobID)
	t.Cleanup(func() { e.cancelSlurmJob(t, id) })
	return id
}

// cancelSlurmJob cancels a job of this test's (an ended one too: no error).
func (e *env) cancelSlurmJob(t *testing.T, id string) {
	if err := e.slurmREST(http.MethodDelete, "job/"+id, nil, nil); err != nil {
		t.Logf("cancelling Slurm job %s: %v", id, err)
	}
}

// slurmREST sends one request to the suite's slurmrestd (v0.0.38) as the
// suite's user and decodes a 200 answer into out (if not nil).
func (e *env) slurmREST(method, path string, body []byte, out any) error {
	req, err := http.NewRequest(method, e.slurmURL+"/slurm/v0.0.38/"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-SLURM-USER-NAME", e.slurmUser)
	req.Header.Set("X-SLURM-USER-TOKEN", e.slurmToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("slurmrestd: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("slurmrestd: %s %s: %s: %s", method, path, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}
