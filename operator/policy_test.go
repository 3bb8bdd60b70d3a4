package operator

import (
	"context"
	"fmt"
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

// TestBackendAsIBMsUsersWriteIt: without spec.backend, the operator reads
// the backend as IBM's users point at it, with no request to the URL: IBM's
// Ray samples (IBM's ray-pod image, the dashboard's port 8265; the URL as
// IBM's Ray README shows it) are ray, IBM's other images their system; a
// URL and image that say nothing get one message that names what is read
// and what to set, and does not speak of a probe.
func TestBackendAsIBMsUsersWriteIt(t *testing.T) {
	r := &reconciler{o: Options{JobImage: "ours:1", Backends: []string{"htcondor", "local", "lsf", "quantum", "ray", "slurm"}}}
	for _, tc := range []struct{ url, image, want string }{
		{"http://ray-ray-head.ray.svc.cluster.local:8265", "quay.io/ibmdpdev/ray-pod:v0.0.1", "ray"},
		{"http://ray-head.example.org:8265", "", "ray"},
		{"https://ray.apps.example.org", "quay.io/ibmdpdev/ray-pod:v0.0.1", "ray"},
		{"https://lsf.example.org:8443", "quay.io/ibmdpdev/lsf-pod:v0.0.1", "lsf"},
		{"https://quantum.example.org", "quay.io/ibmdpdev/quantum-pod@sha256:abc", "quantum"},
		{"https://slurm.example.org:6820/slurm/v0.0.37/", "quay.io/ibmdpdev/slurm-pod:v0.0.1", "slurm"},
		{"https://slurm.example.org:8265/slurm/v0.0.40/", "", "slurm"}, // the path says it first
	} {
		bj := &BridgeJob{Spec: BridgeJobSpec{ResourceURL: tc.url, Image: tc.image}}
		got, err := r.chooseBackend(context.Background(), bj)
		if got != tc.want || err != nil {
			t.Errorf("resourceURL %s, image %q: backend %q (%v), want %s", tc.url, tc.image, got, err, tc.want)
		}
	}
	for _, image := range []string{"", "quay.io/ibmdpdev/unknown-pod:v1", "quay.io/ibmdpdev/local-pod:v1"} {
		bj := &BridgeJob{Spec: BridgeJobSpec{ResourceURL: "http://compute.example.org:8080", Image: image}}
		_, err := r.chooseBackend(context.Background(), bj)
		msg := fmt.Sprint(err)
		for _, want := range []string{"spec.backend: is not set", "sends it no request", "port 8265", "ray-pod", "set spec.backend to one of htcondor, lsf, quantum, ray, slurm"} {
			if !strings.Contains(msg, want) {
				t.Errorf("image %q: %q does not say %q", image, msg, want)
			}
		}
		for _, not := range []string{"answering", "/api/version", "probe", "--backend", "record"} {
			if strings.Contains(msg, not) {
				t.Errorf("image %q: %q speaks of %q, which the operator does not do", image, msg, not)
			}
		}
	}
	bc := &BridgeCluster{Spec: BridgeClusterSpec{ResourceURL: "http://ray.example.org:8265"}}
	bc.Name = "ray-a"
	if got, err := r.clusterBackend(context.Background(), bc, "spec.clusters[0]"); got != "ray" || err != nil {
		t.Errorf("a BridgeCluster at Ray's port: %q (%v), want ray", got, err)
	}
	bc.Spec.ResourceURL = "http://compute.example.org:8080"
	if _, err := r.clusterBackend(context.Background(), bc, "spec.clusters[0]"); err == nil || strings.Contains(err.Error(), "spec.image") {
		t.Errorf("a BridgeCluster whose URL says nothing: %v (a BridgeCluster has no image)", err)
	}
}
