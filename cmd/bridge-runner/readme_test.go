package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/runner"
)

// TestREADMEContract keeps the README's contract tables true to the code.
func TestREADMEContract(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	has := func(s string) {
		t.Helper()
		assert.True(t, strings.Contains(readme, s), "the README lacks %q", s)
	}
	for _, f := range runner.Fields {
		row := fmt.Sprintf("| `%s` | `--%s` | |", f.Key, f.Flag)
		if f.Default != "" {
			row = fmt.Sprintf("| `%s` | `--%s` | `%s` |", f.Key, f.Flag, f.Default)
		}
		has(row)
	}
	aliases, inert := runner.IBMKeys()
	for ibm := range aliases {
		has("`" + ibm + "`")
	}
	for _, k := range inert {
		has("`" + k + "`")
	}
	for _, flag := range []string{"--configmap", "--status-keys", "BRIDGE_CONFIGMAP", "BRIDGE_STATUS_KEYS", "BRIDGE_BACKEND"} {
		has("`" + flag)
	}
	for _, k := range runner.StateKeys {
		has("`" + k + "`")
	}
	for _, s := range backends.States {
		has("| `" + string(s) + "` |")
	}
	for _, code := range []int{ExitDone, ExitFailed, ExitInvalid, ExitKilled, ExitUnknown, ExitInfra, ExitTempFail} {
		has(fmt.Sprintf("\n| %d | ", code))
	}
	for _, o := range runner.OutputFields {
		has("`" + o.Name + "`")
	}
	for _, p := range runner.CrashPoints {
		has("`" + p + "`")
	}
	// The backend row names every backend there is (issue 32: htcondor was missing).
	i := strings.Index(readme, "| `backend` | `--backend` |")
	require.GreaterOrEqual(t, i, 0)
	row := readme[i : i+strings.Index(readme[i:], "\n")]
	for _, name := range builtin.Registry().Names() {
		assert.Contains(t, row, "`"+name+"`", "the README's backend row lacks %s", name)
	}
	quick := readme[strings.Index(readme, "## Quick start"):strings.Index(readme, "## Concepts")]
	assert.Contains(t, quick, "go run ./cmd/bridge-runner invoke")
	assert.Contains(t, quick, "make test")
}

// TestREADMESnippetsAreTheTestedExamples: a README code block whose first
// line names a file ("# examples/...") must be a verbatim excerpt of it.
func TestREADMESnippetsAreTheTestedExamples(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	blocks := strings.Split(string(b), "```")
	checked := 0
	for i := 1; i < len(blocks); i += 2 {
		lines := strings.SplitN(blocks[i], "\n", 3)
		if len(lines) < 3 || !strings.HasPrefix(lines[1], "# examples/") {
			continue
		}
		src, err := os.ReadFile("../../" + strings.TrimPrefix(lines[1], "# "))
		require.NoError(t, err, lines[1])
		assert.True(t, strings.Contains(string(src), strings.TrimRight(lines[2], "\n")), "the README's %s block is not an excerpt of the file", lines[1])
		checked++
	}
	assert.GreaterOrEqual(t, checked, 2, "the Argo and KFP sections show tested examples")
}

// TestQuickStartTouchesNoCluster runs the Quick Start's command as the
// README writes it, on a laptop whose KUBECONFIG names a cluster (here one
// that cannot be reached): it runs the job with a file record, exits 0,
// and its second run re-attaches instead of running the job again.
func TestQuickStartTouchesNoCluster(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	quick := readme[strings.Index(readme, "## Quick start"):strings.Index(readme, "## Concepts")]
	line := ""
	for _, l := range strings.Split(quick, "\n") {
		if strings.HasPrefix(l, "go run ./cmd/bridge-runner invoke ") {
			line = strings.TrimPrefix(l, "go run ./cmd/bridge-runner ")
		}
	}
	require.NotEmpty(t, line)
	home := t.TempDir()
	kc := filepath.Join(home, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: x}}]\n"), 0o600))
	for run := 1; run <= 2; run++ {
		cmd := exec.Command("sh", "-c", `exec "$BIN" `+line)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "KUBECONFIG=" + kc, "BIN=" + binary}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "run %d: %s", run, stderr.String())
		assert.Contains(t, stdout.String(), `"status":"DONE"`, "run %d", run)
		assert.NotContains(t, stderr.String(), "127.0.0.1:1", "run %d: the cluster is not asked", run)
		if run == 1 {
			assert.Contains(t, stderr.String(), "hello from hello")
		} else {
			assert.NotContains(t, stderr.String(), "hello from hello", "the second run re-attaches")
		}
	}
	_, err = os.Stat(filepath.Join(home, ".local", "state", "bridge-runner"))
	require.NoError(t, err, "the record is a file under ~/.local/state")
}
