package watcher

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
)

// A lease is judged by its reader's clock alone: a holder whose clock is
// an hour ahead of the reader's, or an hour behind, writes its lease
// through the real apiserver with its own time, and the reader trusts the
// renewal exactly one TTL from when it saw it, by its own clock; the
// holder's claim keeps the lease from the reader for one TTL likewise.
// (Judged by the holder's written time, an hour ahead would be trusted
// for an hour, an hour behind never.)
func TestLeaseIsJudgedByTheReadersClockAcrossAnHour(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			ctx := context.Background()
			s := testkube.RecordStore(t)
			reader := &fakeClock{t: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)}
			holder := &fakeClock{t: reader.Now().Add(skew)}
			group := testCluster.Group()
			written := groupLease(s, group, testKey, clockOf(holder))
			read := groupLease(s, group, testKey, clockOf(reader))
			j := &leaseJudge{now: reader.Now}
			look := func() leaseState {
				st, err := read.read(ctx)
				require.NoError(t, err)
				return j.judge(st)
			}

			v, ok := written.take(ctx, leaseState{}, "holder")
			require.True(t, ok)
			taken := look()
			assert.True(t, taken.until.IsZero(), "taken, not renewed: not trusted")
			assert.Equal(t, reader.Now().Add(leaseTTL), taken.claimed, "claimed one TTL from when the reader saw it")
			assert.False(t, taken.free(reader.Now()))

			reader.add(time.Second)
			holder.add(time.Second)
			_, held, err := written.renew(ctx, v, "holder", 0)
			require.NoError(t, err)
			require.True(t, held)
			renewed := look()
			assert.Equal(t, reader.Now().Add(leaseTTL), renewed.until, "trusted one TTL from when the reader saw the renewal")
			reader.add(leaseTTL - time.Millisecond)
			assert.True(t, reader.Now().Before(renewed.until))
			reader.add(time.Millisecond)
			assert.False(t, reader.Now().Before(renewed.until), "and not a moment longer, whatever the holder's clock says")
			assert.Equal(t, renewed.until, look().until, "the same renewal read again extends nothing")
			assert.True(t, look().free(reader.Now()), "a TTL after the reader saw it, it may be taken")
		})
	}
}

// The class, not the case: every reading of the time and every wait of
// the watcher goes through its Clock (clock.go): a direct call to package
// time's clock, or to record.SleepCtx (the machine's clock), anywhere else
// in the package fails here.
func TestTheWatcherReadsTimeOnlyThroughItsClock(t *testing.T) {
	direct := map[string]bool{"time.Now": true, "time.Since": true, "time.Until": true, "time.After": true, "time.AfterFunc": true,
		"time.NewTimer": true, "time.NewTicker": true, "time.Tick": true, "time.Sleep": true, "record.SleepCtx": true}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset, walked := token.NewFileSet(), 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "clock.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		walked++
		ast.Inspect(f, func(n ast.Node) bool {
			// A reference counts, not only a call: time.Now passed as a
			// func value reads the machine's clock as surely.
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && direct[x.Name+"."+sel.Sel.Name] {
					t.Errorf("%s: %s.%s reads the machine's clock; go through the member's clock (clock.go)", fset.Position(sel.Pos()), x.Name, sel.Sel.Name)
				}
			}
			return true
		})
	}
	assert.GreaterOrEqual(t, walked, 5, "the walk reads the watcher's files")
}

// The arrows point down: the watcher imports record, backends and kube,
// never runner (its parent, which imports it) nor anything above runner.
func TestTheWatcherImportsNothingAboveIt(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	const mod = "github.com/bridge-runner/bridge-runner/"
	above := []string{mod + "runner", mod + "operator", mod + "agent", mod + "cmd"}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, a := range above {
				if (p == a || strings.HasPrefix(p, a+"/")) && !strings.HasPrefix(p, mod+"runner/watcher") {
					t.Errorf("%s imports %s: the watcher is beneath runner; pass what it needs in (MemberConfig)", name, p)
				}
			}
		}
	}
}
