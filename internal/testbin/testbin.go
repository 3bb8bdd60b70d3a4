// Package testbin gives tests the bridge-runner binary built from this tree,
// once per test process, and the image the project pins, the two facts the
// components, workflows and examples tests check their YAML against.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

var (
	once sync.Once
	path string
	err  error
)

// Path builds ./cmd/bridge-runner (root is the repository root, relative to
// the test's directory) on first use and returns the binary's path.
func Path(t testing.TB, root string) string {
	t.Helper()
	once.Do(func() {
		dir, derr := os.MkdirTemp("", "bridge-runner-test-")
		if derr != nil {
			err = derr
			return
		}
		path = filepath.Join(dir, "bridge-runner")
		if out, berr := exec.Command("go", "build", "-o", path, filepath.Join(root, "cmd", "bridge-runner")).CombinedOutput(); berr != nil {
			err = fmt.Errorf("go build: %v\n%s", berr, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Cleanup removes the binary; call it from TestMain after m.Run.
func Cleanup() {
	if path != "" {
		os.RemoveAll(filepath.Dir(path))
	}
}

// PinnedImage is the image of workflows/kustomization.yaml's images: entry,
// the one place it is set (make set-image); every other place must agree.
func PinnedImage(t testing.TB, root string) string {
	t.Helper()
	b, rerr := os.ReadFile(filepath.Join(root, "workflows", "kustomization.yaml"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	var k struct {
		Images []struct {
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	if uerr := yaml.Unmarshal(b, &k); uerr != nil || len(k.Images) != 1 || k.Images[0].NewName == "" || k.Images[0].NewTag == "" {
		t.Fatalf("workflows/kustomization.yaml: want one images: entry with newName and newTag (%v)", uerr)
	}
	return k.Images[0].NewName + ":" + k.Images[0].NewTag
}
