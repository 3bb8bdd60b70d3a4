package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/docgen"
)

// shellLangs are the info strings of shell snippets, whose lines are commands.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// checkedLangs are the snippets that must be run by a test or say why not.
var checkedLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true,
	"yaml": true, "yml": true, "python": true, "py": true}

// blockCommands are the command lines of a shell block: every line of a
// block without prompts, the "$ " lines of a block with them (the rest is
// their output); comments and blank lines are not commands.
func blockCommands(body string) []string {
	var cmds []string
	prompts := strings.HasPrefix(body, "$ ") || strings.Contains(body, "\n$ ")
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case prompts && strings.HasPrefix(l, "$ "):
			cmds = append(cmds, strings.TrimPrefix(l, "$ "))
		case !prompts:
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// docBlock is one code block of the README or docs/, and where it is.
type docBlock struct {
	where string // file:line
	docgen.Block
}

// docBlocks are the code blocks of every markdown file of the project.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files, err := docgen.Files("../..")
	require.NoError(t, err)
	var out []docBlock
	for _, f := range files {
		for _, b := range docgen.Blocks(readDoc(t, f)) {
			out = append(out, docBlock{where: f + ":" + strconv.Itoa(b.Line), Block: b})
		}
	}
	require.Greater(t, len(out), 30, "the docs' code blocks were not found")
	return out
}

// commandRule says who runs the commands that start with prefix: ranBy, a
// file whose text must contain want (the command, or the part of it that
// file runs); or, with ranBy "", why it cannot run here.
type commandRule struct {
	prefix, ranBy, want, why string
}

func commandRules() []commandRule {
	rules := []commandRule{
		{prefix: "go run ./cmd/bridge-runner invoke ", ranBy: "cmd/bridge-runner/readme_test.go", want: "TestQuickStartTouchesNoCluster"},
		{prefix: "make test", ranBy: ".ci/run", want: "make test"},
		{prefix: "KEEP_SERVICES=1 make test", ranBy: ".ci/run", want: "make test"},
		{prefix: "make build", ranBy: ".ci/run", want: "make build"},
		{prefix: "make lint", ranBy: ".ci/run", want: "make lint"},
		{prefix: "make e2e", ranBy: ".ci/run", want: "make e2e"},
		{prefix: "make docs", ranBy: "Makefile", want: "TestReferenceIsCurrent"},
		{prefix: "FUZZTIME=10s bash hack/fuzz.sh", ranBy: ".ci/run", want: "bash hack/fuzz.sh"},
		{prefix: "bash hack/kfp-local.sh", ranBy: "hack/test.sh", want: "bash hack/kfp-local.sh"},
		{prefix: "python examples/kfp-local/kfp_pipeline.py", ranBy: "hack/kfp_local.py", want: "examples/kfp-local/kfp_pipeline.py"},
		{prefix: "go test ./record/ -run ConfigMap", ranBy: "hack/test.sh", want: "go test"},
		{prefix: "go test -tags bridgetest -run ", ranBy: "hack/test.sh", want: "go test -tags bridgetest"},
		{prefix: "go run ./hack/fakes ", ranBy: "hack/e2e.sh", want: "hack/fakes"},
		{prefix: "bash hack/noise.sh ", ranBy: "internal/sharedidle/noise_test.go", want: "TestNoiseStartsOtherUsersJobsAndStopCancelsThem"},
		{prefix: "make image", why: "docker build needs the golang and distroless base images from a registry this machine cannot reach; hack/build-image.sh builds the same image without one, for make e2e and hack/kfp-local.sh"},
		{prefix: "make set-image", why: "rewrites the image of the shipped YAML in the work tree; the components', templates' and examples' tests check that they all name the one image"},
		{prefix: "make bench", why: "figures, not tests (BENCHMARKS.md); too long for every CI run"},
		{prefix: "kubectl ", why: "needs a real cluster: make e2e applies the templates, RBAC and examples to its own"},
		{prefix: "argo submit", why: "needs a real cluster with Argo: make e2e submits the examples there"},
		{prefix: "bridge-runner status -n ", why: "reads a cluster's records: the status command's tests run it against a real kube-apiserver"},
	}
	for _, svc := range []string{"kube", "slurm", "slurm2411", "slurm2411dbd", "s3", "ray", "sshd", "htcondor"} {
		rules = append(rules, commandRule{prefix: "bash hack/" + svc + "-up.sh", ranBy: "hack/services.sh", want: svc + "-up.sh"})
	}
	return append(rules, commandRule{prefix: "BRIDGE_SSHD_SETENV=", ranBy: "hack/services.sh", want: "sshd-up.sh"})
}

