// Package examples_test checks the per-backend examples that are not Argo
// objects (those are proved in workflows/workflows_test.go with Argo's own
// validator, and the KFP pipelines by hack/kfp-check.sh with the real kfp
// SDK): every backend has the four examples; the Secrets and plain Jobs
// decode strictly into the Kubernetes types; every Job's command line is
// accepted by the real binary (the local one runs for real); and a real
// kube-apiserver accepts the Jobs (server-side dry run, strict fields).
package examples_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/internal/testbin"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/operator"
)

var backends = []string{"local", "slurm", "lsf", "quantum", "ray", "htcondor"}

func TestEveryBackendHasEveryExample(t *testing.T) {
	for _, b := range backends {
		for _, f := range []string{"secret.yaml", "workflow.yaml", "kfp_pipeline.py", "job.yaml", "bridgejob.yaml"} {
			if _, err := os.Stat(filepath.Join(b, f)); err != nil {
				t.Errorf("examples/%s/%s: %v", b, f, err)
			}
		}
	}
	dirs, _ := filepath.Glob("*/job.yaml")
	if len(dirs) != len(backends) {
		t.Errorf("examples for %v, want exactly %v", dirs, backends)
	}
}

func secrets(t *testing.T, b string) []corev1.Secret {
	t.Helper()
	var out []corev1.Secret
	for _, d := range testutil.YAMLDocs(t, filepath.Join(b, "secret.yaml")) {
		var s corev1.Secret
		if err := yaml.UnmarshalStrict(d, &s); err != nil {
			t.Fatalf("examples/%s/secret.yaml: %v", b, err)
		}
		if s.Kind != "Secret" || s.APIVersion != "v1" {
			t.Fatalf("examples/%s/secret.yaml: %s %s", b, s.APIVersion, s.Kind)
		}
		out = append(out, s)
	}
	return out
}

func job(t *testing.T, b string) *batchv1.Job {
	t.Helper()
	d := testutil.YAMLDocs(t, filepath.Join(b, "job.yaml"))
	if len(d) != 1 {
		t.Fatalf("examples/%s/job.yaml: %d documents, want one Job", b, len(d))
	}
	var j batchv1.Job
	if err := yaml.UnmarshalStrict(d[0], &j); err != nil {
		t.Fatalf("examples/%s/job.yaml: %v", b, err)
	}
	if j.Kind != "Job" || j.APIVersion != "batch/v1" {
		t.Fatalf("examples/%s/job.yaml: %s %s", b, j.APIVersion, j.Kind)
	}
	return &j
}

// TestJobsMountTheirSecrets: each Job runs our image as the bridge-runner
// ServiceAccount, mounts the example's Secrets where the binary reads them,
// and retries only exit 75.
func TestJobsMountTheirSecrets(t *testing.T) {
	for _, b := range backends {
		j := job(t, b)
		names := map[string]bool{}
		for _, s := range secrets(t, b) {
			names[s.Name] = true
		}
		ps := j.Spec.Template.Spec
		if ps.ServiceAccountName != "bridge-runner" || ps.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: serviceAccountName %q restartPolicy %q", b, ps.ServiceAccountName, ps.RestartPolicy)
		}
		if len(ps.Containers) != 1 {
			t.Fatalf("%s: %d containers", b, len(ps.Containers))
		}
		c := ps.Containers[0]
		if c.Image != pinnedImage(t) || !slices.Equal(c.Command, []string{"/bridge-runner"}) || len(c.Args) == 0 || c.Args[0] != "invoke" {
			t.Errorf("%s: image %q command %v args %v", b, c.Image, c.Command, c.Args)
		}
		vols := map[string]string{}
		for _, v := range ps.Volumes {
			if v.Secret != nil {
				vols[v.Name] = v.Secret.SecretName
				if !names[v.Secret.SecretName] {
					t.Errorf("%s: the Job mounts the Secret %s, which secret.yaml does not define", b, v.Secret.SecretName)
				}
			}
		}
		mounted := map[string]bool{}
		for _, m := range c.VolumeMounts {
			if vols[m.Name] != "" {
				mounted[m.MountPath] = true
			}
		}
		if !mounted["/credentials"] {
			t.Errorf("%s: no Secret at /credentials", b)
		}
		if slices.Contains(c.Args, "--s3-endpoint") && !mounted["/s3credentials"] {
			t.Errorf("%s: the job uses S3 but no Secret is at /s3credentials", b)
		}
		pfp := j.Spec.PodFailurePolicy
		if pfp == nil || len(pfp.Rules) != 1 || pfp.Rules[0].Action != batchv1.PodFailurePolicyActionFailJob ||
			pfp.Rules[0].OnExitCodes == nil || pfp.Rules[0].OnExitCodes.Operator != batchv1.PodFailurePolicyOnExitCodesOpNotIn ||
			!slices.Equal(pfp.Rules[0].OnExitCodes.Values, []int32{75}) {
			t.Errorf("%s: podFailurePolicy %+v, want: fail the Job on every exit code but 75", b, pfp)
		}
	}
}

