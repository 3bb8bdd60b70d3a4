package testkube

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := argoCRDDir(t)
	crds := dc.Resource(crdGVR)
	for _, name := range []string{"workflowtemplates", "clusterworkflowtemplates", "workflows", "workflowtaskresults"} {
		var obj unstructured.Unstructured
		b, err := os.ReadFile(filepath.Join(dir, "argoproj.io_"+name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			t.Fatal(err)
		}
		cur, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = crds.Create(ctx, &obj, metav1.CreateOptions{})
		case err == nil:
			obj.SetResourceVersion(cur.GetResourceVersion())
			_, err = crds.Update(ctx, &obj, metav1.UpdateOptions{})
		}
		// Another package's test may have just installed the same CRD.
		if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			t.Fatalf("testkube: installing the CRD %s: %v", obj.GetName(), err)
		}
		for established := false; !established; {
			cur, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				established = established || (m["type"] == "Established" && m["status"] == "True")
			}
			if established {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("testkube: the CRD %s is not established", obj.GetName())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return dc
}
