package runner_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// spreadTargets: b has a partition of its own, here the tasks it fails,
// so that a chunk submitted with a's properties on b would show.
const spreadTargets = `[{"name":"a","backend":"fakea","resourceURL":"https://a.example.org:6820"},` +
	`{"name":"b","backend":"fakeb","resourceURL":"https://b.example.org:6820","credentials":"b","jobproperties":{"failIndexes":[17]}}]`

// spreadClusters is two fake clusters, a (array limit 10, 12 CPUs free)
// and b (no limit, 4 CPUs free): 20 tasks spread as 15 on a, in two
// chunks, and 5 on b.
func spreadClusters(t *testing.T) (*twoClusters, *stopSubmit) {
	tc := newTwoClusters(t)
	tc.a.ArrayMax = 10
	tc.a.SetLoad(loadOf(12, 16, 0), nil)
	tc.b.SetLoad(loadOf(4, 8, 0), nil)
	stop := &stopSubmit{Backend: tc.b}
	require.NoError(t, tc.reg.Register("fakeb2", func(backends.Config) (backends.Backend, error) { return stop, nil }))
	return tc, stop
}

func (tc *twoClusters) spreadInvoker(props string) *runner.Invoker {
	iv := tc.invoker(record.PolicySpread)
	iv.Spec.Targets = spreadTargets
	iv.Spec.Array = "0-19"
	iv.Spec.JobProperties = props
	return iv
}

func TestSpreadRunsEachShareOnItsClusterAndMergesThem(t *testing.T) {
	tc, _ := spreadClusters(t)
	iv := tc.spreadInvoker(`{"run":"50ms","failIndexes":[3]}`)
	require.NoError(t, iv.Run(context.Background()))
	res := iv.Result()
	assert.Equal(t, "FAILED", res.Status, "one final state for both clusters' tasks")
	assert.Equal(t, "DONE=18 FAILED=2", res.ArrayCounts)
	assert.Equal(t, "3,17", res.ArrayFailed, "b ran its tasks with its own jobproperties")
	assert.Equal(t, "a,b", res.Target, "the outputs name every target used")
	assert.Equal(t, "fake-1@0+fake-2@10+b:fake-1@15", res.ID)
	assert.Equal(t, map[string]backends.Array{
		"fake-1": {Ranges: []backends.IndexRange{{First: 0, Last: 9}}, Offset: 0},
		"fake-2": {Ranges: []backends.IndexRange{{First: 0, Last: 4}}, Offset: 10},
	}, tc.a.Arrays(), "a's share split at a's limit")
	assert.Equal(t, map[string]backends.Array{
		"fake-1": {Ranges: []backends.IndexRange{{First: 0, Last: 4}}, Offset: 15},
	}, tc.b.Arrays(), "b's share keeps the user's indexes through its offset")

	d := tc.record()
	assert.Equal(t, "size 10\n0-9 fake-1\n10-14 fake-2\n15-19 b:fake-1", d[record.KeyArrayChunks])
	p, err := record.ParsePlaced(d[record.KeyPlacement])
	require.NoError(t, err)
	assert.Equal(t, []record.Share{{Target: "a", Backend: "fakea", Indexes: "0-14", Tasks: 15}, {Target: "b", Backend: "fakeb", Indexes: "15-19", Tasks: 5}}, p.Shares)
	assert.Equal(t, "a", p.Target)
}

