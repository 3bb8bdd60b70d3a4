package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
)

// getSlurmREST decodes into v slurmrestd's answer to GET
// /slurm/<api>/<path> on c, asked with c's credentials directly (not
// through any proxy or invoke's client): what Slurm itself says.
func getSlurmREST(t *testing.T, c slurmCluster, path string, v any) {
	t.Helper()
	read := func(n string) string {
		b, err := os.ReadFile(filepath.Join(c.creds, n))
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(c.url, "/")+"/slurm/"+c.api+"/"+path, nil)
	require.NoError(t, err)
	req.Header.Set("X-SLURM-USER-NAME", read("username"))
	req.Header.Set("X-SLURM-USER-TOKEN", read("token"))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// slurmJobsByComment returns the state of each job slurmctld knows whose
// comment is key (the idempotency key invoke stamps), asked of slurmrestd
// itself, not through any proxy.
func slurmJobsByComment(t *testing.T, c slurmCluster, key string) map[string]string {
	t.Helper()
	if key == "" {
		// Every job submitted without a comment (other tests', a site's)
		// would be counted as this test's.
		t.Fatal("no idempotency key to find jobs by: the record holds none")
	}
	var jr struct {
		Jobs []struct {
			ID      json.Number     `json:"job_id"`
			Comment string          `json:"comment"`
			State   json.RawMessage `json:"job_state"`
		} `json:"jobs"`
	}
	getSlurmREST(t, c, "jobs/", &jr)
	out := map[string]string{}
	for _, j := range jr.Jobs {
		if j.Comment != key {
			continue
		}
		var one string
		var many []string
		if json.Unmarshal(j.State, &one) != nil && json.Unmarshal(j.State, &many) == nil {
			one = strings.Join(many, ",")
		}
		out[j.ID.String()] = one
	}
	return out
}

// runningSlurmJob starts invoke on a job that sleeps, waits until Slurm
// runs it, and SIGKILLs invoke, so that nothing cancels the job: what an
// IBM pod or a crashed invoke leaves behind. It returns the job's id.
func runningSlurmJob(t *testing.T, c slurmCluster, job string) string {
	t.Helper()
	state := t.TempDir()
	cmd, out := startInvoke(t, nil, "--state-dir", state, "--job-name", job, "--backend", "slurm", "--resource-url", c.url,
		"--credentials-dir", c.creds, "--script", "#!/bin/sh\nsleep 300\n", "--update-interval", "1")
	waitForStatus(t, state, job, "RUNNING")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL), out.String())
	_ = cmd.Wait()
	rec, err := record.NewFileStore(state, job).Get(context.Background())
	require.NoError(t, err)
	id := rec.Data[record.KeyID]
	require.NotEmpty(t, id)
	require.Equal(t, "RUNNING", slurmJobState(t, c, id))
	return id
}

// assertCancelled waits for slurmctld to report the job CANCELLED.
func assertCancelled(t *testing.T, c slurmCluster, id string) {
	t.Helper()
	var st string
	assert.Eventually(t, func() bool {
		st = slurmJobState(t, c, id)
		return strings.HasPrefix(st, "CANCELLED")
	}, 15*time.Second, 250*time.Millisecond, "job %s is %s on Slurm", id, st)
}

// TestSlurmCleanupIBMRecord: issue 25 item 2 and issue 26 on the real
// Slurm. A record as IBM's operator writes it (resourceURL with
// /slurm/v0.0.37/, id, no backend key) names a running job: cleanup chooses
// slurm from the URL as invoke does, cancels the job (slurmctld says
// CANCELLED) and deletes the record. A record whose URL says nothing is
// kept (exit 2) without a backend, and cleaned up with BRIDGE_BACKEND=slurm.
// The old cleanup deleted both records and left both jobs running.
func TestSlurmCleanupIBMRecord(t *testing.T) {
	clearEnv(t)
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) { testSlurmCleanupIBMRecord(t, c) })
	}
}

