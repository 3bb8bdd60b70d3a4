package agent_test

import (
	"go/ast"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The class, not the case: every heartbeat the agent writes announces the
// cadence it keeps (Every, Round), by which its steps judge it (see
// watcher.Heartbeat.Due). A heartbeat made without them (its interval
// alone) made a busy agent look stale to its steps between two of its
// heartbeats; a new one that leaves them out fails here.
func TestEveryHeartbeatAnnouncesItsCadence(t *testing.T) {
	fset, files := agentSources(t)
	made := 0
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if sel, isSel := typeOf(lit, ok); !isSel || !isIdent(sel.X, "watcher") || sel.Sel.Name != "Heartbeat" {
				return true
			}
			made++
			keys := map[string]bool{}
			for _, e := range lit.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if id, ok := kv.Key.(*ast.Ident); ok {
						keys[id.Name] = true
					}
				}
			}
			for _, k := range []string{"Interval", "Every", "Round"} {
				assert.True(t, keys[k], "%s: a heartbeat without %s: steps could not judge it by the cadence it keeps", fset.Position(lit.Pos()), k)
			}
			return true
		})
	}
	assert.Positive(t, made, "the walk finds the agent's heartbeat")
}

// typeOf is lit's type as a selector (pkg.Name), if it is one.
func typeOf(lit *ast.CompositeLit, ok bool) (*ast.SelectorExpr, bool) {
	if !ok {
		return nil, false
	}
	sel, isSel := lit.Type.(*ast.SelectorExpr)
	return sel, isSel
}
