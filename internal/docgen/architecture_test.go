package docgen

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// architecture is docs/architecture.md's text.
func architecture(t *testing.T) string {
	t.Helper()
	text, err := Read(root, "docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestArchitectureNamesEveryPackage: the contributors' page names every
// package of the module as it is now (issue 45: the README's Layout
// paragraph described packages two batches old).
func TestArchitectureNamesEveryPackage(t *testing.T) {
	cmd := exec.Command("go", "list", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	doc := architecture(t)
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 20 {
		t.Fatalf("go list listed %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, "github.com/bridge-runner/bridge-runner"), "/")
		if rel != "" && !strings.Contains(doc, "`"+rel+"`") {
			t.Errorf("docs/architecture.md does not name the package `%s`: add it to the packages table", rel)
		}
	}
}

// TestArchitectureNamesEveryCapability: every interface of package
// backends (the required one and the optional capabilities) is in the
// contributors' page.
func TestArchitectureNamesEveryCapability(t *testing.T) {
	pkgs, err := parser.ParseDir(token.NewFileSet(), filepath.Join(root, "backends"), func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	doc, n := architecture(t), 0
	for _, f := range pkgs["backends"].Files {
		ast.Inspect(f, func(node ast.Node) bool {
			ts, ok := node.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				return true
			}
			if _, isIface := ts.Type.(*ast.InterfaceType); isIface {
				n++
				if !strings.Contains(doc, "`"+ts.Name.Name+"`") {
					t.Errorf("docs/architecture.md does not list the interface backends.%s: add it to the capabilities table", ts.Name.Name)
				}
			}
			return true
		})
	}
	if n < 10 {
		t.Errorf("found %d interfaces in package backends", n)
	}
}

// TestReferenceListsEveryMetric: every metric name in the code (a string
// literal "bridge_runner_...") is in the generated metrics reference, so
// a registry the generator does not read fails here rather than going
// undocumented.
func TestReferenceListsEveryMetric(t *testing.T) {
	ref, err := Read(root, "docs/reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`"(bridge_runner_[a-z0-9_]+)"`)
	n := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return firstErr(err, filepath.SkipDir)
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			n++
			if !strings.Contains(ref, "`"+m[1]+"`") {
				t.Errorf("%s: the metric %s is not in docs/reference/metrics.md: add its registry to the generator (cmd/bridge-runner/reference_test.go) and run make docs", p, m[1])
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("found %d metric names in the code", n)
	}
}

// firstErr is err, else skip.
func firstErr(err, skip error) error {
	if err != nil {
		return err
	}
	return skip
}
