package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The release binary talks to Kubernetes through runner's REST client for
// the few kinds it uses. The generated clientsets and the API types of
// every group tripled the binary and doubled its memory; this catches an
// import that brings them back before any benchmark runs.
func TestBinaryLinksNoGeneratedClients(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	banned := []string{"k8s.io/api/", "k8s.io/client-go/kubernetes", "k8s.io/client-go/dynamic",
		"k8s.io/client-go/applyconfigurations", "github.com/argoproj/", "github.com/google/gnostic-models"}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range banned {
			if strings.HasPrefix(dep, b) {
				t.Errorf("bridge-runner links %s; use runner.KubeClient (REST) instead", dep)
			}
		}
	}
}
