package testkube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/bridge-runner/bridge-runner/record"
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

// crdSumAnnotation holds the digest of the CRD file a test installed: a
// CRD already installed from the same file is left as it is. Each test
// package that runs Argo's CRDs installs them, and an update of these
// large CRDs is heavy for a loaded apiserver (it rebuilds their schemas):
// one timed out after 60 s beside CI's lanes.
const crdSumAnnotation = "bridge-runner.io/test-crd-sha256"

// applyCRD creates obj, or updates the CRD of its name unless it was
// installed from the same file; another package's test may have just done
// either. A request the apiserver timed out (under load) is tried again,
// backing off, until ctx ends.
func applyCRD(ctx context.Context, crds dynamic.NamespaceableResourceInterface, obj *unstructured.Unstructured) error {
	bo := record.Backoff{Initial: time.Second, Max: 10 * time.Second, Factor: 2, Jitter: 0.3}
	for {
		cur, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = crds.Create(ctx, obj, metav1.CreateOptions{})
		case err == nil && cur.GetAnnotations()[crdSumAnnotation] == obj.GetAnnotations()[crdSumAnnotation]:
			return nil
		case err == nil:
			obj.SetResourceVersion(cur.GetResourceVersion())
			_, err = crds.Update(ctx, obj, metav1.UpdateOptions{})
		}
		switch {
		case err == nil || apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
			return nil
		case !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTooManyRequests(err):
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(bo.Next()):
		}
	}
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
		sum := sha256.Sum256(b)
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[crdSumAnnotation] = hex.EncodeToString(sum[:])
		obj.SetAnnotations(ann)
		if err := applyCRD(ctx, crds, &obj); err != nil {
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
