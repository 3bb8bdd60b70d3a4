package testkube

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/dynamic"
)

// argoCRDDir finds the CRDs of the argo-workflows module this project builds with.
func argoCRDDir(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-workflows/v3").Output()
	if err != nil {
		t.Fatalf("testkube: go list the argo-workflows module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "manifests", "base", "crds", "full")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("testkube: Argo's CRDs: %v", err)
	}
	return dir
}

// InstallArgoCRDs creates (or updates) Argo's full CRDs, whose OpenAPI
// schemas make the apiserver check every field, and waits until they are
// served. Test packages running at the same time may all call it.
func InstallArgoCRDs(t testing.TB) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(Config(t))
	if err != nil {
		t.Fatalf("testkube: %v", err)
	}
	dir := argoCRDDir(t)
	for _, name := range []string{"workflowtemplates", "clusterworkflowtemplates", "workflows", "workflowtaskresults"} {
		installCRD(t, dc, filepath.Join(dir, "argoproj.io_"+name+".yaml"))
	}
	return dc
}
