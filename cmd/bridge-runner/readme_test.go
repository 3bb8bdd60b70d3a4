package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/record"
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
	for _, f := range record.Fields {
		def := "|"
		if f.Default != "" {
			def = "`" + f.Default + "` |"
		}
		has(fmt.Sprintf("| `%s` | `--%s` | %s `%s` |", f.Key, f.Flag, def, f.CRD))
	}
	aliases, inert := record.IBMKeys()
	for ibm := range aliases {
		has("`" + ibm + "`")
	}
	for _, k := range inert {
		has("`" + k + "`")
	}
	for _, flag := range []string{"--configmap", "--status-keys", "BRIDGE_CONFIGMAP", "BRIDGE_STATUS_KEYS", "BRIDGE_BACKEND"} {
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

// quickStart is the README's Quick Start section and its command's
// arguments (the line after "go run ./cmd/bridge-runner ").
func quickStart(t *testing.T) (section, args string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
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

// readmeCommands are the command lines of the README's shell blocks: every
// line of a block without prompts, the "$ " lines of a block with them
// (the rest is their output); comments and blank lines are not commands.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var cmds []string
	blocks := strings.Split(string(b), "```")
	for i := 1; i < len(blocks); i += 2 {
		lines := strings.Split(blocks[i], "\n")
		if lang := strings.TrimSpace(lines[0]); lang != "sh" && lang != "bash" && lang != "console" {
			continue
		}
		prompts := strings.Contains(blocks[i], "\n$ ")
		for _, l := range lines[1:] {
			l = strings.TrimSpace(l)
			switch {
			case l == "" || strings.HasPrefix(l, "#"):
			case prompts && strings.HasPrefix(l, "$ "):
				cmds = append(cmds, strings.TrimPrefix(l, "$ "))
			case !prompts:
				cmds = append(cmds, l)
			}
		}
	}
	return cmds
}

// TestREADMECommandsAreRunOrAccountedFor: every command of the README's
// shell blocks is run by a test or by CI (and the file that runs it is
// checked to say so), or needs what this machine cannot have, said why. A
// new README command that fits no rule fails here until it is run or
// classified.
func TestREADMECommandsAreRunOrAccountedFor(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile("../../" + p)
		require.NoError(t, err)
		return string(b)
	}
	ci, testSh, services := read(".ci/run"), read("hack/test.sh"), read("hack/services.sh")
	type rule struct {
		prefix string
		// ranBy: the file whose text must contain want (the command, or the
		// part of it that file runs); "" with a why: not runnable here.
		ranBy, want, why string
	}
	rules := []rule{
		{prefix: "go run ./cmd/bridge-runner invoke ", ranBy: "cmd/bridge-runner/readme_test.go", want: "TestQuickStartTouchesNoCluster"},
		{prefix: "make test", ranBy: ".ci/run", want: "make test"},
		{prefix: "KEEP_SERVICES=1 make test", ranBy: ".ci/run", want: "make test"},
		{prefix: "make build", ranBy: ".ci/run", want: "make build"},
		{prefix: "make lint", ranBy: ".ci/run", want: "make lint"},
		{prefix: "make e2e", ranBy: ".ci/run", want: "make e2e"},
		{prefix: "FUZZTIME=10s bash hack/fuzz.sh", ranBy: ".ci/run", want: "bash hack/fuzz.sh"},
		{prefix: "bash hack/kfp-local.sh", ranBy: "hack/test.sh", want: "bash hack/kfp-local.sh"},
		{prefix: "python examples/kfp-local/kfp_pipeline.py", ranBy: "hack/kfp_local.py", want: "examples/kfp-local/kfp_pipeline.py"},
		{prefix: "go test ./record/ -run ConfigMap", ranBy: "hack/test.sh", want: "go test"},
		{prefix: "make image", why: "docker build needs the golang and distroless base images from a registry this machine cannot reach; hack/build-image.sh builds the same image without one, for make e2e and hack/kfp-local.sh"},
		{prefix: "make bench", why: "figures, not tests (BENCHMARKS.md); too long for every CI run"},
		{prefix: "kubectl ", why: "needs a real cluster: make e2e applies the templates, RBAC and examples to its own"},
		{prefix: "argo submit", why: "needs a real cluster with Argo: make e2e submits the examples there"},
		{prefix: "bridge-runner status -n ", why: "reads a cluster's records: the status command's tests run it against a real kube-apiserver"},
	}
	for _, svc := range []string{"kube", "slurm", "slurm2411", "s3", "ray", "sshd", "htcondor"} {
		rules = append(rules, rule{prefix: "bash hack/" + svc + "-up.sh", ranBy: "hack/services.sh", want: svc + "-up.sh"})
	}
	rules = append(rules, rule{prefix: "BRIDGE_SSHD_SETENV=", ranBy: "hack/services.sh", want: "sshd-up.sh"})
	files := map[string]string{".ci/run": ci, "hack/test.sh": testSh, "hack/services.sh": services}
	cmds := readmeCommands(t)
	require.Greater(t, len(cmds), 20, "the README's commands were not found")
	for _, c := range cmds {
		var r *rule
		for i := range rules {
			if strings.HasPrefix(c, rules[i].prefix) {
				r = &rules[i]
				break
			}
		}
		if r == nil {
			t.Errorf("the README's command %q is neither run by a test nor said to need what this machine lacks: run it in a test or add a rule here", c)
			continue
		}
		if r.ranBy == "" {
			continue
		}
		text, ok := files[r.ranBy]
		if !ok {
			text = read(r.ranBy)
		}
		assert.Contains(t, text, r.want, "the README's %q is said to be run by %s", c, r.ranBy)
	}
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
