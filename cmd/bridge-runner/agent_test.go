package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
)

// Every bad flag of the agent exits 2 and names the flag.
func TestAgentBadFlags(t *testing.T) {
	clearEnv(t)
	t.Setenv("POD_NAMESPACE", "")
	creds := credsDir(t, map[string]string{"token": "tok-abcdef"})
	empty := t.TempDir()
	dead := "http://" + closedPort(t)
	ok := func(extra ...string) []string {
		a := []string{"agent", "--cluster", "hpc-1", "--backend", "slurm", "--resource-url", dead, "--credentials-dir", creds, "--namespaces", "ns-a"}
		return append(a, extra...)
	}
	without := func(flag string) []string {
		a := ok()
		for i := range a {
			if a[i] == "--"+flag {
				return append(a[:i:i], a[i+2:]...)
			}
		}
		t.Fatalf("no --%s", flag)
		return nil
	}
	for _, c := range []struct {
		name  string
		args  []string
		field string
	}{
		{"no cluster", without("cluster"), "cluster"},
		{"cluster not a name", ok("--cluster", "HPC_1"), "cluster"},
		{"interval too short", ok("--query-interval", "50ms"), "query-interval"},
		{"interval too long", ok("--query-interval", "31m"), "query-interval"},
		{"interval not a duration", ok("--query-interval", "soon"), "query-interval"},
		{"no credentials dir", without("credentials-dir"), "credentials-dir"},
		{"credentials dir missing", ok("--credentials-dir", empty+"/nope"), "credentials-dir"},
		{"credentials dir empty", ok("--credentials-dir", empty), "credentials-dir"},
		{"no namespaces", without("namespaces"), "namespaces"},
		{"namespace not a name", ok("--namespaces", "ns-a,Bad_NS"), "namespaces"},
		{"no resource url", without("resource-url"), "resource-url"},
		{"no backend", without("backend"), "backend"},
		{"unknown backend", ok("--backend", "pbs"), "backend"},
		{"backend without batched status", ok("--backend", "local"), "backend"},
		{"health address", ok("--health-addr", "8081"), "health-addr"},
		{"metrics address", ok("--metrics-addr", "localhost"), "metrics-addr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.args...)
			assert.Equal(t, ExitInvalid, r.code, r.stderr)
			assert.Contains(t, r.stderr, c.field)
			assert.NotContains(t, r.stderr, "tok-abcdef")
		})
	}
}

// The agent serves its probes and metrics, is ready once it found the
// cluster's API version and its first round answered (an idle one asks no
// job's state: only the pings of the discovery, which a slurmrestd that
// serves only pings answers here), and ends within 5 s of SIGTERM.
func TestAgentServesAndStopsOnSIGTERM(t *testing.T) {
	clearEnv(t)
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	kubeconfig := writeKubeconfig(t, testkube.Config(t), ns)
	health, metrics := loopbackAddr(t), loopbackAddr(t)
	pings := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/ping") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"pings":[{"hostname":"ctl","pinged":"UP"}],"errors":[],"warnings":[]}`)
	}))
	t.Cleanup(pings.Close)
	cmd := exec.Command(binary, "agent", "--cluster", "hpc-1", "--backend", "slurm", "--resource-url", pings.URL,
		"--credentials-dir", credsDir(t, map[string]string{"token": "tok-abcdef", "user": "bridge"}), "--namespaces", ns,
		"--query-interval", "200ms", "--health-addr", health, "--metrics-addr", metrics)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	require.Eventually(t, func() bool { return get(health, "/readyz") == http.StatusOK }, 20*time.Second, 50*time.Millisecond, "ready: %s", &stderr)
	assert.Equal(t, http.StatusOK, get(health, "/healthz"))
	body := getBody(t, metrics, "/metrics")
	for _, m := range []string{"bridge_runner_agent_queries_total", "bridge_runner_agent_query_failures_total", "bridge_runner_agent_records_served", "bridge_runner_agent_records_open", "bridge_runner_agent_last_answer_age_seconds"} {
		assert.Contains(t, body, m)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		assert.NoError(t, err, stderr.String())
	case <-time.After(5 * time.Second):
		t.Fatalf("the agent did not end within 5 s of SIGTERM:\n%s", stderr.String())
	}
	assert.NotContains(t, stderr.String(), "tok-abcdef")
}

// loopbackAddr is a free loopback address.
func loopbackAddr(t *testing.T) string { return closedPort(t) }

func get(addr, path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

func getBody(t *testing.T, addr, path string) string {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	b, err := io.ReadAll(c)
	require.NoError(t, err)
	return string(b)
}
