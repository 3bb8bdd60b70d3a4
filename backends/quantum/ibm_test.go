package quantum

// IBM's Bridge Operator drives bridge-runner as its Quantum pod image: an
// IBM-shaped record on the real kube-apiserver, invoke run with IBM's pod
// contract (JOBNAME, NAMESPACE, the Secret's username = service CRN and
// password = API key, /s3credentials) against the IBM Quantum fake, results
// uploaded to the real S3, and the record left as IBM's operator reads it.

import (
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/fakequantum"
	"github.com/bridge-runner/bridge-runner/internal/testbin"
	"github.com/bridge-runner/bridge-runner/internal/testibm"
	"github.com/bridge-runner/bridge-runner/internal/tests3"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

func TestIBMOperatorDrivesQuantum(t *testing.T) {
	f := fakequantum.New(t)
	endpoint, _, _, s3Creds := tests3.Env(t)
	bucket := tests3.Bucket(t, "quantum")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw}), 0o600))
	creds := testibm.CredentialsDir(t, map[string]string{"username": f.CRN + "\n", "password": f.APIKey + "\n"})

	// The keys of IBM's Quantum sample with a remote program (samples/test/
	// quantum): the program is a primitive today, its parameters keep IBM's
	// {"params": ...} wrapper, and jobproperties (a key IBM's operator
	// always writes) names the device.
	params := `{"params": {"pubs": [["` + strings.ReplaceAll(bell, `"`, `\"`) + `", [], 64]], "version": 2}}`
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "quantumjob-bridge-cm", OwnerReferences: []metav1.OwnerReference{testibm.OperatorOwner("quantumjob")}},
		Data: map[string]string{
			"updateInterval":              "1",
			"resourceURL":                 f.URL + "/api/v1",
			"jobproperties":               `{"backend": "ibm_torino", "iam_url": "` + f.URL + `/identity/token"}`,
			"jobdata.jobScript":           "sampler",
			"jobdata.scriptLocation":      "remote",
			"jobdata.scriptMetadata":      "",
			"jobdata.jobParameters":       params,
			"jobdata.scriptExtraLocation": "inline",
			"jobdata.additionalData":      "",
			"s3.endpoint":                 endpoint,
			"s3.secure":                   "false",
			"s3.secret":                   "s3-credentials",
			"s3upload.bucket":             bucket,
			"s3upload.files":              "results,logs", // IBM's pod uploaded these unasked
		},
	}
	// The fake is not on IBM's host, so the pod names its system, as one of
	// IBM's per-system pod images would.
	pod := testibm.Start(t, testbin.Path(t, "../.."), cm, "quantumjob", "BRIDGE_BACKEND=quantum",
		"BRIDGE_CREDENTIALS_DIR="+creds, "BRIDGE_S3_CREDENTIALS_DIR="+s3Creds, "BRIDGE_CA_FILE="+ca)
	var id string
	require.Eventually(t, func() bool {
		f.Mu.Lock()
		defer f.Mu.Unlock()
		for k := range f.Jobs {
			id = k
		}
		return id != ""
	}, 30*time.Second, 20*time.Millisecond, "no submit: %s", pod.Output())
	f.Set(id, func(j *fakequantum.Job) { j.Status = "Running" })
	require.Eventually(t, func() bool { return pod.Data(t)["status.jobStatus"] == "RUNNING" }, time.Minute, 50*time.Millisecond, pod.Output())
	f.Set(id, func(j *fakequantum.Job) { j.Status = "Completed" })
	code, out := pod.Wait(t, time.Minute)
	require.Equal(t, 0, code, out)

	d := pod.Data(t)
	testibm.AssertOperatorReads(t, d, "DONE")
	assert.Equal(t, "quantum", d["backend"], "BRIDGE_BACKEND fills the record's missing key")
	f.Mu.Lock()
	assert.JSONEq(t, `{"pubs":[["`+strings.ReplaceAll(bell, `"`, `\"`)+`",[],64]],"version":2}`, string(f.Jobs[id].Params), "the params wrapper is unwrapped")
	f.Mu.Unlock()
	var objects []string
	for o := range tests3.Client(t).ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		require.NoError(t, o.Err)
		objects = append(objects, o.Key)
	}
	assert.NotEmpty(t, objects, "results uploaded with /s3credentials")
	assert.True(t, strings.Contains(strings.Join(objects, " "), "results"), "objects: %v", objects)
	assert.Contains(t, d["status.outputs"], "s3://"+bucket+"/")
}
