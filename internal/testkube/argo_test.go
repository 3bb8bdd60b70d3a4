package testkube

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A second install of Argo's CRDs from the same files leaves them as they
// are: every test package that runs workflows installs them, and each
// update of these large CRDs is heavy for a loaded apiserver (one timed
// out after 60 s beside CI's lanes).
func TestArgoCRDsInstalledFromTheSameFilesAreLeftAlone(t *testing.T) {
	dc := InstallArgoCRDs(t)
	first, err := dc.Resource(crdGVR).Get(context.Background(), "workflows.argoproj.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.GetAnnotations()[crdSumAnnotation] == "" {
		t.Fatalf("the CRD carries no digest of its file")
	}
	InstallArgoCRDs(t)
	again, err := dc.Resource(crdGVR).Get(context.Background(), "workflows.argoproj.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetResourceVersion() != first.GetResourceVersion() {
		t.Errorf("the CRD was written again: resourceVersion %s → %s", first.GetResourceVersion(), again.GetResourceVersion())
	}
}
