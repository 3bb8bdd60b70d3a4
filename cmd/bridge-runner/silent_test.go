package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// TestDeadKubeconfigIsNeverSilent: with KUBECONFIG naming an API server
// that is down and no --store, invoke says at once where the record goes
// and why (KUBECONFIG is set), that the API server does not answer and
// until when it retries; at the budget's end it exits 75 with a message
// naming the API server, not a raw `dial tcp` dump. Before, it said
// nothing until the end.
func TestDeadKubeconfigIsNeverSilent(t *testing.T) {
	clearEnv(t)
	p := testutil.NewProxy(t, "127.0.0.1:9")
	p.Cut()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: down, cluster: {server: "https://`+p.Addr+`"}}]
contexts: [{name: down, context: {cluster: down, user: me, namespace: default}}]
current-context: down
users: [{name: me, user: {token: not-a-real-token}}]
`), 0o600))
	t.Setenv("KUBECONFIG", kc)

	start := time.Now()
	r := run(t, "invoke", "--job-name", "down", "--backend", "local", "--script", "echo hi", "--retry-budget", "3s")
	require.Equal(t, ExitTempFail, r.code, r.stderr)
	assert.Less(t, time.Since(start), 3*time.Second+20*time.Second, "the budget is a ceiling")

	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	require.NotEmpty(t, lines)
	assert.Contains(t, lines[0], "configmap default/down-bridge-cm", "the first line says where the record goes")
	assert.Contains(t, lines[0], "KUBECONFIG is set ("+kc+")", "and why")
	assert.Contains(t, r.stderr, "does not answer; retrying")
	assert.Contains(t, r.stderr, "until=")
	assert.Contains(t, r.stderr, p.Addr)
	msg, _ := r.summary["message"].(string)
	assert.Contains(t, msg, "the Kubernetes API server https://"+p.Addr+" (from KUBECONFIG "+kc+") cannot be reached: connection refused")
	for _, out := range []string{r.stderr, r.stdout} {
		assert.NotContains(t, out, "dial tcp")
		assert.NotContains(t, out, "not-a-real-token")
	}
}
