package runner

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

func mustArray(t *testing.T, s string) backends.Array {
	t.Helper()
	a, err := backends.ParseArray(s)
	require.NoError(t, err)
	return a
}

// arrayLoad is a probe of an array of n tasks at cpus CPUs each, all
// allowed at once (the probes' JobCPUs count every task together).
func arrayLoad(free, total, n, cpus int) backends.Load {
	l := load(free, total, 0)
	l.JobCPUs = n * cpus
	return l
}

func TestSpreadSharesFollowWhatEachTargetCanStart(t *testing.T) {
	arr := mustArray(t, "0-19")
	for _, c := range []struct {
		name  string
		cands []candidate
		want  []record.Share
	}{
		{"free CPUs 12 and 4 give 15 and 5", cands(arrayLoad(12, 16, 20, 1), arrayLoad(4, 8, 20, 1)),
			[]record.Share{{Target: "a", Indexes: "0-14", Tasks: 15}, {Target: "b", Indexes: "15-19", Tasks: 5}}},
		{"free CPUs count in tasks: 8 free at 2 CPUs a task is 4 tasks", cands(arrayLoad(8, 8, 20, 2), arrayLoad(4, 8, 20, 1)),
			[]record.Share{{Target: "a", Indexes: "0-9", Tasks: 10}, {Target: "b", Indexes: "10-19", Tasks: 10}}},
		{"a target that can start none gets none", cands(arrayLoad(0, 16, 20, 1), arrayLoad(3, 8, 20, 1)),
			[]record.Share{{Target: "b", Indexes: "0-19", Tasks: 20}}},
		{"a skipped target gets none", append(cands(arrayLoad(6, 8, 20, 1)), candidate{target: record.Target{Name: "z"}, skip: "did not answer", down: true}),
			[]record.Share{{Target: "a", Indexes: "0-19", Tasks: 20}}},
		{"none can start any: by how fast each drains its CPU-seconds", cands(drainLoad(8, 7999), drainLoad(8, 2399)),
			[]record.Share{{Target: "a", Indexes: "0-4", Tasks: 5}, {Target: "b", Indexes: "5-19", Tasks: 15}}},
		{"none can start any and no probe tells its backlog: the first that fits", cands(load(0, 4, 9), load(0, 4, 1)),
			[]record.Share{{Target: "a", Indexes: "0-19", Tasks: 20}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := spreadShares(c.cands, arr)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// drainLoad is a full target with queued CPU-seconds.
func drainLoad(total int, queued int64) backends.Load {
	l := load(0, total, 3)
	l.CPUSecondsKnown, l.PendingCPUSeconds = true, queued
	return l
}

func TestSpreadSharesRefuseWhenNoTargetCanTakeTheJob(t *testing.T) {
	arr := mustArray(t, "0-9")
	down := []candidate{{target: record.Target{Name: "a"}, skip: "did not answer", down: true}}
	_, err := spreadShares(down, arr)
	assert.True(t, errors.Is(err, backends.ErrTransient), "a target that did not answer may answer a retry: %v", err)
	refused := []candidate{{target: record.Target{Name: "a"}, skip: "does not fit: 64 CPUs"}}
	_, err = spreadShares(refused, arr)
	assert.True(t, errors.Is(err, backends.ErrInvalid), "no target fits: invalid input: %v", err)
}

// Every task goes to exactly one target, whatever the loads and the
// array's shape: the shares' indexes are disjoint, cover the array, and
// their counts sum to its tasks.
func TestSpreadSharesCoverEveryTaskOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 1))
	for round := 0; round < 500; round++ {
		var ranges []backends.IndexRange
		next := rng.IntN(3)
		for n := 1 + rng.IntN(4); n > 0; n-- {
			last := next + rng.IntN(40)
			ranges = append(ranges, backends.IndexRange{First: next, Last: last})
			next = last + 2 + rng.IntN(5)
		}
		arr := backends.Array{Ranges: ranges, MaxParallel: rng.IntN(5)}
		cs := make([]candidate, 1+rng.IntN(4))
		for i := range cs {
			cs[i] = candidate{target: record.Target{Name: string(rune('a' + i))}, load: arrayLoad(rng.IntN(20), 20, arr.Count(), 1+rng.IntN(3))}
		}
		shares, err := spreadShares(cs, arr)
		require.NoError(t, err)
		seen := map[int]string{}
		total := 0
		for _, s := range shares {
			require.Positive(t, s.Tasks, "a share with no task is left out")
			part := mustArray(t, s.Indexes)
			require.Equal(t, s.Tasks, part.Count())
			total += s.Tasks
			for _, r := range part.Ranges {
				for i := r.First; i <= r.Last; i++ {
					require.Empty(t, seen[i], "index %d given to %s and %s", i, seen[i], s.Target)
					seen[i] = s.Target
				}
			}
		}
		require.Equal(t, arr.Count(), total, "round %d: %v", round, arr.Indexes())
		for _, r := range arr.Ranges {
			for i := r.First; i <= r.Last; i++ {
				require.NotEmpty(t, seen[i], "index %d of %s given to no target", i, arr.Indexes())
			}
		}
	}
}

func TestApportionSumsExactlyAndFavoursNoZeroWeight(t *testing.T) {
	assert.Equal(t, []int{7, 0, 3}, apportion(10, []float64{2.2, 0, 1}))
	assert.Equal(t, []int{1, 1, 0}, apportion(2, []float64{1, 1, 1}), "ties go to the first listed")
	assert.Equal(t, []int{0, 0}, apportion(5, []float64{0, 0}))
	assert.Equal(t, []int{2000, 0}, apportion(2000, []float64{1, 0}))
}

// job.log of a spread array names each task's cluster: the placed
// target's chunks as well as the others'.
func TestJobLogNamesEachTasksCluster(t *testing.T) {
	arr := mustArray(t, "0-3")
	a := &arrayBackend{arr: arr, home: "a", peers: map[string]*peer{"b": {}}}
	a.tasks = map[int]backends.Status{0: {State: backends.Done}, 1: {State: backends.Done}, 2: {State: backends.Done}, 3: {State: backends.Done}}
	a.last = foldArray(arr, a.tasks)
	text := jobLogText("10@0+b:10@2", a, func(int) string { return "-" })
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	require.Len(t, lines, 2+4, text)
	assert.Equal(t, []string{
		"0\ta:10\t0\tDONE\t-\t-\t-",
		"1\ta:10\t1\tDONE\t-\t-\t-",
		"2\tb:10\t0\tDONE\t-\t-\t-",
		"3\tb:10\t1\tDONE\t-\t-\t-",
	}, lines[2:], "job 10 on a and job 10 on b are told apart")
}

// A spread array's chunk size is the smallest limit of its targets: the
// placed cluster's agent, which knows only its own, does not set it.
func TestSpreadIgnoresOneClustersPublishedLimit(t *testing.T) {
	a := &arrayBackend{arr: mustArray(t, "0-9"), limiter: limitOf(1001), shares: []record.Share{{Target: "a"}, {Target: "b"}}}
	assert.False(t, a.needsLimit())
	assert.False(t, a.useLimit(1001))
	assert.Zero(t, a.size)
}

type limitOf int

func (l limitOf) ArrayLimit(context.Context) (int, error) { return int(l), nil }

// "%M" bounds the tasks at once over all clusters together, not on each.
func TestSpreadKeepsTheParallelBoundOverAllClusters(t *testing.T) {
	shares := []record.Share{{Target: "a", Indexes: "0-14", Tasks: 15}, {Target: "b", Indexes: "15-19", Tasks: 5}}
	assert.Equal(t, []int{6, 2}, shareParallel(8, shares))
	assert.Equal(t, []int{0, 0}, shareParallel(0, shares), "no bound stays none")
	assert.Equal(t, []int{1, 1}, shareParallel(1, shares), "one each at least")

	a := &arrayBackend{arr: mustArray(t, "0-19%8"), size: 100, shares: shares, peers: map[string]*peer{"b": {}}}
	chunks, err := a.plan(context.Background())
	require.NoError(t, err)
	require.Len(t, chunks, 2)
	assert.Equal(t, 8, chunks[0].MaxParallel+chunks[1].MaxParallel)
}
