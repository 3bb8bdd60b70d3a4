package docgen

import (
	"path"
	"strings"
	"testing"
)

// TestREADMEAnswersInTwoHops: the questions of issue 45 each have a heading
// that a reader reaches from the README in at most two links.
func TestREADMEAnswersInTwoHops(t *testing.T) {
	questions := map[string]string{
		"what does exit code 75 mean":                     "docs/reference/contract.md#exit-codes-of-invoke",
		"placement across two clusters in Argo":           "docs/guides/placement.md#placement-across-clusters-in-argo",
		"Slurm over SSH through a jump host":              "docs/guides/slurm-ssh.md#jump-hosts",
		"binding a Secret to a cluster safely":            "docs/guides/binding-secrets.md",
		"why did my step exit 75 and what to do":          "docs/guides/troubleshooting.md#why-did-my-step-exit-75",
		"an array of 20,000 tasks on a limit of 1,001":    "docs/guides/arrays.md#arrays-larger-than-the-clusters-limit",
		"every flag of every command (the reference)":     "docs/reference/commands.md",
		"what each package may import (for contributors)": "docs/architecture.md#what-each-package-may-import",
	}
	reach := reachable(t, "README.md", 2)
	for q, target := range questions {
		if !reach[target] {
			t.Errorf("%q: %s is not within two links of the README", q, target)
		}
		file, _, _ := strings.Cut(target, "#")
		if msg := checkLink(".", mustRead(t, file), target); msg != "" {
			t.Errorf("%q: %s %s", q, target, msg)
		}
	}
}

// reachable are the targets (file, file#anchor) of links within hops
// links of start, as paths from the repository's top.
func reachable(t *testing.T, start string, hops int) map[string]bool {
	seen := map[string]bool{start: true}
	frontier := []string{start}
	for ; hops > 0; hops-- {
		var next []string
		for _, from := range frontier {
			for _, l := range Links(mustRead(t, from)) {
				if strings.Contains(l.Target, "://") {
					continue
				}
				file, anchor, _ := strings.Cut(l.Target, "#")
				if file == "" {
					file = from
				} else {
					file = path.Clean(path.Join(path.Dir(from), file))
				}
				if anchor != "" {
					seen[file+"#"+anchor] = true
				}
				if !seen[file] && strings.HasSuffix(file, ".md") {
					next = append(next, file)
				}
				seen[file] = true
			}
		}
		frontier = next
	}
	return seen
}

func mustRead(t *testing.T, rel string) string {
	t.Helper()
	text, err := Read(root, rel)
	if err != nil {
		t.Fatal(err)
	}
	return text
}
