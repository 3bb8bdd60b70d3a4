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
