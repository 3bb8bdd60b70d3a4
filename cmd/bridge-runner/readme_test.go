package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
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
	for _, code := range []int{ExitDone, ExitFailed, ExitInvalid, ExitKilled, ExitUnknown, ExitTempFail} {
		has(fmt.Sprintf("\n| %d | ", code))
	}
	for _, o := range runner.OutputFields {
		has("`" + o.Name + "`")
	}
	for _, p := range runner.CrashPoints {
		has("`" + p + "`")
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
