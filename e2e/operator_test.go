package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var bridgeJobs = schema.GroupVersionResource{Group: "bridgejob.ibm.com", Version: "v1alpha1", Resource: "bridgejobs"}

// The operator is installed once for all the tests that need it (they run in
// parallel) and removed after the suite (TestMain).
var (
	operatorOnce sync.Once
	operatorErr  string
)

// slurmBridgeJobs is held by every test that makes BridgeJobs on the
// suite's Slurm: TestOperatorSlurmBridgeJob counts the operator's Slurm
// figures exactly, which only holds while its job is the only one.
var slurmBridgeJobs sync.Mutex

// installOperator applies deploy/operator the way the README says, with
// the image under test, once; the suite removes it at its end.
func (e *env) installOperator(t *testing.T) {
	t.Helper()
	operatorOnce.Do(func() { operatorErr = e.applyOperator() })
	if operatorErr != "" {
		t.Fatal(operatorErr)
	}
	// The test namespace's admin grants the operator, as the README says.
	grant := exec.Command(e.kubectl, "--kubeconfig", e.kubeconfig, "apply", "-n", e.ns, "-f", filepath.Join(e.repo, "deploy", "operator", "namespace-grant.yaml"))
	if out, err := grant.CombinedOutput(); err != nil {
		t.Fatalf("granting the operator namespace %s: %v: %s", e.ns, err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- operator:\n%s", e.kubectlOut("-n", "bridge-runner-system", "logs", "deployment/bridge-runner-operator", "--tail", "80"))
		}
	})
}