// Killed: every chunk on every cluster is cancelled.
func TestSpreadKilledCancelsOnEveryCluster(t *testing.T) {
	tc, _ := spreadClusters(t)
	ctx, cancel := context.WithCancel(context.Background())
	iv := tc.spreadInvoker(`{"run":"60s"}`)
	done := make(chan error, 1)
	go func() { done <- iv.Run(ctx) }()
	require.Eventually(t, func() bool {
		rec, err := tc.store.Get(context.Background())
		return err == nil && rec.Data[record.KeyID] != ""
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	<-done // a KILLED job is the run's outcome, not its error
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.Equal(t, "KILLED=20", iv.Result().ArrayCounts)
	assert.Equal(t, 2, tc.a.Count("cancel"), "a's two chunks")
	assert.Equal(t, 1, tc.b.Count("cancel"), "b's chunk, on b")
}

// The moments between chunks on different clusters at which an invoke
// may die (runner.ChunkCrashPoints), here as a submit to b that stops the
// run: b's chunk made and not recorded ("after-chunk-submit"), or a's
// chunks recorded and b's not submitted ("after-chunk-id"). The next
// invoke, and cleanup, find b's chunk on b by its key: never lost, never
// submitted twice.
func TestSpreadStoppedBetweenClustersNeitherLosesNorDoublesAChunk(t *testing.T) {
	for _, point := range runner.ChunkCrashPoints {
		for _, then := range []string{"invoke", "cleanup"} {
			t.Run(point+"/"+then, func(t *testing.T) {
				tc, stop := spreadClusters(t)
				stop.arm(point == "after-chunk-submit")
				iv := tc.spreadInvoker(`{"run":"50ms"}`)
				iv.Spec.Targets = spreadTargetsVia("fakeb2")
				err := iv.Run(context.Background())
				require.Error(t, err)
				assert.NotErrorIs(t, err, backends.ErrInvalid, "chunks were submitted: not exit 2")
				d := tc.record()
				assert.Equal(t, "size 10\n0-9 fake-1\n10-14 fake-2", d[record.KeyArrayChunks], "a's chunks are recorded, b's is not")
				made := 0
				if point == "after-chunk-submit" {
					made = 1
				}
				require.Equal(t, made, tc.b.Count("submit"))
				if then == "cleanup" {
					c := tc.cleaner()
					c.Backend.Credentials = runner.DirCredentials{Dir: tc.creds, Secrets: &runner.Secrets{}}
					res, err := c.Run(context.Background())
					require.NoError(t, err)
					assert.Equal(t, 2, tc.a.Count("cancel"))
					assert.Equal(t, made, tc.b.Count("cancel"), "b's chunk, if made, is found on b and cancelled: %s", res.ID)
					return
				}
				again := tc.spreadInvoker(`{"run":"50ms"}`)
				again.Spec.Targets = iv.Spec.Targets
				require.NoError(t, again.Run(context.Background()))
				assert.Equal(t, "DONE=20", again.Result().ArrayCounts)
				assert.Equal(t, 2, tc.a.Count("submit"), "a's chunks are not submitted again")
				assert.Equal(t, 1, tc.b.Count("submit"), "b's chunk exactly once")
				assert.Equal(t, "fake-1@0+fake-2@10+b:fake-1@15", again.Result().ID)
			})
		}
	}
}

func spreadTargetsVia(bBackend string) string {
	return `[{"name":"a","backend":"fakea","resourceURL":"https://a.example.org:6820"},` +
		`{"name":"b","backend":"` + bBackend + `","resourceURL":"https://b.example.org:6820","credentials":"b"}]`
}

// A spread needs an array: without one it is refused as input, before
// anything is probed.
func TestSpreadWithoutAnArrayIsRefused(t *testing.T) {
	tc, _ := spreadClusters(t)
	iv := tc.invoker(record.PolicySpread)
	err := iv.Run(context.Background())
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "placement")
	assert.Contains(t, err.Error(), "array key")
	assert.Zero(t, tc.a.Count("probe")+tc.b.Count("probe"))
}

// stopSubmit is cluster b whose next array submit stops the run as a
// crash would: with the chunk made (the answer lost with the invoker) or
// before it is sent.
type stopSubmit struct {
	*fake.Backend
	mu     sync.Mutex
	armed  bool
	create bool
}

func (s *stopSubmit) arm(create bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.create = true, create
}

func (s *stopSubmit) SubmitArray(ctx context.Context, j backends.Job, a backends.Array) (string, error) {
	s.mu.Lock()
	armed, create := s.armed, s.create
	s.armed = false
	s.mu.Unlock()
	if !armed {
		return s.Backend.SubmitArray(ctx, j, a)
	}
	if create {
		if _, err := s.Backend.SubmitArray(ctx, j, a); err != nil {
			return "", err
		}
	}
	return "", errors.New("the invoker died here (test)")
}
