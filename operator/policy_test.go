package operator

import (
	"strings"
	"testing"

	"github.com/bridge-runner/bridge-runner/kube"
)

func TestImageAllowed(t *testing.T) {
	allowed := []string{"registry.example.org/bridge-runner:*", "quay.io/team/exact:v1", "*"}
	for img, want := range map[string]bool{
		"registry.example.org/bridge-runner:v2": true,
		"quay.io/team/exact:v1":                 true,
		"quay.io/team/exact:v2":                 false,
		"registry.example.org/other:v1":         false,
	} {
		if got := imageAllowed(img, allowed); got != want {
			t.Errorf("imageAllowed(%q) = %v, want %v (a bare * allows nothing)", img, got, want)
		}
	}
	r := &reconciler{o: Options{JobImage: "ours:1"}}
	for spec, want := range map[string][2]string{"": {"ours:1", ""}, "ours:1": {"ours:1", ""}, "quay.io/ibmdpdev/slurm-pod:v0.0.1": {"ours:1", "quay.io/ibmdpdev/slurm-pod:v0.0.1"}} {
		img, ignored := r.jobImage(&BridgeJob{Spec: BridgeJobSpec{Image: spec}})
		if img != want[0] || ignored != want[1] {
			t.Errorf("spec.image %q: runs %q, ignored %q; want %q, %q", spec, img, ignored, want[0], want[1])
		}
	}
}

func TestCheckNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"creds": true, "slurm.creds-1": true,
		"../../other-ns/secrets/x": false, "../../../kube-system": false, "a/b": false, "UPPER": false,
		strings.Repeat("a", 254): false,
	} {
		bj := &BridgeJob{Spec: BridgeJobSpec{ResourceSecret: "creds", S3Storage: &S3{S3Secret: name}}}
		err := checkNames(bj)
		if (err == nil) != ok {
			t.Errorf("s3secret %q: %v", name, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "spec.s3storage.s3secret:") {
			t.Errorf("s3secret %q: %v does not name the field", name, err)
		}
	}
}

// TestJobPullPolicy: the operator's image is pulled by the operator's pull
// policy, whatever the BridgeJob's imagepullpolicy (IBM's samples say
// Always for IBM's images, which the Job does not run); an allowed image
// of the author's own is pulled as the author said.
func TestJobPullPolicy(t *testing.T) {
	r := &reconciler{o: Options{JobImage: "ours:1", JobImagePullPolicy: "IfNotPresent", AllowedImages: []string{"theirs:*"}}}
	for image, want := range map[string]string{"": "IfNotPresent", "quay.io/ibmdpdev/slurm-pod:v0.0.1": "IfNotPresent", "theirs:2": "Always"} {
		bj := &BridgeJob{Spec: BridgeJobSpec{Image: image, ImagePullPolicy: "Always", ResourceSecret: "creds"}}
		bj.Name = "pull"
		for _, kj := range []*kube.Job{r.buildJob(bj, nil), r.buildCleanup(bj, nil)} {
			if got := kj.Spec.Template.Spec.Containers[0].ImagePullPolicy; got != want {
				t.Errorf("spec.image %q, imagepullpolicy Always: the %s pod pulls %q, want %q", image, kj.Name, got, want)
			}
		}
	}
}
