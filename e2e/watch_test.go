package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// One watcher per cluster (issue 27) at the scale it is for: one Workflow
// whose loop runs fifty bridge-job steps on Slurm, twenty-five at a time.

const (
	fiftySteps    = 50
	fiftyParallel = 25
)

// requestsSentRE is invoke's last line: what it sent to the backend and to
// the Kubernetes API (text log format, the shipped default).
var requestsSentRE = regexp.MustCompile(`msg="requests sent" backend=(\d+) kubernetes=(\d+)`)

// loopWorkflow is examples/loop with a withSequence of n items over the
// shipped bridge-job, at most parallel items at a time, each item its own
// job name. watcherOff adds BRIDGE_WATCHER=false to every step's container
// through the Workflow's podSpecPatch (the templates take no extra flags;
// every flag falls back to its BRIDGE_ variable).
func loopWorkflow(name string, n, parallel int, params map[string]string, watcherOff bool) *unstructured.Unstructured {
	var wfParams, taskParams []any
	taskParams = append(taskParams, map[string]any{"name": "job_name", "value": "{{workflow.name}}-{{item}}"})
	for k, v := range params {
		wfParams = append(wfParams, map[string]any{"name": k, "value": v})
		taskParams = append(taskParams, map[string]any{"name": k, "value": "{{workflow.parameters." + k + "}}"})
	}
	spec := map[string]any{
		"entrypoint":         "main",
		"serviceAccountName": "bridge-runner",
		"arguments":          map[string]any{"parameters": wfParams},
		"templates": []any{map[string]any{
			"name":        "main",
			"parallelism": int64(parallel),
			"dag": map[string]any{"tasks": []any{map[string]any{
				"name":         "job",
				"templateRef":  map[string]any{"name": "bridge-runner", "template": "bridge-job"},
				"withSequence": map[string]any{"count": strconv.Itoa(n)},
				"arguments":    map[string]any{"parameters": taskParams},
			}}},
		}},
	}
	if watcherOff {
		spec["podSpecPatch"] = `{"containers":[{"name":"main","env":[{"name":"BRIDGE_WATCHER","value":"false"}]}]}`
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

// recordSeen is what the test saw of one record while the Workflow ran
// (the exit handlers delete the records, so they are read during the run).
type recordSeen struct {
	key, group, observed string
}

// recordWatch lists the namespace's ConfigMaps every second: the loop's
// records (by the prefix of their job names) and the watch groups' leases.
type recordWatch struct {
	mu      sync.Mutex
	records map[string]*recordSeen
	leases  map[string]bool
	stop    func()
	done    chan struct{}
}

func (e *env) watchRecords(t *testing.T, prefix string) *recordWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &recordWatch{records: map[string]*recordSeen{}, leases: map[string]bool{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			cms, err := e.kube.CoreV1().ConfigMaps(e.ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				w.add(cms.Items, prefix)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *recordWatch) add(cms []corev1.ConfigMap, prefix string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cm := range cms {
		if strings.HasPrefix(cm.Name, "bridge-watch-") {
			w.leases[cm.Name] = true
		}
		if !strings.HasPrefix(cm.Name, prefix) || !strings.HasSuffix(cm.Name, "-bridge-cm") {
			continue
		}
		r := w.records[cm.Name]
		if r == nil {
			r = &recordSeen{}
			w.records[cm.Name] = r
		}
		for dst, k := range map[*string]string{&r.key: "status.idempotencyKey", &r.group: "status.watchGroup", &r.observed: "status.watchObserved"} {
			if v := cm.Data[k]; v != "" {
				*dst = v
			}
		}
	}
}

func (w *recordWatch) end() {
	w.stop()
	<-w.done
}

// loopFigures is what one run of the loop cost.
type loopFigures struct {
	wall                        time.Duration
	invokePods, watching        int
	backendSent, kubernetesSent int
	observed, grouped           int
	leases                      int
}

// runLoop runs the loop Workflow to its end and checks what holds with the
// watcher on or off alike: Succeeded, every item DONE with a job of its own,
// exactly one COMPLETED Slurm job per record (by the record's key).
func (e *env) runLoop(t *testing.T, name string, watcherOff bool) loopFigures {
	t.Helper()
	w := e.watchRecords(t, name+"-")
	// Slurm's jobs as last seen, from the start: beside the suite's other
	// tests the fifty steps took 13 min once, and slurmctld had forgotten
	// the early ones (MinJobAge) by the end.
	slurm := e.logSlurmJobs(t)
	wf := loopWorkflow(name, fiftySteps, fiftyParallel, e.slurmParams("#!/bin/bash\nsleep 10\n"), watcherOff)
	e.dumpOnFailure(t, "workflow", name)
	e.apply(t, wf)
	done := e.waitDone(t, name, 15*time.Minute)
	w.end()
	if got := phaseOf(done); got != "Succeeded" {
		t.Fatalf("workflow %s phase = %s, want Succeeded", name, got)
	}
	uncompressNodes(t, done)
	var f loopFigures
	started, _, _ := unstructured.NestedString(done.Object, "status", "startedAt")
	finished, _, _ := unstructured.NestedString(done.Object, "status", "finishedAt")
	t0, _ := time.Parse(time.RFC3339, started)
	t1, _ := time.Parse(time.RFC3339, finished)
	f.wall = t1.Sub(t0)

	ids := map[string]bool{}
	items := itemNodes(done, "job")
	for _, n := range items {
		if n.Params["status"] != "DONE" {
			t.Errorf("item %s: %s %v, want its job DONE", n.DisplayName, n.Phase, n.Params)
		}
		ids[n.Params["job_id"]] = true
	}
	if len(items) != fiftySteps || len(ids) != fiftySteps {
		t.Errorf("%d items with %d distinct Slurm jobs, want %d and %d", len(items), len(ids), fiftySteps, fiftySteps)
	}
	e.checkOneJobPerRecord(t, w, fiftySteps, slurm.end())
	f.leases = len(w.leases)
	for _, r := range w.records {
		if r.observed != "" {
			f.observed++
		}
		if r.group != "" {
			f.grouped++
		}
	}
	e.invokeLogFigures(t, name, fiftySteps, &f)
	return f
}

// uncompressNodes puts back status.nodes of a Workflow whose controller
// stored them as status.compressedNodes (gzip, base64), as Argo does for
// a Workflow this large.
func uncompressNodes(t *testing.T, wf *unstructured.Unstructured) {
	t.Helper()
	c, ok, _ := unstructured.NestedString(wf.Object, "status", "compressedNodes")
	if !ok || c == "" {
		return
	}
	z, err := base64.StdEncoding.DecodeString(c)
	if err != nil {
		t.Fatalf("status.compressedNodes: %v", err)
	}
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatalf("status.compressedNodes: %v", err)
	}
	var ns map[string]any
	if err := json.NewDecoder(r).Decode(&ns); err != nil {
		t.Fatalf("status.compressedNodes: %v", err)
	}
	if err := unstructured.SetNestedMap(wf.Object, ns, "status", "nodes"); err != nil {
		t.Fatal(err)
	}
}

// checkOneJobPerRecord: each of the n records stamped its key into
// exactly one of Slurm's jobs, which COMPLETED.
func (e *env) checkOneJobPerRecord(t *testing.T, w *recordWatch, n int, jobs []slurmJob) {
	t.Helper()
	byKey := map[string][]slurmJob{}
	for _, j := range jobs {
		if !strings.HasPrefix(j.Name, "stageout-") {
			byKey[j.Comment] = append(byKey[j.Comment], j)
		}
	}
	keys := 0
	for name, r := range w.records {
		if r.key == "" {
			t.Errorf("the record %s was never seen with its key", name)
			continue
		}
		keys++
		if js := byKey[r.key]; len(js) != 1 || js[0].JobState != "COMPLETED" {
			t.Errorf("the record %s: Slurm jobs with its key %+v, want exactly one COMPLETED", name, js)
		}
	}
	if len(w.records) != n || keys != n {
		t.Errorf("saw %d records (%d with a key), want %d", len(w.records), keys, n)
	}
}

// invokeLogFigures reads every invoke pod's log (retries included) of the
// Workflow name of n steps: who watched the group, and the requests each
// sent.
func (e *env) invokeLogFigures(t *testing.T, name string, n int, f *loopFigures) {
	t.Helper()
	ctx := context.Background()
	pods, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !isInvokePod(&p) {
			continue
		}
		f.invokePods++
		raw, err := e.kube.CoreV1().Pods(e.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
		if err != nil {
			t.Errorf("logs of %s: %v", p.Name, err)
			continue
		}
		sent := false
		sc := bufio.NewScanner(strings.NewReader(string(raw)))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, `msg="watching the cluster's jobs of this group"`) {
				f.watching++
			}
			if m := requestsSentRE.FindStringSubmatch(line); m != nil {
				b, _ := strconv.Atoi(m[1])
				k, _ := strconv.Atoi(m[2])
				f.backendSent += b
				f.kubernetesSent += k
				sent = true
			}
		}
		if !sent {
			t.Errorf("invoke pod %s logged no \"requests sent\" line", p.Name)
		}
	}
	if f.invokePods < n {
		t.Errorf("%d invoke pods, want at least %d", f.invokePods, n)
	}
}

func isInvokePod(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == "main" && len(c.Args) > 0 && c.Args[0] == "invoke" {
			return true
		}
	}
	return false
}

