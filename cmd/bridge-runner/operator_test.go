package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The operator's bad flags are exit 2 naming the flag, before any API call.
func TestOperatorBadFlags(t *testing.T) {
	clearEnv(t)
	r := run(t, "operator", "--kubeconfig", "/nonexistent")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "job-image"), r.stderr)
	r = run(t, "operator", "--job-image", "x:1", "--status-keys", "theirs")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "status-keys"), r.stderr)
	r = run(t, "operator", "--job-image", "x:1", "--kubeconfig", "/nonexistent")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "kubeconfig"), r.stderr)
	r = run(t, "operator", "--job-image", "x:1", "--metrics-bind-address", "8080")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "metrics-bind-address"), r.stderr)
	r = run(t, "operator", "--job-image", "x:1", "--job-image-pull-policy", "always")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "job-image-pull-policy") && strings.Contains(r.stderr, "IfNotPresent"), r.stderr)
}

// BRIDGE_BACKEND reaches the operator's --backend (IBM's BridgeJobs have no
// backend): an unknown one is exit 2 naming it, before any API call.
func TestOperatorBackendFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("BRIDGE_BACKEND", "pbs")
	r := run(t, "operator", "--job-image", "x:1", "--kubeconfig", "/nonexistent")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "backend") && strings.Contains(r.stderr, "pbs"), r.stderr)
}

// TestOperatorRunsEveryBackendsSpecCheck: a backend package that exports
// CheckSpec (what its pod would refuse from the description alone) has it
// in the operator's SpecChecks, so the operator refuses that before it
// makes a Job; the next backend to add one cannot be forgotten here.
func TestOperatorRunsEveryBackendsSpecCheck(t *testing.T) {
	wiring, err := os.ReadFile("operator.go")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob("../../backends/*")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, dir := range dirs {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			continue // not a Go package
		}
		for name, pkg := range pkgs {
			for _, f := range pkg.Files {
				for _, d := range f.Decls {
					if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "CheckSpec" {
						found++
						if !strings.Contains(string(wiring), name+".Name: "+name+".CheckSpec") {
							t.Errorf("backends/%s exports CheckSpec, but the operator's SpecChecks (operator.go) lack %s.Name: %s.CheckSpec", filepath.Base(dir), name, name)
						}
					}
				}
			}
		}
	}
	if found == 0 {
		t.Error("no backend exports CheckSpec: the walk misses them (quantum has one)")
	}
}
