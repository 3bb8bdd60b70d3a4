package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/internal/docgen"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// readDoc is the text of the project's markdown file rel (README.md,
// docs/...).
func readDoc(t *testing.T, rel string) string {
	t.Helper()
	text, err := docgen.Read("../..", rel)
	require.NoError(t, err)
	return text
}

// Where the README's contract tables and IBM's keys moved.
const (
	contractDoc  = "docs/reference/contract.md"
	migratingDoc = "docs/guides/migrating-from-ibm.md"
)

// TestContractDoc keeps the contract's tables (docs/reference/contract.md)
// true to the code, and the README's Quick start to what CI runs.
func TestContractDoc(t *testing.T) {
	contract := readDoc(t, contractDoc)
	has := func(s string) {
		t.Helper()
		assert.True(t, strings.Contains(contract, s), "%s lacks %q", contractDoc, s)
	}
	for _, f := range record.Fields {
		def := "|"
		if f.Default != "" {
			def = "`" + f.Default + "` |"
		}
		has(fmt.Sprintf("| `%s` | `--%s` | %s `%s` |", f.Key, f.Flag, def, f.CRD))
	}
	// IBM's keys and the settings for IBM's records are the migration
	// guide's.
	migrating := readDoc(t, migratingDoc)
	aliases, inert := record.IBMKeys()
	for _, k := range append(slices.Collect(maps.Keys(aliases)), inert...) {
		assert.Contains(t, migrating, "`"+k+"`", "%s lacks IBM's key %s", migratingDoc, k)
	}
	for _, flag := range []string{"--configmap", "BRIDGE_CONFIGMAP", "--status-keys", "BRIDGE_STATUS_KEYS"} {
		assert.Contains(t, migrating, "`"+flag, "%s lacks %s", migratingDoc, flag)
	}
	for _, flag := range []string{"--configmap", "--status-keys", "BRIDGE_BACKEND"} {
		has("`" + flag)
	}
	for _, k := range record.StateKeys {
		has("`" + k + "`")
	}
	for _, f := range record.States { // the states table is the state table's meanings
		has("| `" + string(f.State) + "` | " + f.Meaning + " |")
	}
	for _, code := range []int{ExitDone, ExitFailed, ExitInvalid, ExitKilled, ExitUnknown, ExitInfra, ExitTempFail} {
		has(fmt.Sprintf("\n| %d | ", code))
	}
	for _, o := range runner.OutputFields {
		has("`" + o.Name + "`")
	}
	for _, p := range append(append([]string{}, runner.CrashPoints...), runner.MoveCrashPoints...) {
		has("`" + p + "`")
	}
	// The backend row names every backend there is (issue 32: htcondor was missing).
	i := strings.Index(contract, "| `backend` | `--backend` |")
	require.GreaterOrEqual(t, i, 0)
	row := contract[i : i+strings.Index(contract[i:], "\n")]
	readme := readDoc(t, "README.md")
	for _, name := range builtin.Registry().Names() {
		assert.Contains(t, row, "`"+name+"`", "the contract's backend row lacks %s", name)
		assert.Contains(t, readme, "| `"+name+"` |", "the README's backends table lacks %s", name)
	}
	quick := readme[strings.Index(readme, "## Quick start"):strings.Index(readme, "## Concepts")]
	assert.Contains(t, quick, "go run ./cmd/bridge-runner invoke")
	assert.Contains(t, quick, "make test")
}

// excerptOf is the example file a code block quotes, "" when none: its
// first line names the file ("# examples/...").
func excerptOf(b docgen.Block) string {
	first, _, _ := strings.Cut(b.Body, "\n")
	if !strings.HasPrefix(first, "# examples/") {
		return ""
	}
	return strings.TrimPrefix(first, "# ")
}

