package e2e

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The shipped LSF and IBM Quantum examples (issue 40), each workflow,
// BridgeJob and plain Job run as a user submits it, against the protocol
// fakes that hack/e2e.sh serves on the node's own address (hack/fakes: the
// fakes the Go tests use). What is put in is the user's site: the fake's
// URL (plain HTTP, as the suite's Slurm), the Secrets' values from the
// fake's credentials, and for Quantum the suite's S3 (plain HTTP, so
// secure false) with a bucket of the test's.

// fakeSite is one fake of hack/e2e.sh: its URL and its Secret's keys.
type fakeSite struct {
	url   string
	creds map[string]string
}

// needFake returns the fake `which` (lsf, quantum) that hack/e2e.sh
// started (BRIDGE_E2E_<WHICH>_URL and _CREDS_DIR); it fails the test
// under CI=true, skips it elsewhere, when there is none the pods reach.
func (e *env) needFake(t *testing.T, which string) fakeSite {
	t.Helper()
	v := "BRIDGE_E2E_" + strings.ToUpper(which)
	f := fakeSite{url: os.Getenv(v + "_URL"), creds: map[string]string{}}
	msg := ""
	if u, err := url.Parse(f.url); f.url == "" || err != nil || u.Hostname() != e.nodeIP {
		msg = v + "_URL=" + f.url + " is not the " + which + " fake on the node's address " + e.nodeIP + " (hack/e2e.sh starts it)"
	} else if files, _ := filepath.Glob(filepath.Join(os.Getenv(v+"_CREDS_DIR"), "*")); len(files) == 0 {
		msg = v + "_CREDS_DIR holds no credentials of the " + which + " fake (hack/e2e.sh sets it)"
	} else {
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			f.creds[filepath.Base(p)] = string(b)
		}
		return f
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true, so this fails instead of skipping)", msg)
	}
	t.Skip(msg)
	return f
}

// applyFakeSecrets applies examples/<which>/secret.yaml filled in as its
// comment says: the backend's Secret with the fake's credentials, the S3
// one (Quantum's) with the suite's S3, each bound to where it goes.
func (e *env) applyFakeSecrets(t *testing.T, which string, f fakeSite) {
	t.Helper()
	for _, s := range e.example(t, which, "secret.yaml") {
		data := map[string]any{}
		switch s.GetName() {
		case which + "-credentials":
			for k, v := range f.creds {
				data[k] = v
			}
			data[originsKey] = origins(f.url)
		case which + "-s3-credentials":
			data = map[string]any{"accesskey": e.s3AccessKey, "secretkey": e.s3SecretKey, originsKey: origins("http://" + e.s3Endpoint)}
		default:
			t.Fatalf("examples/%s/secret.yaml holds a Secret %s this test does not know", which, s.GetName())
		}
		if err := unstructured.SetNestedField(s.Object, data, "stringData"); err != nil {
			t.Fatal(err)
		}
		e.apply(t, s)
	}
}

// fakeExample is one backend's examples and what the suite puts in.
type fakeExample struct {
	which string
	site  map[string]string // the example's address -> the suite's
	s3    bool              // it uploads to S3: the suite's is plain HTTP
	// check looks at a DONE job: its id, and its record's or step's
	// outputs (status.outputs or the step's outputs parameter: the
	// uploaded files' locations).
	check func(t *testing.T, id, outputs string)
}

// TestExamplesLSF: examples/lsf/{workflow,bridgejob,job}.yaml as shipped
// against the LSF fake: the Workflow Succeeds with its step DONE, the
// BridgeJob DONE, the plain Job succeeds once with its record DONE, each
// with the fake's job id.
func TestExamplesLSF(t *testing.T) {
	e := setup(t)
	f := e.needFake(t, "lsf")
	t.Parallel()
	e.applyFakeSecrets(t, "lsf", f)
	e.runFakeExamples(t, fakeExample{which: "lsf", site: map[string]string{"https://lsf.example.org:8443": f.url},
		check: func(*testing.T, string, string) {}})
}

// TestExamplesQuantum: examples/quantum/{workflow,bridgejob,job}.yaml as
// shipped against the Quantum fake (its IAM too), uploading to the
// suite's S3: each ends DONE as for LSF, and its results and metrics are
// in the bucket where its outputs say.
func TestExamplesQuantum(t *testing.T) {
	e := setup(t)
	f := e.needFake(t, "quantum")
	t.Parallel()
	e.applyFakeSecrets(t, "quantum", f)
	bucket := e.bucket(t)
	e.runFakeExamples(t, fakeExample{which: "quantum", s3: true,
		site:  map[string]string{"https://quantum.cloud.ibm.com/api/v1": f.url, "s3.example.org:443": e.s3Endpoint, "quantum-results": bucket},
		check: func(t *testing.T, _, outputs string) { e.checkUploaded(t, bucket, outputs, 2) }})
}

