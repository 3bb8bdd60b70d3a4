package runner_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/record"
)

// Many steps of one process on one cluster (invokes in goroutines, as the
// benchmarks run hundreds) share the process's book of clusters: the
// cluster's array limit is asked once for all of them, as its agent asks
// discovery once, and every step splits its array by it. Without a book
// each step asks for itself (as each did before the cluster carried it).
func TestArrayLimitIsAskedOncePerCluster(t *testing.T) {
	const steps = 12
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.ArrayMax = 4
			var book *cluster.Book
			if shared {
				book = cluster.NewBook()
			}
			var wg sync.WaitGroup
			for i := range steps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					spec := h.spec(`{"run":"50ms"}`)
					spec.Array = "0-9"
					iv := h.invoker(spec)
					iv.JobName = fmt.Sprintf("job-%d", i)
					iv.Store = record.NewFileStore(t.TempDir(), iv.JobName)
					iv.Clusters = book
					assert.NoError(t, iv.Run(context.Background()))
					assert.Equal(t, "DONE", iv.Result().Status)
					assert.Equal(t, 3, strings.Count(iv.Result().ID, "@"), "split in chunks of the cluster's limit (4): %s", iv.Result().ID)
				}()
			}
			wg.Wait()
			want := steps
			if shared {
				want = 1
			}
			assert.Equal(t, want, h.fake.Count("arraylimit"), "the cluster's array limit asked")
		})
	}
}

// A spread array asks each of its clusters' limits through the book too:
// steps spreading over a and b ask a once and b once between them, and
// split as each limit says (a's 10: a's share of 15 in two chunks).
func TestSpreadAsksEachClustersArrayLimitOnce(t *testing.T) {
	const steps = 6
	tc, _ := spreadClusters(t)
	tc.b.ArrayMax = 100
	book := cluster.NewBook()
	var wg sync.WaitGroup
	for i := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			iv := tc.spreadInvoker(`{"run":"50ms"}`)
			iv.JobName = fmt.Sprintf("spread-%d", i)
			iv.Store = record.NewFileStore(t.TempDir(), iv.JobName)
			iv.Clusters = book
			assert.NoError(t, iv.Run(context.Background()))
			assert.Equal(t, "a,b", iv.Result().Target)
			assert.Equal(t, "17", iv.Result().ArrayFailed, "b's share ran with b's jobproperties")
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, tc.a.Count("arraylimit"), "a's array limit asked")
	assert.Equal(t, 1, tc.b.Count("arraylimit"), "b's array limit asked")
}
