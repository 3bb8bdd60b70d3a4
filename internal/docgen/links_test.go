package docgen

import (
	"os"
	"path"
	"strings"
	"testing"
)

// root is the repository's top, from this package's directory.
const root = "../.."

// TestLinksResolve: every relative link of README.md, BENCHMARKS.md and
// docs/ names a file or directory of the repository, and every #anchor one
// of the target's headings by GitHub's rules.
func TestLinksResolve(t *testing.T) {
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		text, err := Read(root, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range Links(text) {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
				continue
			}
			n++
			if msg := checkLink(f, text, l.Target); msg != "" {
				t.Errorf("%s:%d: the link %s %s", f, l.Line, l.Target, msg)
			}
		}
	}
	if n < 50 {
		t.Errorf("found %d links between the docs; the README's map alone has more", n)
	}
}

// checkLink says what is wrong with the link target of file from (whose
// text is text), "" when it resolves.
func checkLink(from, text, target string) string {
	file, anchor, _ := strings.Cut(target, "#")
	if file != "" {
		file = path.Clean(path.Join(path.Dir(from), file))
		if file == ".." || strings.HasPrefix(file, "../") {
			return "leaves the repository"
		}
		if _, err := os.Stat(path.Join(root, file)); err != nil {
			return "names a file that does not exist (" + file + ")"
		}
		if anchor == "" {
			return ""
		}
		if !strings.HasSuffix(file, ".md") {
			return "has an anchor into a file that is not markdown"
		}
		var err error
		if text, err = Read(root, file); err != nil {
			return err.Error()
		}
	}
	if anchor != "" && !Anchors(text)[anchor] {
		return "names an anchor that no heading of " + file + " has (#" + anchor + ")"
	}
	return ""
}

// TestAnchorRules: GitHub's anchors of headings as this project writes
// them: code, apostrophes, colons, dashes and repeats.
func TestAnchorRules(t *testing.T) {
	for heading, want := range map[string]string{
		"Seeing your jobs: `bridge-runner status`": "seeing-your-jobs-bridge-runner-status",
		"The cluster's agent":                      "the-clusters-agent",
		"Conditions, `kubectl wait` and Argo CD":   "conditions-kubectl-wait-and-argo-cd",
		"Placement (2026-11-27)":                   "placement-2026-11-27",
		"Overhead – local backend":                 "overhead--local-backend",
		"[Logs](status-and-logs.md) and more":      "logs-and-more",
		"s3_upload files":                          "s3_upload-files",
	} {
		if got := Anchor(heading); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", heading, got, want)
		}
	}
	got := Anchors("# A\n```sh\n# not a heading\n```\n## A\n### A\n")
	for _, a := range []string{"a", "a-1", "a-2"} {
		if !got[a] {
			t.Errorf("Anchors lacks %s: %v", a, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block is no heading")
	}
}

// TestBlocksAndMarkers: fences (indented too), info strings and the
// not-run marker.
func TestBlocksAndMarkers(t *testing.T) {
	bs := Blocks("x\n<!-- not run: needs a cluster -->\n```sh\nkubectl get x\n```\n- item\n  ```python\n  print(1)\n  ```\n")
	if len(bs) != 2 {
		t.Fatalf("got %d blocks, want 2: %+v", len(bs), bs)
	}
	if bs[0].Lang != "sh" || bs[0].NotRun != "needs a cluster" || bs[0].Body != "kubectl get x" || bs[0].Line != 3 {
		t.Errorf("first block %+v", bs[0])
	}
	if bs[1].Lang != "python" || bs[1].NotRun != "" || bs[1].Body != "  print(1)" {
		t.Errorf("second block %+v", bs[1])
	}
	if ls := Links("[a](b.md) `[c](d.md)`\n```\n[e](f.md)\n```\n"); len(ls) != 1 || ls[0].Target != "b.md" {
		t.Errorf("links outside code: %+v", ls)
	}
}
