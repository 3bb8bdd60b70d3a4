package runner_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/local"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// stagingInvoker runs the local backend against the real S3 server.
func stagingInvoker(t *testing.T, spec record.Spec, credsDir string) (*runner.Invoker, record.Store) {
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register(local.Name, local.New))
	store := record.NewFileStore(t.TempDir(), "stage")
	var logs bytes.Buffer
	return &runner.Invoker{
		JobName: "stage", Store: store, Registry: reg, Spec: &spec,
		Backend:     backends.Config{DataDir: t.TempDir()},
		Log:         slog.New(slog.NewTextHandler(&logs, nil)),
		MinPoll:     20 * time.Millisecond,
		RetryBudget: 3 * time.Second,
		S3:          runner.S3Access{CredentialsDir: credsDir},
	}, store
}

func put(t *testing.T, c *minio.Client, bucket, key, body string) {
	_, err := c.PutObject(context.Background(), bucket, key, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
	require.NoError(t, err)
}

func get(t *testing.T, c *minio.Client, bucket, key string) string {
	o, err := c.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	require.NoError(t, err)
	defer o.Close()
	b, err := io.ReadAll(o)
	require.NoError(t, err, "s3://%s/%s", bucket, key)
	return string(b)
}

// TestStagingEndToEnd: script and parameters from S3, an input file from S3,
// outputs and the log uploaded under the run's own prefix.
func TestStagingEndToEnd(t *testing.T) {
	endpoint, _, _, creds := tests3.Env(t)
	c := tests3.Client(t)
	in, out := tests3.Bucket(t, "in"), tests3.Bucket(t, "out")
	put(t, c, in, "jobs/run.sh", "#!/bin/sh\necho \"params=$BRIDGE_JOB_PARAMETERS\"\ntr a-z A-Z < \"$BRIDGE_INPUT_DIR/data.txt\" > result.txt\nmkdir -p sub && echo nested > sub/r.txt\n")
	put(t, c, in, "jobs/params.json", `{"n":3}`)
	put(t, c, in, "data/data.txt", "hello s3")

	spec := record.Spec{Backend: "local", ScriptLocation: "s3", JobScript: in + ":jobs/run.sh",
		ScriptExtraLocation: "s3", JobParameters: in + ":jobs/params.json", AdditionalData: in + ":data/data.txt",
		S3Endpoint: endpoint, S3Secure: "false", S3UploadBucket: out, S3UploadFiles: "result.txt, sub/r.txt, missing.txt"}
	iv, store := stagingInvoker(t, spec, creds)
	require.NoError(t, iv.Run(context.Background()))
	res := iv.Result()
	require.Equal(t, "DONE", res.Status, res.Message)
	require.Len(t, res.Outputs, 3, "two files and the log: %v", res.Outputs)
	prefix := runner.RunPrefix("stage", runner.IdempotencyKey(mustGet(t, store).UID), res.ID)
	assert.Equal(t, "HELLO S3", get(t, c, out, prefix+"result.txt"))
	assert.Equal(t, "nested\n", get(t, c, out, prefix+"sub/r.txt"))
	assert.Equal(t, "params={\"n\":3}\n", get(t, c, out, prefix+"job.log"))
	assert.Contains(t, res.Message, "missing.txt was not found", "a missing output is reported, not fatal")
	assert.Equal(t, strings.Join(res.Outputs, "\n"), mustGet(t, store).Data[record.KeyOutputs])
	for _, loc := range res.Outputs {
		assert.True(t, strings.HasPrefix(loc, "s3://"+out+"/"+prefix), loc)
	}
}

// TestStagingIBMLayout: s3upload.layout ibm puts the outputs where IBM's
// Bridge Operator put them, <job>/<file>, for readers that expect that.
func TestStagingIBMLayout(t *testing.T) {
	endpoint, _, _, creds := tests3.Env(t)
	c := tests3.Client(t)
	out := tests3.Bucket(t, "out")
	spec := record.Spec{Backend: "local", JobScript: "echo ibm > result.txt; echo logged",
		S3Endpoint: endpoint, S3Secure: "false", S3UploadBucket: out, S3UploadFiles: "result.txt", S3UploadLayout: "ibm"}
	iv, _ := stagingInvoker(t, spec, creds)
	require.NoError(t, iv.Run(context.Background()))
	res := iv.Result()
	require.Equal(t, "DONE", res.Status, res.Message)
	assert.Equal(t, "ibm\n", get(t, c, out, "stage/result.txt"))
	assert.Equal(t, "logged\n", get(t, c, out, "stage/job.log"))
	assert.ElementsMatch(t, []string{"s3://" + out + "/stage/result.txt", "s3://" + out + "/stage/job.log"}, res.Outputs)
	assert.Equal(t, "stage/", runner.OutputPrefix(record.LayoutIBM, "stage", "br-0123", "42"))
	assert.Equal(t, runner.RunPrefix("stage", "br-0123", "42"), runner.OutputPrefix(record.LayoutRun, "stage", "br-0123", "42"))
}

func mustGet(t *testing.T, s record.Store) *record.Record {
	rec, err := s.Get(context.Background())
	require.NoError(t, err)
	return rec
}

// TestStagingFailsBeforeSubmit: each S3 problem is exit 2 naming the key,
// with nothing submitted.
func TestStagingFailsBeforeSubmit(t *testing.T) {
	endpoint, _, _, creds := tests3.Env(t)
	c := tests3.Client(t)
	in := tests3.Bucket(t, "in")
	put(t, c, in, "run.sh", "#!/bin/sh\necho hi\n")
	badCreds := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(badCreds, "accesskey"), []byte("nobody\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(badCreds, "secretkey"), []byte("wrong-secret-value\n"), 0o600))
	base := record.Spec{Backend: "local", ScriptLocation: "s3", JobScript: in + ":run.sh", S3Endpoint: endpoint, S3Secure: "false"}
	cases := []struct {
		name  string
		edit  func(*record.Spec)
		creds string
		field string
	}{
		{"missing script object", func(s *record.Spec) { s.JobScript = in + ":nope.sh" }, creds, "jobdata.jobScript"},
		{"missing parameters object", func(s *record.Spec) { s.ScriptExtraLocation, s.JobParameters = "s3", in+":nope.json" }, creds, "jobdata.jobParameters"},
		{"missing input file", func(s *record.Spec) { s.AdditionalData = in + ":nope.dat" }, creds, "jobdata.additionalData"},
		{"missing upload bucket", func(s *record.Spec) { s.S3UploadBucket = "no-such-bucket-bridge" }, creds, "s3upload.bucket"},
		{"bad credentials", func(*record.Spec) {}, badCreds, "s3.secret"},
		{"no credentials mounted", func(*record.Spec) {}, filepath.Join(t.TempDir(), "none"), "s3.secret"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := base
			tc.edit(&spec)
			iv, store := stagingInvoker(t, spec, tc.creds)
			err := iv.Run(context.Background())
			require.ErrorIs(t, err, backends.ErrInvalid)
			var fe *backends.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field, err.Error())
			assert.NotContains(t, err.Error(), "wrong-secret-value")
			rec := mustGet(t, store)
			assert.Empty(t, rec.Data[record.KeyID], "nothing was submitted")
			assert.Empty(t, rec.Data[record.KeyIntent], "nothing was even attempted")
		})
	}
	t.Run("unreachable endpoint is transient", func(t *testing.T) {
		spec := base
		spec.S3Endpoint = "127.0.0.1:1"
		iv, store := stagingInvoker(t, spec, creds)
		err := iv.Run(context.Background())
		require.ErrorIs(t, err, backends.ErrTransient)
		require.NotErrorIs(t, err, backends.ErrInvalid)
		assert.Contains(t, err.Error(), "s3.endpoint")
		assert.Empty(t, mustGet(t, store).Data[record.KeyID], "nothing was submitted")
	})
	t.Run("bucket created on request", func(t *testing.T) {
		spec := base
		spec.S3UploadBucket, spec.S3CreateBucket = "bridge-made-"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:10]+time.Now().Format("150405"), "true"
		iv, _ := stagingInvoker(t, spec, creds)
		require.NoError(t, iv.Run(context.Background()))
		defer func() { _ = tests3.RemoveBucket(context.Background(), c, spec.S3UploadBucket) }()
		ok, err := c.BucketExists(context.Background(), spec.S3UploadBucket)
		require.NoError(t, err)
		assert.True(t, ok)
	})
}

