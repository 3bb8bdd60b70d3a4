package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/internal/docgen"
	"github.com/bridge-runner/bridge-runner/operator"
)

// updateDocs makes TestReferenceIsCurrent write the reference instead of
// comparing it: `make docs` runs it so.
var updateDocs = flag.Bool("update-docs", false, "write docs/reference from the code (make docs)")

// reference is docs/reference's generated files, rendered from the code: the
// cobra tree, the record package's tables and the metrics registries.
func reference() map[string]string {
	env := func(f *pflag.Flag) []string {
		if f.Name == "help" || f.Name == "version" || f.Annotations[noEnv] != nil {
			return nil
		}
		return append([]string{envName(f.Name)}, envAliases[f.Name]...)
	}
	return map[string]string{
		"commands.md": docgen.Commands((&app{}).newRootCmd(), env),
		"record.md":   docgen.Record(),
		"metrics.md": docgen.Metrics([]docgen.MetricSet{
			{Server: "The operator (`bridge-runner operator`, `--metrics-bind-address`, default :8080, /metrics)", Families: operator.MetricFamilies()},
			{Server: "A cluster's agent (`bridge-runner agent`, `--metrics-addr`, default :8080, /metrics)", Families: agent.MetricFamilies()},
		}),
	}
}

// TestReferenceIsCurrent: docs/reference's generated files are what the
// code renders now. A new flag, record field or metric fails here until
// `make docs` writes it.
func TestReferenceIsCurrent(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "reference")
	for name, want := range reference() {
		path := filepath.Join(dir, name)
		if *updateDocs {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("docs/reference is stale: run make docs (%s differs from what the code renders)", path)
		}
	}
}