// applyOperator installs deploy/operator with the image under test and
// waits for its rollout; it returns what went wrong, or "".
func (e *env) applyOperator() string {
	out, err := exec.Command(e.kubectl, "kustomize", filepath.Join(e.repo, "deploy", "operator")).Output()
	if err != nil {
		return "kubectl kustomize deploy/operator: " + err.Error()
	}
	const pinned = "ghcr.io/bridge-runner/bridge-runner:v0.1.0"
	img := regexp.MustCompile(`(?m)^( *)image: ` + regexp.QuoteMeta(pinned) + `$`)
	y := img.ReplaceAllString(string(out), "${1}image: "+e.image+"\n${1}imagePullPolicy: Never")
	// The local backend is off unless the admin allows it; the suite runs
	// examples/local/bridgejob.yaml.
	y = strings.ReplaceAll(y, "--job-image="+pinned, "--job-image="+e.image+"\n        - --allow-local")
	// No registry: the jobs' pods run the image loaded on the node (a
	// BridgeJob's imagepullpolicy is not for the operator's image).
	y = strings.ReplaceAll(y, "--job-image-pull-policy=IfNotPresent", "--job-image-pull-policy=Never")
	if !strings.Contains(y, "--job-image-pull-policy=Never") {
		return "deploy/operator does not give --job-image-pull-policy=IfNotPresent any more; update this test"
	}
	if !strings.Contains(y, "imagePullPolicy: Never") {
		return "deploy/operator does not pin " + pinned + " any more; update this test"
	}
	apply := exec.Command(e.kubectl, "--kubeconfig", e.kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(y)
	if out, err := apply.CombinedOutput(); err != nil {
		return "kubectl apply deploy/operator: " + err.Error() + ": " + string(out)
	}
	suiteCleanups = append(suiteCleanups, func() {
		del := exec.Command(e.kubectl, "--kubeconfig", e.kubeconfig, "delete", "--ignore-not-found", "--wait=false", "-f", "-")
		del.Stdin = strings.NewReader(y)
		_ = del.Run()
	})
	wait := exec.Command(e.kubectl, "--kubeconfig", e.kubeconfig, "-n", "bridge-runner-system", "rollout", "status",
		"deployment/bridge-runner-operator", "--timeout=180s")
	if out, err := wait.CombinedOutput(); err != nil {
		return "the operator did not start: " + err.Error() + ": " + string(out) + "\n" +
			e.kubectlOut("-n", "bridge-runner-system", "get", "pods", "-o", "wide")
	}
	return ""
}

// runBridgeJob is one BridgeJob's life through the operator: it creates bj
// in the test namespace, waits until its status holds a final state, wants
// that state to be DONE with a job id, and `kubectl get bridgejobs` to show
// both in its STATE and JOB ID columns; then check looks at the remote job
// (by id), and the BridgeJob is deleted: its record and Job must go too.
func (e *env) runBridgeJob(t *testing.T, bj *unstructured.Unstructured, check func(id string)) {
	t.Helper()
	e.installOperator(t)
	name := bj.GetName()
	e.dumpOnFailure(t, "bridgejob", name)
	res := e.dyn.Resource(bridgeJobs).Namespace(e.ns)
	// A ceiling: a BridgeJob is DONE in seconds, but the suite's Ray has one
	// CPU that its Ray tests running side by side wait for in turn (a Ray
	// job took 70 s to start its driver on a loaded machine; see the Ray
	// examples' 8 min).
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	var createErr error
	// The CRD may take a moment to be served after its creation.
	if err := poll(ctx, time.Second, func() (bool, error) {
		_, createErr = res.Create(ctx, bj, metav1.CreateOptions{})
		return createErr == nil, nil
	}); err != nil {
		t.Fatalf("creating the BridgeJob: %v (last error: %v)", err, createErr)
	}
	var state, id string
	if err := poll(ctx, time.Second, func() (bool, error) {
		got, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		state, _, _ = unstructured.NestedString(got.Object, "status", "state")
		id, _, _ = unstructured.NestedString(got.Object, "status", "jobid")
		return state == "DONE" || state == "FAILED" || state == "KILLED" || state == "UNKNOWN", nil
	}); err != nil || state != "DONE" || id == "" {
		t.Fatalf("BridgeJob state %q, job id %q (want DONE with an id): %v", state, id, err)
	}
	t.Logf("BridgeJob %s: DONE in %s, job id %s", name, time.Since(start).Round(100*time.Millisecond), id)
	e.checkPrinterColumns(t, name, state, id)
	check(id)
	if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, time.Second, func() (bool, error) {
		_, err1 := res.Get(ctx, name, metav1.GetOptions{})
		_, err2 := e.kube.CoreV1().ConfigMaps(e.ns).Get(ctx, name+"-bridge-cm", metav1.GetOptions{})
		_, err3 := e.kube.BatchV1().Jobs(e.ns).Get(ctx, name+"-bridge-job", metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3), nil
	}); err != nil {
		t.Errorf("the BridgeJob or its record or Job is still there after deletion: %v", err)
	}
}

// checkPrinterColumns wants `kubectl get bridgejobs NAME` to show the
// columns NAME STATE JOB ID AGE, and name's row the state and job id.
func (e *env) checkPrinterColumns(t *testing.T, name, state, id string) {
	t.Helper()
	table := e.kubectlOut("get", "bridgejobs", name)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME STATE JOB ID AGE" {
		t.Fatalf("kubectl get bridgejobs shows, want the columns NAME STATE JOB ID AGE and one row:\n%s", table)
	}
	if row := strings.Fields(lines[1]); len(row) != 4 || row[0] != name || row[1] != state || row[2] != id {
		t.Errorf("kubectl get bridgejobs shows, want %s %s %s:\n%s", name, state, id, table)
	}
}