// TestDocSnippetsAreTheTestedExamples: a code block of the README or docs/
// whose first line names a file ("# examples/...") must be a verbatim
// excerpt of it (the examples' own tests run the files).
func TestDocSnippetsAreTheTestedExamples(t *testing.T) {
	files, err := docgen.Files("../..")
	require.NoError(t, err)
	checked := 0
	for _, f := range files {
		for _, b := range docgen.Blocks(readDoc(t, f)) {
			path := excerptOf(b)
			if path == "" {
				continue
			}
			src, err := os.ReadFile("../../" + path)
			require.NoError(t, err, "%s:%d", f, b.Line)
			_, body, _ := strings.Cut(b.Body, "\n")
			assert.True(t, strings.Contains(string(src), body), "%s:%d: the %s block is not an excerpt of the file", f, b.Line, path)
			checked++
		}
	}
	assert.GreaterOrEqual(t, checked, 8, "the guides show tested examples")
}

// quickStart is the README's Quick Start section and its command's
// arguments (the line after "go run ./cmd/bridge-runner ").
func quickStart(t *testing.T) (section, args string) {
	t.Helper()
	readme := readDoc(t, "README.md")
	section = readme[strings.Index(readme, "## Quick start"):strings.Index(readme, "## Concepts")]
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "go run ./cmd/bridge-runner invoke ") {
			args = strings.TrimPrefix(l, "go run ./cmd/bridge-runner ")
		}
	}
	require.NotEmpty(t, args)
	return section, args
}

// TestQuickStartTouchesNoCluster runs the Quick Start's command as the
// README writes it, on a laptop whose KUBECONFIG names a cluster (here one
// that cannot be reached): it runs the job with a file record, exits 0,
// and its second run re-attaches instead of running the job again.
func TestQuickStartTouchesNoCluster(t *testing.T) {
	_, line := quickStart(t)
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
	_, err := os.Stat(filepath.Join(home, ".local", "state", "bridge-runner"))
	require.NoError(t, err, "the record is a file under ~/.local/state")
}

// readmeBlock is the text of the README's first ``` block after marker.
func readmeBlock(t *testing.T, readme, marker string) string {
	t.Helper()
	i := strings.Index(readme, marker)
	require.GreaterOrEqual(t, i, 0, "the README has no %q", marker)
	blocks := strings.SplitN(readme[i:], "```", 3)
	require.Len(t, blocks, 3, marker)
	_, body, _ := strings.Cut(blocks[1], "\n")
	return body
}

// shownLines splits a step's stderr and stdout, masked of what changes
// from run to run (times, ids, the home directory), into its log records
// and the job's output lines. A local job's PENDING is seen only when the
// first poll comes before its supervisor starts it: that line is left out.
func shownLines(text, home string) (records, output []string) {
	mask := []struct{ re, with string }{
		{`time=\S+`, "time=…"}, {`br-[0-9a-f]{20}`, "br-ID"}, {`took=\S+`, "took=…"},
		{`"(submit|start|end)Time":"[^"]*"`, `"${1}Time":"…"`},
	}
	if home != "" {
		text = strings.ReplaceAll(text, home, "~")
	}
	for _, m := range mask {
		text = regexp.MustCompile(m.re).ReplaceAllString(text, m.with)
	}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		switch {
		case strings.Contains(l, "state=PENDING"):
		case strings.HasPrefix(l, "time=") || strings.HasPrefix(l, "{"):
			records = append(records, l)
		default:
			output = append(output, l)
		}
	}
	return records, output
}

// TestQuickStartShowsWhatTheREADMESays runs the Quick Start's command and
// compares what it prints with the README's "What you will see" block:
// the same log records, in order (times, ids and the home directory
// masked), the same job output, before the line of the job's end.
func TestQuickStartShowsWhatTheREADMESays(t *testing.T) {
	quick, line := quickStart(t)
	home := t.TempDir()
	cmd := exec.Command("sh", "-c", `exec "$BIN" `+line+" 2>&1")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "BIN=" + binary}
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	gotRecs, gotOut := shownLines(string(out), home)
	wantRecs, wantOut := shownLines(readmeBlock(t, quick, "What you will see"), "")
	assert.Equal(t, wantRecs, gotRecs, "the README shows the log records a run prints:\n%s", out)
	assert.Equal(t, wantOut, gotOut, "and the job's output")
	end := strings.Index(string(out), "state=DONE")
	require.Positive(t, end, "%s", out)
	for _, l := range gotOut {
		assert.Less(t, strings.Index(string(out), l+"\n"), end, "%q before the job's end:\n%s", l, out)
	}
}