// runFakeExamples runs the workflow, the BridgeJob and the plain Job of
// x.which side by side.
func (e *env) runFakeExamples(t *testing.T, x fakeExample) {
	t.Run("workflow", func(t *testing.T) {
		t.Parallel()
		e.runFakeWorkflow(t, x)
	})
	t.Run("bridgejob", func(t *testing.T) {
		t.Parallel()
		bj := e.siteExample(t, x.which, "bridgejob.yaml", x.site)[0]
		// The plain Job's record is <which>-example's.
		bj.SetName(x.which + "-example-" + randHex(3))
		if x.s3 {
			_ = unstructured.SetNestedField(bj.Object, false, "spec", "s3storage", "secure")
		}
		e.runBridgeJob(t, bj, func(id string) { x.check(t, id, e.configMap(t, bj.GetName()).Data["status.outputs"]) })
	})
	t.Run("job", func(t *testing.T) {
		t.Parallel()
		job := e.siteExample(t, x.which, "job.yaml", x.site)[0]
		if x.s3 {
			addContainerArgs(t, job, "--s3-secure", "false")
		}
		e.runJobOnce(t, job, 3*time.Minute)
		cm := e.configMap(t, x.which+"-example")
		if cm == nil || cm.Data["status.jobStatus"] != "DONE" || cm.Data["id"] == "" {
			t.Fatalf("the record %s-example-bridge-cm: %v, want DONE with the job's id", x.which, cm)
		}
		x.check(t, cm.Data["id"], cm.Data["status.outputs"])
	})
}

// runFakeWorkflow runs examples/<which>/workflow.yaml: Succeeded, its
// step DONE with a job id, the record cleaned up.
func (e *env) runFakeWorkflow(t *testing.T, x fakeExample) {
	t.Helper()
	wf := e.siteExample(t, x.which, "workflow.yaml", x.site)[0]
	if x.s3 {
		addTaskParam(t, wf, "job", "s3_secure", "false")
	}
	name := e.submitWorkflow(t, wf)
	wf = e.waitDone(t, name, 4*time.Minute)
	if got := phaseOf(wf); got != "Succeeded" {
		t.Fatalf("workflow %s phase = %s, want Succeeded", name, got)
	}
	job, ok := nodeNamed(wf, "job")
	if !ok || job.Params["status"] != "DONE" || job.Params["job_id"] == "" {
		t.Fatalf("the job's outputs %v, want DONE with a job id", job.Params)
	}
	x.check(t, job.Params["job_id"], job.Params["outputs"])
	e.waitNoConfigMap(t, name, 30*time.Second)
}

// checkUploaded wants outputs to list at least n locations, each an object
// in bucket of the suite's S3.
func (e *env) checkUploaded(t *testing.T, bucket, outputs string, n int) {
	t.Helper()
	locs := strings.Fields(outputs)
	if len(locs) < n {
		t.Errorf("outputs %q, want at least %d files uploaded to %s", outputs, n, bucket)
	}
	for _, loc := range locs {
		b, key, _ := strings.Cut(strings.TrimPrefix(loc, "s3://"), "/")
		if b != bucket {
			t.Errorf("output %s is not in the bucket %s", loc, bucket)
			continue
		}
		if _, err := e.s3.StatObject(context.Background(), b, key, minio.StatObjectOptions{}); err != nil {
			t.Errorf("output %s is not in S3: %v", loc, err)
		}
	}
	t.Logf("uploaded: %s", strings.Join(locs, " "))
}

// addTaskParam adds the argument name=value to the DAG task task of wf,
// which must not give it yet (an argument the example leaves to the
// template's default, such as s3_secure).
func addTaskParam(t *testing.T, wf *unstructured.Unstructured, task, name, value string) {
	t.Helper()
	tpls, _, _ := unstructured.NestedFieldNoCopy(wf.Object, "spec", "templates")
	tl, _ := tpls.([]any)
	for _, tpl := range tl {
		tasks, _, _ := unstructured.NestedFieldNoCopy(tpl.(map[string]any), "dag", "tasks")
		tks, _ := tasks.([]any)
		for _, tk := range tks {
			tm := tk.(map[string]any)
			if tm["name"] != task {
				continue
			}
			ps, _, _ := unstructured.NestedSlice(tm, "arguments", "parameters")
			for _, p := range ps {
				if p.(map[string]any)["name"] == name {
					t.Fatalf("the task %s gives %s already; set it with setTaskParams", task, name)
				}
			}
			ps = append(ps, map[string]any{"name": name, "value": value})
			_ = unstructured.SetNestedSlice(tm, ps, "arguments", "parameters")
			return
		}
	}
	t.Fatalf("the workflow has no DAG task %s", task)
}

// addContainerArgs appends args to the first container of a Job.
func addContainerArgs(t *testing.T, job *unstructured.Unstructured, args ...string) {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		t.Fatal("the Job has no container")
	}
	c := cs[0].(map[string]any)
	have, _, _ := unstructured.NestedStringSlice(c, "args")
	_ = unstructured.SetNestedStringSlice(c, append(have, args...), "args")
	if err := unstructured.SetNestedSlice(job.Object, cs, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}
