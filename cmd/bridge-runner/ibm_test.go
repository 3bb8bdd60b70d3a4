package main

// IBM's Bridge Operator users switch their pod image to bridge-runner and
// keep their records: ConfigMaps with the keys of IBM's Slurm and Ray
// samples (our own values), applied to the real kube-apiserver, invoke run
// with IBM's pod contract (no arguments; JOBNAME, NAMESPACE; the Secret with
// IBM's key names; /s3credentials) against the real Slurm and Ray, and the
// record left as IBM's operator reads it. The LSF and Quantum halves are in
// backends/lsf and backends/quantum, beside their fakes.

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testibm"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
)

// ibmSlurmCredentials is IBM's Slurm Secret: username, and the JWT as password.
func ibmSlurmCredentials(t *testing.T) string {
	_, dir := slurmEnv(t)
	user, err := os.ReadFile(dir + "/username")
	require.NoError(t, err)
	token, err := os.ReadFile(dir + "/token")
	require.NoError(t, err)
	return testibm.CredentialsDir(t, map[string]string{"username": string(user), "password": string(token)})
}

// TestIBMSlurmSampleInline: IBM's inline Slurm sample, its jobProperties
// spelling and IBM's property names, no backend key (inferred from the
// slurmrestd path), created by IBM's operator (IBM status keys).
func TestIBMSlurmSampleInline(t *testing.T) {
	url, _ := slurmEnv(t)
	creds := ibmSlurmCredentials(t)
	out := "ibm-inline-" + time.Now().Format("150405.000000") + ".out"
	t.Cleanup(func() { os.Remove("/tmp/" + out) })
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hpcjob-bridge-cm", OwnerReferences: []metav1.OwnerReference{testibm.OperatorOwner("hpcjob")}},
		Data: map[string]string{
			"updateInterval":         "2",
			"resourceURL":            url + "/slurm/v0.0.38",
			"resourcesecret":         "slurm-credentials",
			"jobdata.jobScript":      "#!/bin/bash\n#SBATCH --job-name=test\necho \"path=$PATH\"\necho \"lib=$LD_LIBRARY_PATH\"\n",
			"jobdata.scriptLocation": "inline",
			"jobProperties": `{"NodesNumber": "1", "Queue": "debug", "Tasks": "1", "slurmJobName": "ibm-inline",
  "currentWorkingDir": "/tmp", "envPath": "/usr/local/bin:/usr/bin:/bin:/opt/ibm-marker/bin",
  "envLibPath": "/opt/ibm-marker/lib", "ErrorFileName": "` + out + `.err", "OutputFileName": "` + out + `"}`,
		},
	}
	pod := testibm.Start(t, binary, cm, "hpcjob", "BRIDGE_CREDENTIALS_DIR="+creds)
	code, log := pod.Wait(t, 2*time.Minute)
	require.Equal(t, 0, code, log)
	d := pod.Data(t)
	testibm.AssertOperatorReads(t, d, "DONE")
	assert.Equal(t, "DONE", d["jobStatus"], "the Slurm pod's unprefixed key, too")
	assert.Equal(t, "slurm", d["backend"], "inferred from /slurm/v0.0.38 and recorded")
	assert.Contains(t, log, "jobProperties=jobproperties", "the IBM spelling is named in the log")
	text, err := os.ReadFile("/tmp/" + out)
	require.NoError(t, err, "OutputFileName in currentWorkingDir")
	assert.Contains(t, string(text), "path=/usr/local/bin:/usr/bin:/bin:/opt/ibm-marker/bin", "envPath reached the job")
	assert.Contains(t, string(text), "lib=/opt/ibm-marker/lib")
}

// TestIBMSlurmSampleS3: IBM's second Slurm sample: the script in S3, the
// record named <name>-slurm-cm (BRIDGE_CONFIGMAP), S3 keys as IBM wrote
// them, /s3credentials with IBM's key names, IBM status keys asked for.
func TestIBMSlurmSampleS3(t *testing.T) {
	url, _ := slurmEnv(t)
	creds := ibmSlurmCredentials(t)
	endpoint, _, _, s3Creds := tests3.Env(t)
	bucket := tests3.Bucket(t, "ibm")
	script := "#!/bin/bash\necho \"parameters: $BRIDGE_JOB_PARAMETERS\"\n"
	_, err := tests3.Client(t).PutObject(context.Background(), bucket, "slurm/job.sh", strings.NewReader(script), int64(len(script)), minio.PutObjectOptions{})
	require.NoError(t, err)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "slurmjob-slurm-cm"},
		Data: map[string]string{
			"updateInterval":         "2",
			"resourceURL":            url + "/slurm/v0.0.38",
			"resourcesecret":         "slurm-credentials",
			"jobdata.jobScript":      bucket + ":slurm/job.sh",
			"jobdata.scriptLocation": "s3",
			"jobdata.jobParameters":  `{"NodesNumber": "1", "Queue": "debug", "Tasks": "1"}`,
			"s3.endpoint":            endpoint,
			"s3.secure":              "false",
			"s3.secret":              "s3-credentials",
		},
	}
	pod := testibm.Start(t, binary, cm, "slurmjob", "BRIDGE_CONFIGMAP=slurmjob-slurm-cm", "BRIDGE_STATUS_KEYS=ibm",
		"BRIDGE_CREDENTIALS_DIR="+creds, "BRIDGE_S3_CREDENTIALS_DIR="+s3Creds)
	code, log := pod.Wait(t, 2*time.Minute)
	require.Equal(t, 0, code, log)
	d := pod.Data(t)
	testibm.AssertOperatorReads(t, d, "DONE")
	assert.Equal(t, "DONE", d["jobStatus"], "--status-keys ibm")
	assert.Equal(t, d["status.endTime"], d["endTime"])
	_, err = pod.Client.CoreV1().ConfigMaps(pod.Namespace).Get(context.Background(), "slurmjob-bridge-cm", metav1.GetOptions{})
	assert.Error(t, err, "no second record was made under the default name")
}

