package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestLSFArrayTaskLogsInS3: an LSF array whose outputFile names each
// element's file (%I) gets every task's output to tasks/<index>.log under
// the step's prefix, downloaded through Application Center by invoke
// itself (the fake writes each element's file as bsub -o names it: task i
// is LSF's element i+1), its standard error after it where errorFile
// names each element's file too, and job.log lists each task with its
// object.
func TestLSFArrayTaskLogsInS3(t *testing.T) {
	clearEnv(t)
	endpoint, _, _, s3Creds := tests3.Env(t)
	bucket := tests3.Bucket(t, "logs")
	f, err := fakelsf.Listen("127.0.0.1:0", time.Second)
	require.NoError(t, err)
	defer f.Close()
	creds := t.TempDir()
	for k, v := range map[string]string{"username": f.User, "password": f.Pass} {
		require.NoError(t, os.WriteFile(filepath.Join(creds, k), []byte(v), 0o600))
	}
	state, name := t.TempDir(), "lsf-task-logs"
	code, out := runBinary(t, "invoke", "--state-dir", state, "--job-name", name, "--backend", "lsf",
		"--resource-url", f.URL, "--credentials-dir", creds, "--script", "#!/bin/sh\necho hi\n", "--array", "0-2",
		"--job-properties", `{"outputFile":"out.%J.%I","errorFile":"err.%J.%I"}`, "--s3-endpoint", endpoint, "--s3-secure", "false",
		"--s3-credentials-dir", s3Creds, "--s3-upload-bucket", bucket, "--update-interval", "1")
	require.Equal(t, 0, code, out)
	rec, err := record.NewFileStore(state, name).Get(context.Background())
	require.NoError(t, err)
	id := rec.Data[record.KeyID]
	tasks := runner.RunPrefix(name, rec.Data[record.KeyKey], "") + "tasks/"
	for i := 0; i <= 2; i++ {
		got := readObject(t, bucket, fmt.Sprintf("%s%d.log", tasks, i))
		assert.Equal(t, fmt.Sprintf("fake LSF: job %s[%d] is DONE (the fake runs no command)\n--- standard error ---\nfake LSF: job %s[%d] wrote no error (the fake runs no command)\n", id, i+1, id, i+1),
			got, "task %d is LSF's element %d: its output, then its standard error (errorFile)", i, i+1)
	}
	outputs := strings.Split(rec.Data[record.KeyOutputs], "\n")
	require.Len(t, outputs, 1, "job.log is the array's output")
	jobLog := readObject(t, bucket, strings.TrimPrefix(outputs[0], "s3://"+bucket+"/"))
	for i := 0; i <= 2; i++ {
		assert.Contains(t, jobLog, fmt.Sprintf("\ts3://%s/%s%d.log\n", bucket, tasks, i), "job.log lists task %d's object:\n%s", i, jobLog)
	}
}