// TestDocCommandsAreRunOrAccountedFor: every command of the shell blocks
// of README.md and docs/ is run by a test or by CI (and the file that runs
// it is checked to say so), or needs what this machine cannot have, said
// why. A new command that fits no rule fails here until it is run or
// classified (or its block is marked <!-- not run: reason -->).
func TestDocCommandsAreRunOrAccountedFor(t *testing.T) {
	rules, n := commandRules(), 0
	for _, b := range docBlocks(t) {
		if !shellLangs[b.Lang] || b.NotRun != "" {
			continue
		}
		for _, c := range blockCommands(b.Body) {
			n++
			i := slices.IndexFunc(rules, func(r commandRule) bool { return strings.HasPrefix(c, r.prefix) })
			if i < 0 {
				t.Errorf("%s: the command %q is neither run by a test nor said to need what this machine lacks: run it in a test, add a rule to commandRules, or mark its block <!-- not run: reason -->", b.where, c)
				continue
			}
			if r := rules[i]; r.ranBy != "" {
				assert.Contains(t, readDoc(t, r.ranBy), r.want, "%s: %q is said to be run by %s", b.where, c, r.ranBy)
			}
		}
	}
	assert.Greater(t, n, 20, "the docs' commands were not found")
}

type readByTest struct{ doc, contains, by, want string }

// readByTests are the snippets that a test reads from the doc as it is and
// runs: the block of doc that contains contains is read by the file by,
// whose text holds want.
var readByTests = []readByTest{
	{"docs/guides/operator-and-bridgeclusters.md", "name: argocd-cm", "operator/conditions_test.go", "func argoHealth("},
	{"docs/guides/kfp.md", `load("examples/slurm/kfp_pipeline.py")`, "hack/kfp_local.py", `doc_python('load("examples/slurm/kfp_pipeline.py")')`},
	{"docs/guides/kfp.md", "kfp_local.run(", "hack/kfp_local.py", `doc_python("kfp_local.run(")`},
}

// TestDocSnippetsAreRunOrMarked: every shell, YAML and Python snippet of
// README.md and docs/ is run: its commands are accounted for (above), it
// quotes an example file that the examples' tests run, or a test reads it
// from the doc (readByTests); else it says why not, in a comment
// <!-- not run: reason --> on the line before its fence.
func TestDocSnippetsAreRunOrMarked(t *testing.T) {
	for _, r := range readByTests {
		assert.Contains(t, readDoc(t, r.by), r.want, "%s is said to read the %s block of %s", r.by, r.contains, r.doc)
	}
	for _, b := range docBlocks(t) {
		if !checkedLangs[b.Lang] || b.NotRun != "" || shellLangs[b.Lang] || excerptOf(b.Block) != "" {
			continue
		}
		doc, _, _ := strings.Cut(b.where, ":")
		if !slices.ContainsFunc(readByTests, func(r readByTest) bool { return r.doc == doc && strings.Contains(b.Body, r.contains) }) {
			t.Errorf("%s: a %s snippet that no test runs: quote an example file (first line # examples/...), have a test read it (readByTests), or mark it <!-- not run: reason --> on the line before its fence", b.where, b.Lang)
		}
	}
}
