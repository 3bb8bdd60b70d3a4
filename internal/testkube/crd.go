package testkube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/record"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyCRD creates or updates the CustomResourceDefinition in file (one
// YAML document) and waits until the server reports it Established (see
// installCRD).
func ApplyCRD(t testing.TB, cfg *rest.Config, file string) {
	t.Helper()
	installCRD(t, dynamic.NewForConfigOrDie(cfg), file)
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

// installCRD creates or updates the CRD in file (one YAML document) unless
// it was installed from the same file, and waits until it is Established.
// crdCeiling is a ceiling, not a wait: an idle apiserver serves a CRD in a
// second or two; a loaded one (CI's lanes all at once) once took more than
// 2 min for Argo's, one request hanging most of it. So each request has a
// budget of its own and is asked again, backing off, until the ceiling.
func installCRD(t testing.TB, dc dynamic.Interface, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(b, &obj.Object); err != nil {
		t.Fatalf("testkube: %s: %v", file, err)
	}
	sum := sha256.Sum256(b)
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[crdSumAnnotation] = hex.EncodeToString(sum[:])
	obj.SetAnnotations(ann)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), crdCeiling)
	defer cancel()
	crds := dc.Resource(crdGVR)
	if err := applyCRD(ctx, crds, &obj); err != nil {
		t.Fatalf("testkube: installing the CRD %s (%s in): %v", obj.GetName(), time.Since(start).Round(time.Second), err)
	}
	bo := record.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Factor: 2, Jitter: 0.3}
	for {
		rctx, rcancel := context.WithTimeout(ctx, crdRequest)
		cur, err := crds.Get(rctx, obj.GetName(), metav1.GetOptions{})
		rcancel()
		if err == nil && established(cur) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testkube: the CRD %s is not Established after %s (last error: %v)", obj.GetName(), time.Since(start).Round(time.Second), err)
		case <-time.After(bo.Next()):
		}
	}
}

// crdCeiling bounds installCRD; crdRequest bounds each of its requests.
const (
	crdCeiling = 5 * time.Minute
	crdRequest = 30 * time.Second
)

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
		rctx, cancel := context.WithTimeout(ctx, crdRequest)
		cur, err := crds.Get(rctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = crds.Create(rctx, obj, metav1.CreateOptions{})
		case err == nil && cur.GetAnnotations()[crdSumAnnotation] == obj.GetAnnotations()[crdSumAnnotation]:
			cancel()
			return nil
		case err == nil:
			obj.SetResourceVersion(cur.GetResourceVersion())
			_, err = crds.Update(rctx, obj, metav1.UpdateOptions{})
		}
		cancel()
		switch {
		case err == nil || apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
			return nil
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			// This request's own budget ran out: ask again.
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
