package backends_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notPublishing are the backends with a ProbeLoad that are not
// LoadPublishers, and why: their steps probe for themselves even where the
// cluster's agent runs.
var notPublishing = map[string]string{
	// The probe reads the one quantum backend the job names (GET
	// /backends/{name}/status); a measure for every job would be every
	// backend's status, one request each, for figures a step gets with one.
	"quantum.Backend": "the probe is of the job's own quantum backend",
	// A test double whose probe answers what its parameters say.
	"fake.Backend": "a test double",
}

// TestEveryProberPublishes walks every backend package: a type with a
// ProbeLoad method has MeasureLoad and LoadFrom too (so that the cluster's
// agent measures its load once for every step), or is listed in
// notPublishing with the reason. A listed type that publishes now is to be
// taken off the list.
func TestEveryProberPublishes(t *testing.T) {
	methods := backendMethods(t)
	var probers []string
	for typ, ms := range methods {
		if !ms["ProbeLoad"] {
			continue
		}
		probers = append(probers, typ)
		publishes := ms["MeasureLoad"] && ms["LoadFrom"]
		if why, listed := notPublishing[typ]; listed {
			assert.False(t, publishes, "%s publishes its load now: take it off notPublishing (%q)", typ, why)
		} else {
			assert.True(t, publishes, "%s has a ProbeLoad but no MeasureLoad and LoadFrom: split its probe (backends.LoadPublisher) so that the cluster's agent measures it once for every step, or list it in notPublishing with the reason", typ)
		}
	}
	sort.Strings(probers)
	t.Logf("backends with a probe: %v", probers)
	require.GreaterOrEqual(t, len(probers), 7, "the walk found too few probes: have the backends moved?")
	for typ := range notPublishing {
		assert.True(t, methods[typ]["ProbeLoad"], "notPublishing lists %s, which has no ProbeLoad", typ)
	}
}

// backendMethods is, for every type of every package under backends/ (by
// package.Type), the names of its methods, tests aside.
func backendMethods(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	dirs, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(d.Name(), "*.go"))
		require.NoError(t, err)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
					continue
				}
				typ := f.Name.Name + "." + receiverName(fd.Recv.List[0].Type)
				if out[typ] == nil {
					out[typ] = map[string]bool{}
				}
				out[typ][fd.Name.Name] = true
			}
		}
	}
	return out
}

func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
