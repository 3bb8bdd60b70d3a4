package watcher

import (
	"context"
	"fmt"
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

// passingClock is a reader's clock whose timers fire at once, their time
// having passed by it, after during (what others did meanwhile) ran.
type passingClock struct {
	fakeClock
	during func()
}

func (c *passingClock) NewTimer(d time.Duration) Timer {
	if c.during != nil {
		c.during()
	}
	c.add(d)
	fired := make(chan time.Time, 1)
	fired <- c.Now()
	return firedTimer(fired)
}

type firedTimer chan time.Time

func (f firedTimer) C() <-chan time.Time { return f }
func (firedTimer) Stop()                 {}

// Cleanup's collection of a lapsed lease judges it by the reader's clock,
// as the lease itself is judged: a lease is collected once nobody wrote it
// for one TTL by the reader's clock since it read it, whatever the
// holder's clock wrote into it. A holder an hour ahead, dead, is
// collected; a holder an hour behind, renewing, keeps its lease. (Judged
// by the holder's written times, the first stayed an hour and the second
// was deleted under its live watcher.)
func TestLeaseCleanupIsJudgedByTheReadersClockAcrossAnHour(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		for _, live := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/live=%v", skew, live), func(t *testing.T) {
				ctx := context.Background()
				s := testkube.RecordStore(t)
				reader := &passingClock{fakeClock: fakeClock{t: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)}}
				holder := &fakeClock{t: reader.Now().Add(skew)}
				group := testCluster.Group()
				held := groupLease(s, group, testKey, clockOf(holder))
				v, ok := held.take(ctx, leaseState{}, "holder")
				require.True(t, ok)
				v, renewed, err := held.renew(ctx, v, "holder", 0)
				require.NoError(t, err)
				require.True(t, renewed)
				if live {
					reader.during = func() { // a renewal within the TTL the reader waits
						holder.add(leaseTTL / 2)
						_, renewed, err := held.renew(ctx, v, "holder", 0)
						assert.NoError(t, err)
						assert.True(t, renewed)
					}
				}

				collector := groupLease(s, group, nil, clockOf(reader))
				collected, err := collector.collectLapsed(ctx)
				require.NoError(t, err)
				st, err := held.read(ctx)
				require.NoError(t, err)
				if live {
					assert.False(t, collected)
					assert.Equal(t, "holder", st.holder, "a lease renewed within the TTL stays, whatever its writer's clock")
				} else {
					assert.True(t, collected)
					assert.Empty(t, st.version, "a lease nobody wrote for a TTL by the reader's clock is collected")
				}
			})
		}
	}
}
