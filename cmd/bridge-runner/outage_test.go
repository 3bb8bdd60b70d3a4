package main

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
)

// Outages: a server that invoke depends on goes away while the job runs
// (connection refused, as when it is stopped) and comes back. invoke must
// ride it out and report the job's real end.

func outage(d time.Duration) time.Duration {
	if s, err := strconv.Atoi(os.Getenv("BRIDGE_TEST_OUTAGE_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return d
}

func TestSlurmrestdOutage(t *testing.T) {
	t.Parallel()
	slurmURL, creds := slurmEnv(t)
	u, err := url.Parse(slurmURL)
	require.NoError(t, err)
	px := testutil.NewProxy(t, u.Host)
	down := outage(60 * time.Second)
	state := t.TempDir()
	script := "#!/bin/sh\nsleep " + strconv.Itoa(int(down.Seconds())+10) + "\n"
	cmd, out := startInvoke(t, nil, "--state-dir", state, "--job-name", "restd-outage", "--backend", "slurm",
		"--resource-url", "http://"+px.Addr, "--credentials-dir", creds, "--script", script, "--update-interval", "5")
	waitForStatus(t, state, "restd-outage", "RUNNING")
	px.Cut()
	t.Logf("slurmrestd unreachable for %s", down)
	time.Sleep(down)
	px.Restore(t)
	start := time.Now()
	code := exitOf(cmd.Wait())
	t.Logf("after the outage, invoke ended in %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, ExitDone, code, out.String())
	rec, err := record.NewFileStore(state, "restd-outage").Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "DONE", rec.Data[record.KeyJobStatus])
	assert.Contains(t, out.String(), "status request failed; will try again", "the outage was seen and ridden out")
}

func TestKubeAPIServerOutage(t *testing.T) {
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
	down := outage(30 * time.Second)
	cmd, out := startInvoke(t, []string{"XDG_STATE_HOME=" + t.TempDir()}, "--kubeconfig", kubeconfig, "--job-name", "api-outage",
		"--backend", "local", "--script", "sleep "+strconv.Itoa(int(down.Seconds())+10), "--update-interval", "5")
	require.Eventually(t, func() bool {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "api-outage-bridge-cm", metav1.GetOptions{})
		return err == nil && cm.Data["status.jobStatus"] == "RUNNING"
	}, time.Minute, 50*time.Millisecond)
	px.Cut()
	t.Logf("kube-apiserver unreachable for %s", down)
	time.Sleep(down)
	px.Restore(t)
	start := time.Now()
	code := exitOf(cmd.Wait())
	t.Logf("after the outage, invoke ended in %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, ExitDone, code, out.String())
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "api-outage-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "DONE", cm.Data["status.jobStatus"], "the final state reached the ConfigMap after the outage")
}
