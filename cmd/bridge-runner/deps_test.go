package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The release binary talks to Kubernetes through package kube's REST client for
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
				t.Errorf("bridge-runner links %s; use kube.Client (REST) instead", dep)
			}
		}
	}
}

// The operator stands on the record's contract (package record) and the
// one Kubernetes client (package kube), not on invoke's machinery: it must
// not link package runner, nor through it the S3 client, nor a backend.
// backends/httpx is no backend: it holds the one constructor of every HTTP
// client (the Kubernetes client's too), which all of them must use.
func TestOperatorLinksNeitherRunnerNorS3(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../operator", "../../record", "../../kube").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 3 {
		t.Fatalf("go list -deps listed %d packages", len(deps))
	}
	for _, dep := range deps {
		if strings.Contains(dep, "minio") || dep == "github.com/bridge-runner/bridge-runner/runner" ||
			strings.HasPrefix(dep, "github.com/bridge-runner/bridge-runner/backends/") && dep != "github.com/bridge-runner/bridge-runner/backends/httpx" {
			t.Errorf("the operator, record or kube links %s", dep)
		}
	}
}
