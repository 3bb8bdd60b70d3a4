package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// slurmEnv is the real Slurm 22.05 started by hack/slurm-up.sh.
func slurmEnv(t *testing.T) (url, credsDir string) {
	url, credsDir = os.Getenv("BRIDGE_TEST_SLURM_URL"), os.Getenv("BRIDGE_TEST_SLURM_CREDS")
	if url == "" || credsDir == "" {
		msg := "this test needs a real Slurm: bash hack/slurm-up.sh && source /tmp/bridge-runner-slurm/env"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return url, credsDir
}

// slurmCluster is one real Slurm the tests run invoke against.
type slurmCluster struct {
	release, url, creds string
	api                 string // the newest API it serves, for the tests' own requests
	root                string // the root its jobs run in ("" for this machine's /)
}

// slurmClusters are the real Slurm 22.05 (hack/slurm-up.sh), 24.11
// (hack/slurm2411-up.sh) and 26.05 (hack/slurm2605-up.sh). A missing one is
// skipped, except under CI, where its absence fails the test.
func slurmClusters(t *testing.T) []slurmCluster {
	t.Helper()
	var all []slurmCluster
	for _, c := range []struct{ release, env, api, up string }{
		{"22.05", "BRIDGE_TEST_SLURM", "v0.0.38", "hack/slurm-up.sh && source /tmp/bridge-runner-slurm/env"},
		{"24.11", "BRIDGE_TEST_SLURM2411", "v0.0.42", "hack/slurm2411-up.sh && source /tmp/bridge-runner-slurm2411/env"},
		{"26.05", "BRIDGE_TEST_SLURM2605", "v0.0.45", "hack/slurm2605-up.sh && source /tmp/bridge-runner-slurm2605/env"},
	} {
		url, creds := os.Getenv(c.env+"_URL"), os.Getenv(c.env+"_CREDS")
		if url == "" || creds == "" {
			msg := "this test needs a real Slurm " + c.release + ": bash " + c.up
			if os.Getenv("CI") != "" {
				t.Error(msg)
			} else {
				t.Log(msg)
			}
			continue
		}
		all = append(all, slurmCluster{c.release, url, creds, c.api, os.Getenv(c.env + "_ROOT")})
	}
	if len(all) == 0 {
		t.Skip("no real Slurm")
	}
	return all
}

// TestSlurmWithS3EndToEnd: the script and its parameters come from S3, the
// job runs on the real Slurm, and its output file and log land in the
// bucket under the run's own prefix (through a stage-out job, since
// slurmrestd has no file API).
func TestSlurmWithS3EndToEnd(t *testing.T) {
	clearEnv(t)
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) { testSlurmWithS3(t, c.url, c.creds) })
	}
}

func testSlurmWithS3(t *testing.T, url, slurmCreds string) {
	endpoint, _, _, s3Creds := tests3.Env(t)
	c := tests3.Client(t)
	in, out := tests3.Bucket(t, "in"), tests3.Bucket(t, "out")
	dir := "/tmp/bridge-e2e-" + strings.ToLower(t.Name()[4:12]) + time.Now().Format("150405")
	t.Cleanup(func() { os.RemoveAll(dir); os.Remove(dir + ".out") })
	script := "#!/bin/bash\nmkdir -p " + dir + " && cd " + dir + "\necho \"params: $BRIDGE_JOB_PARAMETERS\"\necho \"result of $BRIDGE_JOB_NAME\" > result.txt\n"
	for key, body := range map[string]string{"job.sh": script, "params.json": `{"steps":2}`} {
		_, err := c.PutObject(context.Background(), in, key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
		require.NoError(t, err)
	}
	state := t.TempDir()
	start := time.Now()
	code, outText := runBinary(t, "invoke", "--state-dir", state, "--job-name", "slurm-s3", "--backend", "slurm",
		"--resource-url", url, "--credentials-dir", slurmCreds, "--s3-credentials-dir", s3Creds,
		"--script-location", "s3", "--script", in+":job.sh", "--script-extra-location", "s3", "--job-parameters", in+":params.json",
		"--s3-endpoint", endpoint, "--s3-secure", "false", "--s3-upload-bucket", out,
		"--s3-upload-files", dir+"/result.txt,"+dir+"/absent.txt",
		"--job-properties", `{"standard_output":"`+dir+`.out"}`, "--update-interval", "2")
	t.Logf("invoke with S3 staging on Slurm took %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 0, code, outText)
	var sum map[string]any
	lines := strings.Split(strings.TrimSpace(outText), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "{") {
			_ = json.Unmarshal([]byte(l), &sum)
		}
	}
	require.Equal(t, "DONE", sum["status"], outText)
	rec, err := record.NewFileStore(state, "slurm-s3").Get(context.Background())
	require.NoError(t, err)
	prefix := runner.RunPrefix("slurm-s3", rec.Data[record.KeyKey], rec.Data[record.KeyID])
	read := func(key string) string {
		o, err := c.GetObject(context.Background(), out, key, minio.GetObjectOptions{})
		require.NoError(t, err)
		b, err := io.ReadAll(o)
		require.NoError(t, err, key)
		return string(b)
	}
	assert.Equal(t, "result of slurm-s3\n", read(prefix+outputNameForTest(dir+"/result.txt")))
	assert.Equal(t, "params: {\"steps\":2}\n", read(prefix+"job.log"), "the job's standard output is its log")
	assert.Contains(t, rec.Data[record.KeyMessage], "absent.txt was not found")
	assert.Len(t, strings.Split(rec.Data[record.KeyOutputs], "\n"), 2)
	assert.NotContains(t, outText+rec.Data[record.KeyMessage], "X-Amz-Signature", "presigned URLs are secrets too")
}

func outputNameForTest(p string) string { return strings.TrimPrefix(p, "/") }