func testSlurmCleanupIBMRecord(t *testing.T, c slurmCluster) {
	id := runningSlurmJob(t, c, "ibm-src")
	state := t.TempDir()
	writeRecord(t, state, "hpcjob", map[string]string{"resourceURL": strings.TrimRight(c.url, "/") + "/slurm/v0.0.37/",
		"resourcesecret": "slurm-credentials", "jobdata.jobScript": "#!/bin/sh\nsleep 300\n", "jobdata.scriptLocation": "inline",
		"updateInterval": "2", "id": id})
	r := run(t, "cleanup", "--state-dir", state, "--job-name", "hpcjob", "--credentials-dir", c.creds, "--wait", "0s")
	require.Equal(t, ExitDone, r.code, r.stderr)
	assert.Equal(t, true, r.summary["cancelled"], r.stdout)
	assert.Equal(t, true, r.summary["deleted"], r.stdout)
	assert.Equal(t, id, r.summary["id"])
	assertCancelled(t, c, id)
	assert.NoFileExists(t, filepath.Join(state, "hpcjob-bridge-cm.json"))

	id = runningSlurmJob(t, c, "plain-src")
	writeRecord(t, state, "plain", map[string]string{"resourceURL": c.url, "jobdata.jobScript": "true", "id": id})
	r = run(t, "cleanup", "--state-dir", state, "--job-name", "plain", "--credentials-dir", c.creds, "--wait", "0s")
	assert.Equal(t, ExitInvalid, r.code, r.stderr)
	assert.Equal(t, false, r.summary["deleted"], r.stdout)
	assert.FileExists(t, filepath.Join(state, "plain-bridge-cm.json"), "kept: its job could not be cancelled")
	assert.Equal(t, "RUNNING", slurmJobState(t, c, id))
	t.Setenv("BRIDGE_BACKEND", "slurm")
	r = run(t, "cleanup", "--state-dir", state, "--job-name", "plain", "--credentials-dir", c.creds, "--wait", "0s")
	require.Equal(t, ExitDone, r.code, r.stderr)
	assert.Equal(t, true, r.summary["cancelled"], r.stdout)
	assertCancelled(t, c, id)
}

// TestSlurmCleanupIntentUnreachable: testCleanupIntentUnreachable on the
// real Slurm, slurmrestd taken away by the proxy.
func TestSlurmCleanupIntentUnreachable(t *testing.T) {
	clearEnv(t)
	for _, c := range slurmClusters(t) {
		t.Run(c.release, func(t *testing.T) {
			target, proxied := httpThroughProxy(t, c.url, c.creds)
			testCleanupIntentUnreachable(t, lostJobSystem{backend: "slurm", server: "slurmrestd", target: target,
				script: "#!/bin/sh\nsleep 300\n", proxied: proxied,
				jobs: func(t *testing.T, key string) map[string]string { return slurmJobsByComment(t, c, key) },
				// Never seen by invoke: on a shared Slurm whose nodes other
				// lanes fill, the job may still wait for one.
				alive:        func(st string) bool { return st == "PENDING" || st == "RUNNING" },
				wasCancelled: func(st string) bool { return strings.HasPrefix(st, "CANCELLED") }})
		})
	}
}

