package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testibm"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
)

// processEnv is this test process's environment without any variable that
// names a job or a store, plus extra.
func processEnv(t *testing.T, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(name, "BRIDGE_") && !strings.HasPrefix(name, "BRIDGE_TEST_")) ||
			name == "JOBNAME" || name == "NAMESPACE" || name == "KUBECONFIG" || strings.HasPrefix(name, "ARGO_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, append([]string{"XDG_STATE_HOME=" + t.TempDir()}, extra...)...)
}

// execBinary runs the built binary with args and env, and returns its exit
// code, stdout and stderr.
func execBinary(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, out.String(), errb.String()
}

// TestNoArgumentsWithPodContractRunsInvoke: IBM's Bridge Operator starts its
// pod image with environment only (JOBNAME, NAMESPACE, the Secret mounted).
// Without arguments the binary runs invoke on the job the environment names,
// where it used to print help and exit 0 (the pod Succeeded, nothing ran).
func TestNoArgumentsWithPodContractRunsInvoke(t *testing.T) {
	for _, name := range []string{"JOBNAME", "BRIDGE_JOB_NAME"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			code, out, errs := execBinary(t, processEnv(t, name+"=ibm-pod", "NAMESPACE=default",
				"BRIDGE_STATE_DIR="+dir, "BRIDGE_BACKEND=local", "BRIDGE_SCRIPT=echo marker-$((6*7))"))
			require.Equal(t, ExitDone, code, "stdout:\n%s\nstderr:\n%s", out, errs)
			require.Contains(t, errs, "running invoke")
			require.Contains(t, errs, "marker-42", "the job's output")
			require.Contains(t, out, `"status":"DONE"`)
			require.FileExists(t, dir+"/ibm-pod-bridge-cm.json")
		})
	}
}

// TestNoArgumentsWithoutJobExits2: no command and no job in the environment
// is a mistake (exit 2) that says what is needed, never help with exit 0.
func TestNoArgumentsWithoutJobExits2(t *testing.T) {
	code, out, errs := execBinary(t, processEnv(t))
	require.Equal(t, ExitInvalid, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Empty(t, out)
	for _, want := range []string{"no command given", "invoke --job-name", "JOBNAME", "NAMESPACE", "bridge-runner --help"} {
		require.Contains(t, errs, want)
	}
	require.Less(t, len(strings.Split(errs, "\n")), 10, "a short word, not the whole help")

	// Asking for help still exits 0.
	code, out, _ = execBinary(t, processEnv(t), "--help")
	require.Equal(t, ExitDone, code)
	require.Contains(t, out, "Usage:")
}

// TestIBMPodWithoutArguments: IBM's Slurm sample as IBM's operator runs it:
// a ConfigMap with IBM's keys and a pod of the image with no arguments,
// only JOBNAME, NAMESPACE and the Secret. It runs invoke on the real
// apiserver and Slurm and reaches DONE (it used to print help, exit 0 and
// submit nothing).
func TestIBMPodWithoutArguments(t *testing.T) {
	clearEnv(t)
	url, _ := slurmEnv(t)
	creds := ibmSlurmCredentials(t)
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	_, err := admin.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hpcjob-bridge-cm", OwnerReferences: []metav1.OwnerReference{testibm.OperatorOwner("hpcjob")}},
		Data: map[string]string{
			"updateInterval":         "2",
			"resourceURL":            url + "/slurm/v0.0.38",
			"resourcesecret":         "slurm-credentials",
			"jobdata.jobScript":      "#!/bin/bash\necho ibm-pod-without-arguments\n",
			"jobdata.scriptLocation": "inline",
			"jobProperties":          `{"NodesNumber": "1", "Queue": "debug", "Tasks": "1", "slurmJobName": "ibm-noargs", "currentWorkingDir": "/tmp"}`,
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	code, out, errs := execBinary(t, processEnv(t, "JOBNAME=hpcjob", "NAMESPACE="+ns,
		"KUBECONFIG="+writeKubeconfig(t, testkube.Config(t), ns), "BRIDGE_CREDENTIALS_DIR="+creds))
	require.Equal(t, ExitDone, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	assert.Contains(t, errs, "running invoke")
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "hpcjob-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err)
	testibm.AssertOperatorReads(t, cm.Data, "DONE")
}
