package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
	"github.com/bridge-runner/bridge-runner/internal/testbin"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/record"
)

// runJobAgainstFake runs the container command line of examples/<b>/job.yaml
// as shipped with the built binary, outside Kubernetes, pointed at a fake
// started as hack/fakes starts it: only --resource-url is replaced, and
// where the Job mounts credentials (and gets its record from the cluster),
// the test gives the directories. The job must end DONE, exit 0.
func runJobAgainstFake(t *testing.T, b, url string, creds map[string]string, extra ...string) map[string]string {
	args := slices.Clone(job(t, b).Spec.Template.Spec.Containers[0].Args)
	i := slices.Index(args, "--resource-url")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("examples/%s/job.yaml gives no --resource-url", b)
	}
	args[i+1] = url
	name := args[slices.Index(args, "--job-name")+1]
	state := t.TempDir()
	args = append(args, "--credentials-dir", credsDir(t, creds), "--state-dir", state)
	args = append(args, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, testbin.Path(t, ".."), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("examples/%s/job.yaml's command line against the fake: %v\n%s", b, err, out)
	}
	rec, err := record.NewFileStore(state, name).Get(context.Background())
	if err != nil {
		t.Fatalf("the record: %v\n%s", err, out)
	}
	if st := rec.Data[record.KeyJobStatus]; st != "DONE" {
		t.Fatalf("examples/%s/job.yaml ended %q, want DONE\n%s", b, st, out)
	}
	return rec.Data
}

// TestExampleLSFJobAgainstFake: examples/lsf/job.yaml's command line as
// shipped reaches DONE on the LSF fake that hack/fakes starts.
func TestExampleLSFJobAgainstFake(t *testing.T) {
	f, err := fakelsf.Listen("127.0.0.1:0", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runJobAgainstFake(t, "lsf", f.URL, map[string]string{"username": f.User, "password": f.Pass})
}

// TestExampleQuantumJobAgainstFake: examples/quantum/job.yaml's command line
// as shipped reaches DONE on the Quantum fake that hack/fakes starts, its
// results and metrics uploaded to the suite's S3 (which stands in for the
// Job's s3.example.org).
func TestExampleQuantumJobAgainstFake(t *testing.T) {
	endpoint, _, _, s3Creds := tests3.Env(t)
	bucket := tests3.Bucket(t)
	f, err := fakequantum.Listen("127.0.0.1:0", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := runJobAgainstFake(t, "quantum", f.URL+"/api/v1",
		map[string]string{"username": f.CRN, "password": f.APIKey, "iam_url": f.URL + "/identity/token"},
		"--s3-endpoint", endpoint, "--s3-secure", "false", "--s3-credentials-dir", s3Creds, "--s3-upload-bucket", bucket)
	if data[record.KeyOutputs] == "" {
		t.Errorf("no outputs recorded; want results and metrics in %s", bucket)
	}
}

// credsDir writes creds as a mounted Secret: one file per key.
func credsDir(t *testing.T, creds map[string]string) string {
	dir := t.TempDir()
	for k, v := range creds {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
