package agent_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every capability the agent takes from its backend (a field of Config
// whose type is one of package backends' interfaces: the batched query,
// discovery, the array limit, the load) is handed to it by the command
// (cmd/bridge-runner/agent.go): a capability added to the agent and not
// to the command would leave every step asking the cluster for itself,
// with every test of the agent package (which sets its fields) green.
func TestTheCommandHandsTheAgentEveryCapability(t *testing.T) {
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "agent.go", nil, parser.SkipObjectResolution)
	require.NoError(t, err)
	var caps []string
	ast.Inspect(af, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		for _, f := range ts.Type.(*ast.StructType).Fields.List {
			if sel, ok := f.Type.(*ast.SelectorExpr); ok && isIdent(sel.X, "backends") {
				for _, name := range f.Names {
					caps = append(caps, name.Name)
				}
			}
		}
		return false
	})
	require.GreaterOrEqual(t, len(caps), 4, "the walk found too few capabilities in Config: has it moved?")
	cf, err := parser.ParseFile(fset, "../cmd/bridge-runner/agent.go", nil, parser.SkipObjectResolution)
	require.NoError(t, err)
	set := map[string]bool{}
	ast.Inspect(cf, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok {
			for _, l := range as.Lhs {
				if sel, ok := l.(*ast.SelectorExpr); ok {
					set[sel.Sel.Name] = true
				}
			}
		}
		return true
	})
	for _, c := range caps {
		assert.True(t, set[c], "the agent command never sets Config.%s: assert it from the backend (cfg.%s, _ = be.(backends.…)) beside the others", c, c)
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