func TestPipelinesUseTheComponents(t *testing.T) {
	re := regexp.MustCompile(`COMPONENTS / "([^"]+)"`)
	for _, b := range backends {
		src, err := os.ReadFile(filepath.Join(b, "kfp_pipeline.py"))
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindAllStringSubmatch(string(src), -1)
		if len(m) == 0 {
			t.Errorf("%s/kfp_pipeline.py loads no component", b)
		}
		for _, x := range m {
			if _, err := os.Stat(filepath.Join("..", "components", x[1])); err != nil {
				t.Errorf("%s/kfp_pipeline.py loads %s: %v", b, x[1], err)
			}
		}
		for _, want := range []string{"use_secret_as_volume", "ExitHandler", "set_caching_options(False)", fmt.Sprintf("backend=%q", b)} {
			if !strings.Contains(strings.ReplaceAll(string(src), "'", `"`), want) {
				t.Errorf("%s/kfp_pipeline.py has no %s", b, want)
			}
		}
	}
}

// TestContractJobs: each Job's command line is accepted by the binary
// (--help after it fails on any unknown flag or bad value); the local
// example runs for real.
func TestContractJobs(t *testing.T) {
	for _, b := range backends {
		c := job(t, b).Spec.Template.Spec.Containers[0]
		args := append(append([]string{}, c.Command[1:]...), c.Args...)
		if b == "local" {
			args = append(args, "--state-dir", t.TempDir(), "--store", "file", "--update-interval", "0.2")
		} else {
			args = append(args, "--help")
		}
		cmd := exec.Command(binary(t), args...)
		cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBECONFIG=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("%s: bridge-runner %q: %v\n%s", b, args, err, stderr.String())
			continue
		}
		if b == "local" && !strings.Contains(stdout.String(), `"status":"DONE"`) {
			t.Errorf("local: the job did not end DONE: %s", stdout.String())
		}
	}
}

