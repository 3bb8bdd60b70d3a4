package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// TestSIGTERMWithKubeAPIServerDownEndsWithinGrace: issue 25 item 6 on the
// real kube-apiserver. The apiserver is blackholed (nothing answers) while
// the job runs, then invoke gets SIGTERM. The job is cancelled at once, but
// the final state cannot be recorded: invoke must write its outputs and the
// termination log and exit within --grace-period, not retry the write for
// the retry budget (119 s before, when a pod is SIGKILLed long before), and
// exit 3: the job is KILLED whether or not the record says so.
func TestSIGTERMWithKubeAPIServerDownEndsWithinGrace(t *testing.T) {
	t.Parallel()
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	cfg := testkube.Config(t)
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	px := testutil.NewProxy(t, u.Host)
	viaProxy := *cfg
	viaProxy.Host = "https://" + px.Addr
	kubeconfig := writeKubeconfig(t, &viaProxy, ns)
	outputs := t.TempDir()
	termLog := filepath.Join(outputs, "termination-log")
	require.NoError(t, os.WriteFile(termLog, nil, 0o644))
	const grace = 5 * time.Second
	cmd, out := startInvoke(t, []string{"XDG_STATE_HOME=" + t.TempDir()}, "--kubeconfig", kubeconfig, "--job-name", "grace-down",
		"--backend", "local", "--script", "sleep 300", "--update-interval", "1", "--grace-period", grace.String(),
		"--termination-log", termLog, "--output-status", filepath.Join(outputs, "status"),
		"--output-message", filepath.Join(outputs, "message"))
	require.Eventually(t, func() bool {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "grace-down-bridge-cm", metav1.GetOptions{})
		return err == nil && cm.Data["status.jobStatus"] == "RUNNING"
	}, time.Minute, 50*time.Millisecond)
	px.Set(t, testutil.Blackhole)
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan int, 1)
	go func() { done <- exitOf(cmd.Wait()) }()
	var code int
	select {
	case code = <-done:
	case <-time.After(3 * grace):
		_ = cmd.Process.Kill()
		t.Fatalf("invoke still running %s after SIGTERM (grace %s): %s", 3*grace, grace, out)
	}
	took := time.Since(start)
	t.Logf("SIGTERM with the kube-apiserver blackholed: exit %d after %s (grace %s)", code, took.Round(time.Millisecond), grace)
	assert.Less(t, took, grace+time.Second, "within the grace period")
	// Issue 37: the backend confirmed the cancel, so the job is KILLED (3)
	// though the record could not say so; the old code exited 75 with an
	// empty status output.
	assert.Equal(t, ExitKilled, code, "the backend confirmed the cancel")
	assert.NotEmpty(t, readFile(t, termLog), "the termination log says what happened")
	assert.Equal(t, "KILLED", readFile(t, filepath.Join(outputs, "status")))
	sum := summaryOf(t, out.String())
	assert.Equal(t, "KILLED", sum["status"])

	px.Set(t, testutil.Pass)
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "grace-down-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "RUNNING", cm.Data["status.jobStatus"], "the record is left for the next invoke or cleanup")
}