// TestUploadOutageKeepsStateAndRetryFinishes: S3 goes down while the job
// runs; invoke records the job's real end, reports the failed upload, and
// exits 75; the retry re-attaches (no second job) and finishes the upload.
func TestUploadOutageKeepsStateAndRetryFinishes(t *testing.T) {
	endpoint, _, _, creds := tests3.Env(t)
	c := tests3.Client(t)
	out := tests3.Bucket(t, "out")
	px := testutil.NewProxy(t, endpoint)
	counter := filepath.Join(t.TempDir(), "runs")
	spec := record.Spec{Backend: "local", JobScript: "echo run >> " + counter + "; echo result > r.txt; sleep 1",
		S3Endpoint: px.Addr, S3Secure: "false", S3UploadBucket: out, S3UploadFiles: "r.txt"}
	iv, store := stagingInvoker(t, spec, creds)
	go func() {
		for {
			if rec, err := store.Get(context.Background()); err == nil && rec.Data[record.KeyJobStatus] == "RUNNING" {
				px.Cut()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	err := iv.Run(context.Background())
	require.ErrorIs(t, err, backends.ErrTransient, "exit 75")
	assert.Equal(t, "DONE", iv.Result().Status, "the job's real end is reported")
	rec := mustGet(t, store)
	assert.Equal(t, "DONE", rec.Data[record.KeyJobStatus], "and recorded")
	assert.Contains(t, rec.Data[record.KeyMessage], "uploading outputs")

	px.Restore(t)
	// A new invoke on the same record and machine, as Argo's retry would be.
	again := &runner.Invoker{JobName: iv.JobName, Store: iv.Store, Registry: iv.Registry, Backend: iv.Backend,
		Log: iv.Log, MinPoll: iv.MinPoll, RetryBudget: iv.RetryBudget, S3: iv.S3}
	require.NoError(t, again.Run(context.Background()))
	assert.Equal(t, "DONE", again.Result().Status)
	b, _ := os.ReadFile(counter)
	assert.Equal(t, "run\n", string(b), "the retry re-attached; the job ran once")
	prefix := runner.RunPrefix("stage", runner.IdempotencyKey(rec.UID), again.Result().ID)
	assert.Equal(t, "result\n", get(t, c, out, prefix+"r.txt"))
}

// TestUploadToVanishedBucketIsNotExit2: the bucket is deleted while the job
// runs; the upload error must not read as "invalid input, nothing submitted".
func TestUploadToVanishedBucketIsNotExit2(t *testing.T) {
	endpoint, _, _, creds := tests3.Env(t)
	c := tests3.Client(t)
	out := tests3.Bucket(t, "gone")
	spec := record.Spec{Backend: "local", JobScript: "echo x > r.txt; sleep 1", S3Endpoint: endpoint, S3Secure: "false",
		S3UploadBucket: out, S3UploadFiles: "r.txt"}
	iv, store := stagingInvoker(t, spec, creds)
	go func() {
		for {
			if rec, err := store.Get(context.Background()); err == nil && rec.Data[record.KeyJobStatus] == "RUNNING" {
				_ = tests3.RemoveBucket(context.Background(), c, out)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	err := iv.Run(context.Background())
	require.Error(t, err)
	assert.ErrorIs(t, err, backends.ErrTransient)
	assert.NotErrorIs(t, err, backends.ErrInvalid, "the job was submitted: this is exit 75, not 2")
	assert.Equal(t, "DONE", iv.Result().Status)
}