// TestAPIServerAcceptsJobs dry-runs every Job and Secret on the real
// apiserver with strict field validation.
func TestAPIServerAcceptsJobs(t *testing.T) {
	c := testkube.Client(t)
	ns := testkube.Namespace(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
	for _, b := range backends {
		if _, err := c.BatchV1().Jobs(ns).Create(ctx, job(t, b), opts); err != nil {
			t.Errorf("%s: the apiserver refuses the Job: %v", b, err)
		}
		for _, s := range secrets(t, b) {
			if _, err := c.CoreV1().Secrets(ns).Create(ctx, &s, opts); err != nil {
				t.Errorf("%s: the apiserver refuses the Secret %s: %v", b, s.Name, err)
			}
		}
	}
}

// binary is bridge-runner built from this tree; pinnedImage is the image the
// project pins (internal/testbin).
func binary(t *testing.T) string      { return testbin.Path(t, "..") }
func pinnedImage(t *testing.T) string { return testbin.PinnedImage(t, "..") }

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

func bridgeJob(t *testing.T, b string) *operator.BridgeJob {
	t.Helper()
	docs := testutil.YAMLDocs(t, filepath.Join(b, "bridgejob.yaml"))
	if len(docs) != 1 {
		t.Fatalf("examples/%s/bridgejob.yaml: %d documents, want 1", b, len(docs))
	}
	var bj operator.BridgeJob
	if err := yaml.UnmarshalStrict(docs[0], &bj); err != nil {
		t.Fatalf("examples/%s/bridgejob.yaml: %v", b, err)
	}
	return &bj
}

// TestBridgeJobs: each backend's BridgeJob names its backend, uses the
// Secrets of its secret.yaml, and holds a job description runner accepts.
func TestBridgeJobs(t *testing.T) {
	for _, b := range backends {
		bj := bridgeJob(t, b)
		if bj.APIVersion != "bridgejob.ibm.com/v1alpha1" || bj.Kind != "BridgeJob" || bj.Spec.Backend != b {
			t.Errorf("%s: %s %s with backend %q", b, bj.APIVersion, bj.Kind, bj.Spec.Backend)
		}
		var names []string
		for _, s := range secrets(t, b) {
			names = append(names, s.Name)
		}
		want := []string{bj.Spec.ResourceSecret}
		if bj.Spec.S3Storage != nil && bj.Spec.S3Storage.S3Secret != "" {
			want = append(want, bj.Spec.S3Storage.S3Secret)
		}
		for _, w := range want {
			if !slices.Contains(names, w) {
				t.Errorf("%s: the BridgeJob uses the Secret %q; secret.yaml has %v", b, w, names)
			}
		}
		if _, err := operator.RecordSpec(bj).Parse(); err != nil {
			t.Errorf("%s: the job description is refused: %v", b, err)
		}
	}
}

// TestAPIServerAcceptsBridgeJobs: the real apiserver, with the CRD of
// deploy/operator, accepts every example (strict fields, the CRD's
// validation).
func TestAPIServerAcceptsBridgeJobs(t *testing.T) {
	cfg := testkube.Config(t)
	testkube.ApplyCRD(t, cfg, "../deploy/operator/crd.yaml")
	ns := testkube.Namespace(t, testkube.ClientFor(t, cfg))
	dc := dynamic.NewForConfigOrDie(cfg)
	res := dc.Resource(schema.GroupVersionResource{Group: "bridgejob.ibm.com", Version: "v1alpha1", Resource: "bridgejobs"}).Namespace(ns)
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
	for _, b := range backends {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(testutil.YAMLDocs(t, filepath.Join(b, "bridgejob.yaml"))[0], &obj.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := res.Create(context.Background(), obj, opts); err != nil {
			t.Errorf("%s: the apiserver refuses the BridgeJob: %v", b, err)
		}
	}
}

// placementObjects are the documents of examples/placement/bridgejob.yaml:
// the BridgeClusters and the BridgeJob, strictly decoded.
func placementObjects(t *testing.T) ([]operator.BridgeCluster, *operator.BridgeJob) {
	t.Helper()
	var clusters []operator.BridgeCluster
	var bj *operator.BridgeJob
	for i, d := range testutil.YAMLDocs(t, filepath.Join("placement", "bridgejob.yaml")) {
		var kind struct{ Kind string }
		_ = yaml.Unmarshal(d, &kind)
		var err error
		switch kind.Kind {
		case "BridgeCluster":
			var bc operator.BridgeCluster
			err = yaml.UnmarshalStrict(d, &bc)
			clusters = append(clusters, bc)
		case "BridgeJob":
			bj = &operator.BridgeJob{}
			err = yaml.UnmarshalStrict(d, bj)
		default:
			t.Fatalf("examples/placement/bridgejob.yaml#%d is a %q", i, kind.Kind)
		}
		if err != nil {
			t.Fatalf("examples/placement/bridgejob.yaml#%d: %v", i, err)
		}
	}
	if bj == nil {
		t.Fatal("examples/placement/bridgejob.yaml has no BridgeJob")
	}
	return clusters, bj
}

// TestPlacementExample: the BridgeJob lists the two BridgeClusters of its
// file, each cluster's Secret is in secret.yaml with the opt-in label, and
// the job description with the clusters as targets (as the operator makes
// them) is accepted.
func TestPlacementExample(t *testing.T) {
	clusters, bj := placementObjects(t)
	if len(clusters) != 2 || len(bj.Spec.Clusters) != 2 {
		t.Fatalf("%d BridgeClusters, the BridgeJob lists %v; want two", len(clusters), bj.Spec.Clusters)
	}
	opted := map[string]bool{}
	for _, s := range secrets(t, "placement") {
		opted[s.Name] = s.Labels[operator.SecretOptInLabel] == "true"
	}
	var targets []string
	for i, bc := range clusters {
		if bj.Spec.Clusters[i] != bc.Name {
			t.Errorf("spec.clusters[%d] = %s, want %s", i, bj.Spec.Clusters[i], bc.Name)
		}
		if !opted[bc.Spec.ResourceSecret] {
			t.Errorf("the BridgeCluster %s's Secret %s is not an opted-in Secret of secret.yaml", bc.Name, bc.Spec.ResourceSecret)
		}
		targets = append(targets, fmt.Sprintf(`{"name":%q,"backend":%q,"resourceURL":%q,"credentials":"/targets/%s","jobproperties":%s}`,
			bc.Name, bc.Spec.Backend, bc.Spec.ResourceURL, bc.Name, bc.Spec.JobProperties))
	}
	spec := operator.RecordSpec(bj)
	spec.Targets = "[" + strings.Join(targets, ",") + "]"
	d, err := spec.Parse()
	if err != nil {
		t.Fatalf("the job description with the clusters as targets is refused: %v", err)
	}
	if len(d.Targets) != 2 || !strings.Contains(string(d.Targets[1].JobProperties), `"partition":"debug"`) ||
		!strings.Contains(string(d.Targets[1].JobProperties), `"nodes":1`) {
		t.Errorf("targets %+v: the cluster's partition is not laid over the job's properties", d.Targets)
	}
}

// TestAPIServerAcceptsEveryBridgeExample: the real apiserver, with both
// CRDs of deploy/operator, accepts every document of every
// examples/*/bridgejob.yaml (BridgeClusters and BridgeJobs), so that an
// example asking for what the CRD lacks (placement: spread did) fails here.
func TestAPIServerAcceptsEveryBridgeExample(t *testing.T) {
	cfg := testkube.Config(t)
	testkube.ApplyCRD(t, cfg, "../deploy/operator/crd.yaml")
	testkube.ApplyCRD(t, cfg, "../deploy/operator/crd-bridgecluster.yaml")
	ns := testkube.Namespace(t, testkube.ClientFor(t, cfg))
	dc := dynamic.NewForConfigOrDie(cfg)
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
	files, _ := filepath.Glob("*/bridgejob.yaml")
	if len(files) <= len(backends) {
		t.Fatalf("examples/*/bridgejob.yaml: %v, want more than the backends' (placement's, spread's)", files)
	}
	for _, f := range files {
		for i, d := range testutil.YAMLDocs(t, f) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(d, &obj.Object); err != nil {
				t.Fatal(err)
			}
			plural := strings.ToLower(obj.GetKind()) + "s"
			res := dc.Resource(schema.GroupVersionResource{Group: "bridgejob.ibm.com", Version: "v1alpha1", Resource: plural}).Namespace(ns)
			if _, err := res.Create(context.Background(), obj, opts); err != nil {
				t.Errorf("examples/%s#%d: the apiserver refuses the %s: %v", f, i, obj.GetKind(), err)
			}
		}
	}
	// The proof can fail: a BridgeCluster without its Secret is refused.
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "bridgejob.ibm.com/v1alpha1", "kind": "BridgeCluster",
		"metadata": map[string]any{"name": "bad"}, "spec": map[string]any{"resourceURL": "https://x.example.org"}}}
	res := dc.Resource(schema.GroupVersionResource{Group: "bridgejob.ibm.com", Version: "v1alpha1", Resource: "bridgeclusters"}).Namespace(ns)
	if _, err := res.Create(context.Background(), bad, opts); err == nil {
		t.Error("the apiserver accepts a BridgeCluster without spec.resourceSecret: the CRD has no schema")
	}
}
