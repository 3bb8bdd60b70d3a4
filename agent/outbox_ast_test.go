package agent_test

import (
	"go/ast"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The class, not the case: the agent writes records only from its outbox
// (Agent.observe, handed to the outbox's writers in Run), never from a
// round, so that no round waits for Kubernetes writes (a round that did
// kept no cadence at a burst: 22 s without a query at N = 1,000). A new
// caller of observe, or a write of a record's store (PatchData, Update)
// outside observe, fails here.
func TestRecordsAreWrittenOnlyFromTheOutbox(t *testing.T) {
	fset, files := agentSources(t)
	uses := 0
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "observe":
					uses++
					assert.Equal(t, "Run", fn.Name.Name, "%s: observe outside Run: records are written by the outbox's writers alone", fset.Position(sel.Pos()))
				case "PatchData", "Update":
					// The heartbeat (beat) is the agent's own ConfigMap, not a record.
					assert.Contains(t, []string{"observe", "beat"}, fn.Name.Name, "%s: a write outside observe: queue it in the outbox", fset.Position(sel.Pos()))
				}
				return true
			})
		}
	}
	assert.Positive(t, uses, "the walk finds the outbox's writer")
}
