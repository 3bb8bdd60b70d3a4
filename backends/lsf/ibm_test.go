package lsf

// IBM's Bridge Operator drives bridge-runner as its LSF pod image: an
// IBM-shaped record on the real kube-apiserver, invoke run with IBM's pod
// contract against the Application Center fake, and the record left as
// IBM's operator reads it.

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bridge-runner/bridge-runner/internal/fakelsf"
	"github.com/bridge-runner/bridge-runner/internal/testbin"
	"github.com/bridge-runner/bridge-runner/internal/testibm"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// ibmLSFConfigMap has the keys IBM's operator and its LSF samples write
// (lower-case updateinterval, imagepullpolicy, no backend), with our values.
func ibmLSFConfigMap(url string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "lsfjob-bridge-cm", OwnerReferences: []metav1.OwnerReference{testibm.OperatorOwner("lsfjob")}},
		Data: map[string]string{
			"resourceURL":            url,
			"resourcesecret":         "lsf-credentials",
			"imagepullpolicy":        "Always",
			"updateinterval":         "1",
			"jobdata.jobScript":      "#BSUB -q normal\n#BSUB -W 0:10\necho $PWD\n",
			"jobdata.scriptLocation": "inline",
			"jobproperties": `{"NodesNumber": "1", "Queue": "normal", "RunLimitHour": "1", "RunLimitMinute": "0",
 "ErrorFileName": "sample.err", "OutputFileName": "sample.out"}`,
		},
	}
}

// submittedJob waits for the fake's first job and returns its id.
func submittedJob(t *testing.T, f *fakelsf.Server, pod *testibm.Pod) int {
	id := 0
	require.Eventually(t, func() bool {
		f.Mu.Lock()
		defer f.Mu.Unlock()
		for k := range f.Jobs {
			id = k
		}
		return id != 0
	}, 30*time.Second, 20*time.Millisecond, "no submit: %s", pod.Output())
	return id
}

func waitStatus(t *testing.T, pod *testibm.Pod, status string) {
	require.Eventually(t, func() bool { return pod.Data(t)["status.jobStatus"] == status }, 20*time.Second, 50*time.Millisecond,
		"status %s never recorded: %s", status, pod.Output())
}

func TestIBMOperatorDrivesLSF(t *testing.T) {
	f := fakelsf.New(t, false)
	creds := testibm.CredentialsDir(t, map[string]string{"username": f.User, "password": f.Pass})
	bin := testbin.Path(t, "../..")

	t.Run("done", func(t *testing.T) {
		pod := testibm.Start(t, bin, ibmLSFConfigMap(f.URL+"/platform/"), "lsfjob", "BRIDGE_CREDENTIALS_DIR="+creds)
		id := submittedJob(t, f, pod)
		f.Set(id, func(j *fakelsf.Job) { j.Status, j.Start = "RUN", time.Now().UTC().Truncate(time.Second) })
		waitStatus(t, pod, "RUNNING")
		f.Set(id, func(j *fakelsf.Job) {
			z := 0
			j.Status, j.ExitStatus, j.End = "DONE", &z, time.Now().UTC().Truncate(time.Second)
		})
		code, out := pod.Wait(t, time.Minute)
		require.Equal(t, 0, code, out)
		d := pod.Data(t)
		testibm.AssertOperatorReads(t, d, "DONE")
		assert.Equal(t, "DONE", d["jobStatus"], "the LSF pod's unprefixed key, too")
		assert.Equal(t, "lsf", d["backend"], "inferred from /platform/ and recorded")
		assert.Contains(t, out, "backend chosen")
		assert.Contains(t, out, "imagepullpolicy", "IBM's inert key is named in the log")
		f.Mu.Lock()
		s := f.Submits[0]
		f.Mu.Unlock()
		for param, want := range map[string]string{"QUEUE": "normal", "RUNLIMITHOUR": "1", "OUTPUT_FILE": "sample.out", "ERROR_FILE": "sample.err"} {
			assert.Equal(t, want, s.Params[param].Value, "IBM's jobproperties reach %s", param)
		}
		assert.Contains(t, s.Params["EXTRA_PARAMS"].Value, "-nnodes 1")
	})

	t.Run("kill", func(t *testing.T) {
		f.Mu.Lock()
		f.Jobs = map[int]*fakelsf.Job{}
		f.Mu.Unlock()
		pod := testibm.Start(t, bin, ibmLSFConfigMap(f.URL+"/platform/"), "lsfjob", "BRIDGE_CREDENTIALS_DIR="+creds)
		id := submittedJob(t, f, pod)
		f.Set(id, func(j *fakelsf.Job) { j.Status, j.Start = "RUN", time.Now().UTC().Truncate(time.Second) })
		waitStatus(t, pod, "RUNNING")
		// What IBM's operator does for spec.kill.
		_, err := pod.Client.CoreV1().ConfigMaps(pod.Namespace).Patch(context.Background(), pod.ConfigMap, types.MergePatchType,
			[]byte(`{"data":{"kill":"true"}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		code, out := pod.Wait(t, time.Minute)
		assert.Equal(t, 3, code, out)
		d := pod.Data(t)
		testibm.AssertOperatorReads(t, d, "KILL")
		assert.Equal(t, "EXIT", f.JobByID(id).Status, "the job was killed on LSF")
	})

	t.Run("URL without a system never runs", func(t *testing.T) {
		f.Mu.Lock()
		f.Jobs = map[int]*fakelsf.Job{}
		f.Mu.Unlock()
		// IBM's samples give Application Center's URL without a path.
		pod := testibm.Start(t, bin, ibmLSFConfigMap(f.URL), "lsfjob", "BRIDGE_CREDENTIALS_DIR="+creds)
		code, out := pod.Wait(t, time.Minute)
		assert.Equal(t, 2, code, out)
		assert.Contains(t, out, "does not say which system")
		assert.Contains(t, out, "lsf, quantum, ray, slurm", "the choices are named")
		assert.Empty(t, f.Jobs, "nothing submitted")
		assert.NotContains(t, pod.Data(t), "backend")

		// The same record with the pod's BRIDGE_BACKEND runs on LSF.
		pod = testibm.Start(t, bin, ibmLSFConfigMap(f.URL), "lsfjob", "BRIDGE_CREDENTIALS_DIR="+creds, "BRIDGE_BACKEND=lsf")
		id := submittedJob(t, f, pod)
		f.Set(id, func(j *fakelsf.Job) {
			z := 0
			j.Status, j.ExitStatus, j.Start, j.End = "DONE", &z, time.Now().UTC(), time.Now().UTC()
		})
		code, out = pod.Wait(t, time.Minute)
		require.Equal(t, 0, code, out)
		assert.Equal(t, "lsf", pod.Data(t)["backend"])
	})
}