// TestIBMRaySample: IBM's inline Ray sample: no backend key (a Ray dashboard
// answers /api/version), IBM's fake Ray Secret, parameters and metadata
// inline, the log uploaded to the bucket.
func TestIBMRaySample(t *testing.T) {
	url, _ := rayURL(t)
	endpoint, _, _, s3Creds := tests3.Env(t)
	bucket := tests3.Bucket(t, "ibmray")
	creds := testibm.CredentialsDir(t, map[string]string{"username": "ray", "password": "unused"}) // samples/core/secrets/raysecret.yaml's kind
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "rayjob-bridge-cm", OwnerReferences: []metav1.OwnerReference{testibm.OperatorOwner("rayjob")}},
		Data: map[string]string{
			"updateInterval": "2",
			"resourceURL":    url,
			"jobdata.jobScript": "import json, os\n" +
				"params = json.loads(os.environ['BRIDGE_JOB_PARAMETERS'])\n" +
				"for i in range(int(params['iterations'])):\n    print('iteration', i + 1, flush=True)\n",
			"jobdata.scriptLocation":      "inline",
			"jobdata.scriptMetadata":      `{"env": {"MY_VARIABLE1": "foo"}}`,
			"jobdata.jobParameters":       `{"iterations": "3"}`,
			"jobdata.scriptExtraLocation": "inline",
			"s3.endpoint":                 endpoint,
			"s3.secure":                   "false",
			"s3.secret":                   "s3-credentials",
			"s3upload.bucket":             bucket,
		},
	}
	pod := testibm.Start(t, binary, cm, "rayjob", "BRIDGE_CREDENTIALS_DIR="+creds, "BRIDGE_S3_CREDENTIALS_DIR="+s3Creds)
	code, log := pod.Wait(t, 3*time.Minute)
	require.Equal(t, 0, code, log)
	d := pod.Data(t)
	testibm.AssertOperatorReads(t, d, "DONE")
	assert.Equal(t, "ray", d["backend"], "inferred from the dashboard's /api/version")
	assert.Contains(t, log, "iteration 3")
	assert.Contains(t, d["status.outputs"], "s3://"+bucket+"/", "the job's log went to the bucket")
}

// TestBackendFromFlags: a description given by flags with a resource URL
// and no --backend gets the backend the URL names, never local.
func TestBackendFromFlags(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	r := run(t, "create-configmap", "--state-dir", state, "--job-name", "inferred", "--resource-url", "https://hpc.example.org:6820/slurm/v0.0.40/",
		"--script", "#!/bin/bash\ntrue\n")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "backend chosen")
	rec, err := os.ReadFile(state + "/inferred-bridge-cm.json")
	require.NoError(t, err)
	assert.Contains(t, string(rec), `"backend": "slurm"`)

	// KFP and Argo pass every input: an empty backend is no backend.
	r = run(t, "create-configmap", "--state-dir", state, "--job-name", "kfp", "--backend", "", "--resource-url", "https://pac.example.org:8443/platform/",
		"--script", "#!/bin/sh\ntrue\n")
	require.Equal(t, 0, r.code, r.stderr)
	rec, err = os.ReadFile(state + "/kfp-bridge-cm.json")
	require.NoError(t, err)
	assert.Contains(t, string(rec), `"backend": "lsf"`)

	r = run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "nowhere", "--resource-url", "http://"+closedPort(t), "--script", "touch never")
	assert.Equal(t, ExitInvalid, r.code, r.stderr)
	assert.Contains(t, r.stderr, "does not say which system")

	r = run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "here", "--backend", "local", "--resource-url", "https://hpc.example.org/slurm/v0.0.40", "--script", "touch never")
	assert.Equal(t, ExitInvalid, r.code, r.stderr)
	assert.Contains(t, r.stderr, "would run the job on this machine")
}

// TestUnknownRecordKey: a misspelt key in a record is exit 2 naming it and
// the key meant; nothing runs.
func TestUnknownRecordKey(t *testing.T) {
	clearEnv(t)
	state := t.TempDir()
	writeRecord(t, state, "typo", map[string]string{"backend": "local", "jobdata.jobScript": "touch " + state + "/ran", "updateIntervall": "1"})
	r := run(t, "invoke", "--state-dir", state, "--job-name", "typo")
	assert.Equal(t, ExitInvalid, r.code, r.stderr)
	assert.Contains(t, r.stderr, "updateIntervall")
	assert.Contains(t, r.stderr, "did you mean updateInterval?")
	assert.NoFileExists(t, state+"/ran")
}
