package testkube

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// ApplyCRD creates or updates the CustomResourceDefinition in file (one
// YAML document) and waits until the server reports it Established.
func ApplyCRD(t testing.TB, cfg *rest.Config, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &obj.Object); err != nil {
		t.Fatalf("testkube: %s: %v", file, err)
	}
	crds := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{
		Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if old, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
		obj.SetResourceVersion(old.GetResourceVersion())
		if _, err := crds.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("testkube: updating the CRD %s: %v", obj.GetName(), err)
		}
	} else if _, err := crds.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testkube: creating the CRD %s: %v", obj.GetName(), err)
	}
	for {
		got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil && established(got) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testkube: the CRD %s is not Established: %v", obj.GetName(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
