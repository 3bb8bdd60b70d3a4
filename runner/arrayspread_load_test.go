package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/record"
)

// tasksOn is how many array tasks fake cluster f was given in all.
func tasksOn(f *fake.Backend) int {
	n := 0
	for _, a := range f.Arrays() {
		n += a.Count()
	}
	return n
}

// Two spreads placed at once, through the real kube-apiserver's shared
// load: the one that counts second sees the first one's shares on both
// clusters (a with 16 CPUs free took 13 of its 16 tasks, b with 4 free
// took 3) and spreads over what is left (3 and 1 free: 12 and 4), as
// single placements see each other's. Before, a spread counted nothing
// and both went 13/3, piling 26 tasks onto a's 16 CPUs.
func TestSpreadCountsItsSharesIntoTheSharedLoad(t *testing.T) {
	tc := newTwoClusters(t)
	tc.withCredentials(t)
	tc.a.SetLoad(loadOf(16, 16, 0), nil)
	tc.b.SetLoad(loadOf(4, 16, 0), nil)
	base := testkube.RecordStore(t)
	shares := make([][]record.Share, 2)
	var wg sync.WaitGroup
	for i := range shares {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := fmt.Sprintf("spread-load-%d", i)
			iv := tc.invoker(record.PolicySpread)
			iv.Spec.Array = "0-15"
			iv.JobName, iv.Holder = job, job
			iv.Store = &record.ConfigMapStore{Client: base.Client, Namespace: base.Namespace, Name: record.ConfigMapName(job)}
			iv.Watch.Off = true
			if !assert.NoError(t, iv.Run(context.Background()), job) {
				return
			}
			rec, err := iv.Store.Get(context.Background())
			require.NoError(t, err)
			p, err := record.ParsePlaced(rec.Data[record.KeyPlacement])
			require.NoError(t, err)
			shares[i] = p.Shares
		}()
	}
	wg.Wait()
	t.Logf("shares: %v", shares)
	assert.ElementsMatch(t, [][]record.Share{
		{{Target: "a", Backend: "fakea", Indexes: "0-12", Tasks: 13}, {Target: "b", Backend: "fakeb", Indexes: "13-15", Tasks: 3}},
		{{Target: "a", Backend: "fakea", Indexes: "0-11", Tasks: 12}, {Target: "b", Backend: "fakeb", Indexes: "12-15", Tasks: 4}},
	}, shares, "the second spread sees the first's shares on both clusters")
	assert.Equal(t, 25, tasksOn(tc.a), "a ran what the spreads gave it")
	assert.Equal(t, 7, tasksOn(tc.b), "b ran what the spreads gave it")
}
