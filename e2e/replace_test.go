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
// held job of the test's waits, so that at placement neither starts the
// job now and `ordered` puts it on hpc-a, where it waits. Once the record
// names hpc-a, the test cancels its held job: hpc-b would start the job
// now, and after replace_after (10s here) invoke moves it there. The
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
	held := e.startSlurmJob(t, "replace-held", `"partition":"debug","hold":true`)
	wf := e.siteExample(t, "replace", "workflow.yaml", map[string]string{
		"https://slurm-a.example.org:6820":  e.slurmPodURL,
		"https://slurm-b.example.org:6820":  e.slurmPodURL,
		`{"partition": "batch"}`:            `{"partition": "short"}`,
		`{"partition": "compute"}`:          `{"partition": "debug"}`,
		"{name: replace_after, value: 15m}": "{name: replace_after, value: 10s}",
	}, `"current_working_directory":"/tmp"`)[0]
	name := e.submitWorkflow(t, wf)
	moves := e.followMoves(t, name, func() { e.cancelSlurmJob(t, held) })
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
// minutes (props adds its partition, a hold), cancelled when the test
// ends; a job not held must be RUNNING within two minutes.
func (e *env) startSlurmJob(t *testing.T, name, props string) string {
	t.Helper()
	body := fmt.Sprintf(`{"script":"#!/bin/sh\nsleep 600\n","job":{"name":%q,"time_limit":10,"cpus_per_task":1,`+
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
	if bytes.Contains([]byte(props), []byte(`"hold":true`)) {
		return id
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := poll(ctx, 500*time.Millisecond, func() (bool, error) { return e.slurmJob(t, id).JobState == "RUNNING", nil }); err != nil {
		t.Fatalf("Slurm job %s (%s) is %s, not RUNNING within 2 min", id, name, e.slurmJob(t, id).JobState)
	}
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
