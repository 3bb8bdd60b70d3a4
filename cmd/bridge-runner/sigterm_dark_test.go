package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestSIGTERMEndsWithinGraceWhateverIsDark: issue 37. A grace period is a
// ceiling: after SIGTERM invoke writes its outputs and exits within
// --grace-period whether the kube-apiserver, slurmrestd or both are
// blackholed, with the cluster's watcher and without. The exit code is
// the truth: KILLED (3) when slurmrestd accepted the cancel, even if the
// record could not say so; 75 with kill=true left for a retry or cleanup
// when it did not. The old code took 40 s against a 25 s grace with the
// watcher on and the API dark (the watcher's handover had timeouts of its
// own), and exited 75 with an empty status when the cancel was confirmed.
func TestSIGTERMEndsWithinGraceWhateverIsDark(t *testing.T) {
	slurmURL, creds := slurmEnv(t)
	admin := testkube.Client(t)
	cases := []struct {
		name                 string
		apiDark, backendDark bool
		exit                 int
		status               string
	}{
		{"api", true, false, ExitKilled, "KILLED"},
		{"backend", false, true, ExitTempFail, ""},
		{"both", true, true, ExitTempFail, ""},
	}
	for _, c := range cases {
		for _, watcher := range []bool{true, false} {
			t.Run(c.name+"-dark/watcher="+strconv.FormatBool(watcher), func(t *testing.T) {
				t.Parallel()
				testSIGTERMDark(t, admin, slurmURL, creds, c.apiDark, c.backendDark, watcher, c.exit, c.status)
			})
		}
	}
}

func testSIGTERMDark(t *testing.T, admin kubernetes.Interface, slurmURL, creds string, apiDark, backendDark, watcher bool, exit int, status string) {
	ns := testkube.Namespace(t, admin)
	cfg := testkube.Config(t)
	ku, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	kpx := testutil.NewProxy(t, ku.Host)
	viaProxy := *cfg
	viaProxy.Host = "https://" + kpx.Addr
	su, err := url.Parse(slurmURL)
	require.NoError(t, err)
	spx := testutil.NewProxy(t, su.Host)
	outputs := t.TempDir()
	termLog := filepath.Join(outputs, "termination-log")
	require.NoError(t, os.WriteFile(termLog, nil, 0o644))
	const grace = 6 * time.Second
	job := "dark"
	cmd, out := startInvoke(t, nil, "--kubeconfig", writeKubeconfig(t, &viaProxy, ns), "--job-name", job,
		"--backend", "slurm", "--resource-url", "http://"+spx.Addr, "--credentials-dir", creds,
		"--script", "#!/bin/sh\nsleep 300\n", "--update-interval", "1", "--grace-period", grace.String(),
		"--watcher="+strconv.FormatBool(watcher), "--termination-log", termLog,
		"--output-status", filepath.Join(outputs, "status"), "--output-message", filepath.Join(outputs, "message"))
	t.Cleanup(func() { // leave nothing running on the shared Slurm
		kpx.Restore(t)
		spx.Restore(t)
		r := run(t, "cleanup", "--kubeconfig", writeKubeconfig(t, cfg, ns), "--job-name", job, "--credentials-dir", creds, "--wait", "0s")
		assert.Equal(t, 0, r.code, r.stderr)
	})
	// A ceiling: the shared Slurm's nodes may be full of other lanes'
	// jobs, and this job waits for one (the watcher's fault tests give a
	// busy cluster as long).
	require.Eventually(t, func() bool {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(context.Background(), job+"-bridge-cm", metav1.GetOptions{})
		return err == nil && cm.Data[record.KeyJobStatus] == "RUNNING" && (cm.Data[record.KeyWatchGroup] != "") == watcher
	}, 3*time.Minute, 100*time.Millisecond, "RUNNING, followed by the watcher: %v", watcher)
	if apiDark {
		kpx.Set(t, testutil.Blackhole)
	}
	if backendDark {
		spx.Set(t, testutil.Blackhole)
	}
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
	t.Logf("SIGTERM, api dark %v, slurmrestd dark %v, watcher %v: exit %d after %s (grace %s)",
		apiDark, backendDark, watcher, code, took.Round(time.Millisecond), grace)
	assert.Less(t, took, grace+3*time.Second, "the grace period is a ceiling")
	assert.Equal(t, exit, code, out.String())
	got, err := os.ReadFile(filepath.Join(outputs, "status"))
	require.NoError(t, err, "the status output is written whatever the exit code")
	assert.Equal(t, status, strings.TrimSpace(string(got)), "the status output is true")
	assert.Equal(t, status, summaryOf(t, out.String())["status"])
	assert.NotEmpty(t, readFile(t, filepath.Join(outputs, "message")))
	assert.NotEmpty(t, readFile(t, termLog))
}