// TestSlurmCleanupOtherRunsJob: issue 25 item 3 on the real Slurm and a
// real kube-apiserver. Two Argo Workflows share a fixed job name. The first
// runs its job; the second's invoke is refused (exit 2), and then its exit
// handler's cleanup must leave the first run's live job and record alone:
// exit 0, a summary naming the other run, nothing written. The first run's
// own exit handler (another node of its Workflow) cancels the job (Slurm
// says CANCELLED) and deletes the record. Each step's pod is named by
// ARGO_POD_NAME, as Argo names it, and read with the shipped Role.
func TestSlurmCleanupOtherRunsJob(t *testing.T) {
	clearEnv(t)
	c := slurmClusters(t)[0] // ownership is the runner's; one Slurm shows it
	dc := testkube.InstallArgoCRDs(t)
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	installShippedRBAC(t, admin, ns)
	kubeconfig := writeKubeconfig(t, testkube.ServiceAccountConfig(t, admin, ns, "bridge-runner"), ns)
	ctx := context.Background()
	_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, wf := range []string{"wfa", "wfb"} {
		obj, err := dc.Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}).Namespace(ns).Create(ctx,
			&unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
				"metadata": map[string]any{"name": wf},
				"spec": map[string]any{"entrypoint": "main", "templates": []any{map[string]any{"name": "main",
					"container": map[string]any{"image": "busybox"}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		yes := true
		ref := metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: wf, UID: obj.GetUID(), Controller: &yes}
		for _, node := range []string{"invoke", "exit"} {
			_, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: wf + "-" + node, OwnerReferences: []metav1.OwnerReference{ref},
					Labels:      map[string]string{"workflows.argoproj.io/workflow": wf},
					Annotations: map[string]string{"workflows.argoproj.io/node-name": wf + ".main." + node}},
				Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool), Containers: []corev1.Container{{Name: "main", Image: "bridge-runner"}}}},
				metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	common := []string{"--kubeconfig", kubeconfig, "--namespace", ns, "--job-name", "shared", "--credentials-dir", c.creds}
	invokeArgs := append([]string{"invoke", "--backend", "slurm", "--resource-url", c.url, "--script", "#!/bin/sh\nsleep 300\n",
		"--update-interval", "1"}, common...)
	step := func(pod string, args ...string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "ARGO_POD_NAME="+pod)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		return cmd, out
	}
	recordData := func() map[string]string {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "shared-bridge-cm", metav1.GetOptions{})
		require.NoError(t, err)
		return cm.Data
	}

	first, firstOut := step("wfa-invoke", invokeArgs...)
	require.NoError(t, first.Start())
	require.Eventually(t, func() bool {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "shared-bridge-cm", metav1.GetOptions{})
		return err == nil && cm.Data[record.KeyJobStatus] == "RUNNING"
	}, 60*time.Second, 250*time.Millisecond, "first run's job RUNNING: %s", firstOut)
	id := recordData()[record.KeyID]
	require.Contains(t, recordData()[record.KeyOwner], "Workflow wfa")

	second, out := step("wfb-invoke", invokeArgs...)
	assert.Equal(t, ExitInvalid, exitOf(second.Run()), out.String())
	assert.Contains(t, out.String(), "already used by")

	cleanup, out := step("wfb-exit", append([]string{"cleanup", "--wait", "0s"}, common...)...)
	require.Equal(t, ExitDone, exitOf(cleanup.Run()), out.String())
	sum := summaryLine(t, out.String())
	assert.Equal(t, false, sum["cancelled"])
	assert.Equal(t, false, sum["deleted"])
	assert.Contains(t, sum["owner"], "Workflow wfa")
	assert.Contains(t, sum["reason"], "another run")
	assert.Contains(t, out.String(), "belongs to another run", "the log says so")
	assert.Empty(t, recordData()[record.KeyKill], "nothing written to the other run's record")
	assert.Equal(t, "RUNNING", slurmJobState(t, c, id), "the first run's job runs on")

	cleanup, out = step("wfa-exit", append([]string{"cleanup", "--wait", "10s"}, common...)...)
	require.Equal(t, ExitDone, exitOf(cleanup.Run()), out.String())
	sum = summaryLine(t, out.String())
	assert.Equal(t, true, sum["cancelled"], out.String())
	assert.Equal(t, true, sum["deleted"], out.String())
	assertCancelled(t, c, id)
	assert.Equal(t, ExitKilled, exitOf(first.Wait()), firstOut.String())
	_, err = admin.CoreV1().ConfigMaps(ns).Get(ctx, "shared-bridge-cm", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the first run's cleanup deleted its record")
}

// summaryLine is the last JSON line of a step's output.
func summaryLine(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var m map[string]any
		if strings.HasPrefix(lines[i], "{") && json.Unmarshal([]byte(lines[i]), &m) == nil {
			return m
		}
	}
	t.Fatalf("no JSON summary in %s", out)
	return nil
}