// bridgeJob is a BridgeJob named name with spec.
func bridgeJob(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bridgejob.ibm.com/v1alpha1", "kind": "BridgeJob",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

// TestOperatorSlurmBridgeJob: a BridgeJob for the real Slurm, reconciled by
// the operator installed from deploy/operator, runs in a real pod to DONE;
// kubectl get bridgejobs shows its state and job id; the Slurm job
// COMPLETED; deleting it removes what the operator made. The operator's
// metrics, scraped through the pod proxy before, during and after and
// parsed by Prometheus's own parser, follow the job: one Job created, one
// submission, RUNNING entered while DONE is not, then DONE and one end
// detected, and the backend requests to this Slurm counted by answer.
// The figures compare only within one leader's life: when the Lease moved
// meanwhile (a replica that could not renew under load steps down and
// restarts, its counters from zero), the BridgeJob runs once more, and a
// second move fails the test, saying so.
func TestOperatorSlurmBridgeJob(t *testing.T) {
	e := setup(t)
	t.Parallel()
	e.installOperator(t)
	slurmBridgeJobs.Lock()
	defer slurmBridgeJobs.Unlock()
	var moves []string
	for range 2 {
		r := e.operatorSlurmRun(t)
		if r.leader == r.leaderAfter {
			others := e.othersIn(t, r)
			if r.mid = pickMid(r.before, r.scrapes, "slurm", others); r.mid == nil {
				t.Fatalf("none of %d scrapes saw the job RUNNING and not yet DONE (other Slurm jobs meanwhile: %d)", len(r.scrapes), others)
			}
			e.checkSlurmMetrics(t, r, others, hostOf(t, e.slurmPodURL))
			return
		}
		moves = append(moves, r.leader+" -> "+r.leaderAfter)
		t.Logf("the operator's Lease moved during the BridgeJob (%s): its counters started over, running it again", moves[len(moves)-1])
	}
	t.Fatalf("the operator's Lease moved during both BridgeJobs (%s); see the operator's log below", strings.Join(moves, "; "))
}

// slurmRun is what TestOperatorSlurmBridgeJob scraped of one BridgeJob's
// life, and which leader answered before and after.
type slurmRun struct {
	before, mid, after  metricsOf
	scrapes             []metricsOf // the leader's, while the job ran (pickMid)
	leader, leaderAfter string
	// from and to are when the before and after scrapes were taken, id
	// the BridgeJob's Slurm job (see othersIn).
	from, to time.Time
	id       string
}

// operatorSlurmRun runs one Slurm BridgeJob through the operator (runBridgeJob)
// with the leader's scrapes before it (once quiet), in mid-life and after its
// end is counted (or the leader changed).
func (e *env) operatorSlurmRun(t *testing.T) slurmRun {
	t.Helper()
	bj := bridgeJob("bj-slurm-"+randHex(3), map[string]any{
		"backend": "slurm", "resourceURL": e.slurmPodURL, "resourcesecret": "slurm-credentials",
		"imagepullpolicy": "Never", "updateinterval": int64(2), "jobproperties": e.jobProps(),
		// Long enough to be seen RUNNING in the metrics (scraped every second).
		"jobdata": map[string]any{"jobscript": "#!/bin/bash\necho operator job $SLURM_JOB_ID\nsleep 15\n", "scriptlocation": "inline"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var r slurmRun
	var err error
	// Ready replicas may still stand by: the quiet scrape is the Lease holder's.
	if r.before, r.leader, err = e.quietOperator(ctx, "slurm"); err != nil {
		t.Fatalf("scraping the operator before the BridgeJob: %v", err)
	}
	r.from = time.Now()
	midLife := e.watchMidLife(ctx, r.leader)
	e.runBridgeJob(t, bj, func(id string) {
		r.id = id
		if sj := e.slurmJob(t, id); !strings.Contains(sj.JobState, "COMPLETED") {
			t.Errorf("Slurm job %s: %v, want COMPLETED", id, sj.JobState)
		}
		// The status is mirrored from the record the counters count from:
		// wait for the end to be counted too (or for another leader).
		if err := poll(ctx, time.Second, func() (bool, error) {
			m, leader, err := e.operatorLeaderMetrics(ctx)
			r.after, r.leaderAfter = m, leader
			r.to = time.Now()
			return err == nil && (leader != r.leader || m.value("bridge_runner_operator_detection_latency_seconds", "backend", "slurm") >
				r.before.value("bridge_runner_operator_detection_latency_seconds", "backend", "slurm")), nil
		}); err != nil {
			t.Fatalf("the operator's metrics never counted the job's end: %v", err)
		}
	})
	cancel()
	r.scrapes = <-midLife
	return r
}

// othersIn counts the Slurm jobs other than r's that were submitted,
// started or ended between r's first and last scrapes (from a minute
// before: a step's record may say RUNNING or DONE up to its poll interval
// after Slurm; a second after, Slurm's times being whole seconds): the
// operator counts workflow steps' records beside BridgeJobs', and the
// suite runs Slurm steps in parallel with this test, so each of these may
// have grown a counter by one.
func (e *env) othersIn(t *testing.T, r slurmRun) int {
	t.Helper()
	from, to := r.from.Add(-time.Minute).Unix(), r.to.Add(time.Second).Unix()
	in := func(at int64) bool { return at != 0 && at >= from && at <= to }
	n := 0
	for _, j := range e.slurmJobs(t) {
		if fmt.Sprint(j.JobID) != r.id && (in(j.SubmitTime) || in(j.StartTime) || in(j.EndTime)) {
			n++
		}
	}
	return n
}

// checkSlurmMetrics compares the operator's scrapes before, during and
// after one Slurm BridgeJob: each counter grew by what the one job makes
// it grow, exactly when no other Slurm job was active meanwhile (others
// 0), and by no more than one more for each other one (others, othersIn).
func (e *env) checkSlurmMetrics(t *testing.T, r slurmRun, others int, target string) {
	t.Helper()
	before, mid, after := r.before, r.mid, r.after
	d := func(m metricsOf, fam string, labels ...string) float64 {
		return m.value(fam, labels...) - before.value(fam, labels...)
	}
	t.Logf("other Slurm jobs submitted, started or ended meanwhile: %d", others)
	for _, c := range []struct {
		m      metricsOf
		fam    string
		labels []string
		want   float64
	}{
		{mid, "bridge_runner_operator_jobs_created_total", []string{"backend", "slurm"}, 1},
		{mid, "bridge_runner_operator_submissions_total", []string{"backend", "slurm"}, 1},
		{mid, "bridge_runner_operator_detection_latency_seconds", []string{"backend", "slurm"}, 0},
		{after, "bridge_runner_operator_jobs_created_total", []string{"backend", "slurm"}, 1},
		{after, "bridge_runner_operator_submissions_total", []string{"backend", "slurm"}, 1},
		{after, "bridge_runner_operator_job_transitions_total", []string{"backend", "slurm", "state", "RUNNING"}, 1},
		{after, "bridge_runner_operator_job_transitions_total", []string{"backend", "slurm", "state", "DONE"}, 1},
		{after, "bridge_runner_operator_detection_latency_seconds", []string{"backend", "slurm"}, 1},
	} {
		if got := d(c.m, c.fam, c.labels...); got < c.want || got > c.want+float64(others) {
			t.Errorf("%s%v grew by %v, want %v (and up to %d more: the other Slurm jobs meanwhile)", c.fam, c.labels, got, c.want, others)
		}
	}
	if v := mid.value("bridge_runner_operator_bridgejobs", "backend", "slurm", "state", "RUNNING"); v < 1 {
		t.Errorf("BridgeJobs RUNNING on slurm in the mid-life scrape: %v", v)
	}
	if v := after.value("bridge_runner_operator_bridgejobs", "backend", "slurm", "state", "DONE"); v < 1 {
		t.Errorf("BridgeJobs DONE on slurm after the end: %v", v)
	}
	// A submit and the polls of a 10 s job at least, all answered.
	ok := d(after, "bridge_runner_operator_backend_requests_total", "backend", "slurm", "target", target, "class", "2xx")
	if ok < 3 {
		t.Errorf("backend requests to %s answered 2xx: %v more, want at least 3 (submit and polls)", target, ok)
	}
	if mok := d(mid, "bridge_runner_operator_backend_requests_total", "backend", "slurm", "target", target, "class", "2xx"); mok < 1 || mok >= ok {
		t.Errorf("backend requests 2xx: %v at RUNNING, %v at the end; want some at RUNNING and more at the end", mok, ok)
	}
	if h := after.series("bridge_runner_operator_detection_latency_seconds", "backend", "slurm"); h == nil ||
		h.Histogram.GetSampleSum()-before.histSum("bridge_runner_operator_detection_latency_seconds", "slurm") > 60*float64(1+others) {
		t.Errorf("detection latency: %v, want the end seen within 60 s", h)
	}
	if d(after, "bridge_runner_operator_reconcile_duration_seconds", "result", "success") < 2 {
		t.Errorf("successful reconciles did not grow with the job")
	}
	after.checkTypes(t)
	t.Logf("operator metrics for the job: backend requests 2xx +%v (%v at RUNNING), detection latency sum %.1f s",
		ok, d(mid, "bridge_runner_operator_backend_requests_total", "backend", "slurm", "target", target, "class", "2xx"),
		after.series("bridge_runner_operator_detection_latency_seconds", "backend", "slurm").GetHistogram().GetSampleSum()-
			before.histSum("bridge_runner_operator_detection_latency_seconds", "slurm"))
}

// TestOperatorLocalBridgeJob: examples/local/bridgejob.yaml as shipped (only
// its name made unique, since TestExampleLocalJob uses the same record name),
// with examples/local/secret.yaml: the local backend runs the script in the
// operator's job pod of the shipped image to DONE.
func TestOperatorLocalBridgeJob(t *testing.T) {
	e := setup(t)
	t.Parallel()
	e.apply(t, e.example(t, "local", "secret.yaml")[0])
	bj := e.example(t, "local", "bridgejob.yaml")[0]
	bj.SetName("bj-local-" + randHex(3))
	e.runBridgeJob(t, bj, func(id string) {
		cm := e.configMap(t, bj.GetName())
		if cm == nil || cm.Data["status.jobStatus"] != "DONE" || cm.Data["id"] != id {
			t.Errorf("the record %s-bridge-cm: %v, want DONE with id %s", bj.GetName(), cm, id)
		}
	})
}

// TestOperatorRayBridgeJob: examples/ray/bridgejob.yaml against the real Ray
// whose Jobs API listens on the node's own address with token auth (the
// token from the Secret ray-credentials, mounted in the job pod): the
// Python script connects to the Ray cluster and the job runs to DONE; Ray
// says SUCCEEDED and the driver's output is the script's. The example's
// runtime_env (pip numpy) is left out: the suite has no package index.
func TestOperatorRayBridgeJob(t *testing.T) {
	e := setup(t)
	e.needRay(t)
	t.Parallel()
	bj := e.example(t, "ray", "bridgejob.yaml")[0]
	bj.SetName("bj-ray-" + randHex(3))
	spec := map[string]any{"resourceURL": e.rayURL, "updateinterval": int64(2), "jobproperties": `{"entrypoint_num_cpus":1}`}
	for k, v := range spec {
		if err := unstructured.SetNestedField(bj.Object, v, "spec", k); err != nil {
			t.Fatal(err)
		}
	}
	e.runBridgeJob(t, bj, func(id string) {
		if j := e.rayJob(t, id); j.Status != "SUCCEEDED" {
			t.Errorf("Ray job %s: %s (%s), want SUCCEEDED", id, j.Status, j.Message)
		}
		if logs := e.rayLogs(t, id); !strings.Contains(logs, "'CPU': 1.0") {
			t.Errorf("Ray job %s's output lacks the cluster's resources:\n%s", id, logs)
		}
	})
}