func (f loopFigures) String() string {
	return fmt.Sprintf("wall %s, %d invoke pods, backend requests %d (%.1f a step), kubernetes requests %d (%.1f a step), %d invokes watched the group, %d of %d records in a watch group, %d with status.watchObserved",
		f.wall, f.invokePods, f.backendSent, float64(f.backendSent)/fiftySteps, f.kubernetesSent, float64(f.kubernetesSent)/fiftySteps,
		f.watching, f.grouped, fiftySteps, f.observed)
}

// TestWorkflowFiftyStepsShareAWatcher: one Workflow loops fifty Slurm jobs
// over the shipped bridge-job, twenty-five at a time. The Workflow
// succeeds with exactly one Slurm job per record; the invokes share the
// cluster's watcher: one of them (or, after a handover, a few) logged that
// it watches the group, the records carry the group, the watcher's
// observations reached the other invokes' records, and its lease
// ConfigMap existed. With BRIDGE_E2E_WATCHER_COMPARE=1 the same loop runs
// again with --watcher=false, for the requests per step side by side
// (not by default: it doubles the test's 2-3 minutes).
func TestWorkflowFiftyStepsShareAWatcher(t *testing.T) {
	e := setup(t)
	t.Parallel()
	on := e.runLoop(t, "fifty-"+randHex(3), false)
	t.Logf("with the watcher: %s", on)
	if on.watching < 1 {
		t.Errorf("no invoke logged that it watches the cluster's jobs of its group")
	}
	if on.grouped != fiftySteps {
		t.Errorf("%d of %d records name a watch group, want all", on.grouped, fiftySteps)
	}
	// Every job but the watching invoke's own gets its states from the
	// watcher first while the lease is live; half is a floor that a
	// watcher which fell back to polling misses.
	if on.observed < fiftySteps/2 {
		t.Errorf("%d of %d records carried status.watchObserved, want at least %d", on.observed, fiftySteps, fiftySteps/2)
	}
	if on.leases < 1 {
		t.Error("no bridge-watch-<group> lease ConfigMap was seen during the run")
	}
	if os.Getenv("BRIDGE_E2E_WATCHER_COMPARE") != "1" {
		return
	}
	off := e.runLoop(t, "fifty-off-"+randHex(3), true)
	t.Logf("without the watcher (BRIDGE_WATCHER=false): %s", off)
	if off.watching != 0 || off.grouped != 0 || off.observed != 0 {
		t.Errorf("with BRIDGE_WATCHER=false: %d watching, %d records grouped, %d observed; want none", off.watching, off.grouped, off.observed)
	}
	t.Logf("backend requests a step: %.1f with the watcher, %.1f without", float64(on.backendSent)/fiftySteps, float64(off.backendSent)/fiftySteps)
}
