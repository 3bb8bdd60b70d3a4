package runner

import (
	"math"
	"sort"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// Spreading an array over several targets (the groundwork of the
// `spread` placement policy, issue 43): each target gets a share of the
// array's tasks in proportion to how many of them it can start now, its
// free CPUs over one task's CPUs, as its probe (or its agent's published
// load) told. A target that can start none gets none, unless none can
// start any: then the shares follow how soon each target drains what it
// already has, its CPUs over the CPU-seconds pending and running there.
// A share is a contiguous run of the array's indexes, so that each
// target's tasks split past its own limit into chunks as today.

// taskCPUs is what one task of arr asks for at a target whose probe gave
// l: the probe's JobCPUs count every task that may run at once.
func taskCPUs(l backends.Load, arr backends.Array) int {
	par := arr.Count()
	if arr.MaxParallel > 0 && arr.MaxParallel < par {
		par = arr.MaxParallel
	}
	if l.JobCPUs <= 0 || par <= 0 {
		return 1
	}
	return max((l.JobCPUs+par-1)/par, 1)
}

// startable is how many of arr's tasks candidate c can start now: 0 for a
// skipped target or one whose free CPUs are unknown.
func startable(c candidate, arr backends.Array) int {
	if c.skip != "" || c.load.FreeCPUs <= 0 {
		return 0
	}
	return c.load.FreeCPUs / taskCPUs(c.load, arr)
}

// drainRate is how fast a target works through what it has, CPUs per
// CPU-second queued or running there: the weight of a target when no
// target can start a task now. 0 when its probe could not tell.
func drainRate(c candidate) float64 {
	l := c.load
	if c.skip != "" || !l.CPUSecondsKnown || l.TotalCPUs <= 0 {
		return 0
	}
	return float64(l.TotalCPUs) / float64(1+l.PendingCPUSeconds+l.RunningCPUSeconds)
}

// spreadWeights are the candidates' weights: what each can start now;
// else, when none can start any, how fast each drains; else (no probe
// told either) everything to the first target that can take the job.
func spreadWeights(cands []candidate, arr backends.Array) []float64 {
	w := make([]float64, len(cands))
	sum := 0.0
	for i, c := range cands {
		w[i] = float64(startable(c, arr))
		sum += w[i]
	}
	if sum > 0 {
		return w
	}
	for i, c := range cands {
		w[i] = drainRate(c)
		sum += w[i]
	}
	if sum > 0 {
		return w
	}
	if i := firstFit(cands); i >= 0 {
		w[i] = 1
	}
	return w
}

// apportion divides n among the weights by the largest remainder: each
// part is n·w/Σw rounded down, and what rounding left goes one by one to
// the largest fractions (ties to the first listed). The parts sum to n
// exactly, and a zero weight gets nothing (all zero: all parts are 0).
func apportion(n int, w []float64) []int {
	parts := make([]int, len(w))
	sum := 0.0
	for _, x := range w {
		sum += max(x, 0)
	}
	if sum <= 0 || n <= 0 {
		return parts
	}
	frac := make([]float64, len(w))
	left := n
	for i, x := range w {
		exact := float64(n) * max(x, 0) / sum
		parts[i] = int(math.Floor(exact))
		frac[i] = exact - float64(parts[i])
		left -= parts[i]
	}
	order := make([]int, 0, len(w))
	for i, x := range w {
		if x > 0 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return frac[order[a]] > frac[order[b]] })
	for k := 0; left > 0; k++ {
		parts[order[k%len(order)]]++
		left--
	}
	return parts
}

// takeTasks splits arr into consecutive runs of counts[i] tasks each, in
// index order: the i-th run is empty (no Ranges) when counts[i] is 0.
// The runs keep arr's parallel limit and chunk size; counts sum to
// arr.Count().
func takeTasks(arr backends.Array, counts []int) []backends.Array {
	out := make([]backends.Array, len(counts))
	r := 0
	next := 0 // the first index of arr.Ranges[r] not yet taken
	if len(arr.Ranges) > 0 {
		next = arr.Ranges[0].First
	}
	for i, n := range counts {
		out[i] = backends.Array{MaxParallel: arr.MaxParallel, Chunk: arr.Chunk}
		for n > 0 && r < len(arr.Ranges) {
			last := min(arr.Ranges[r].Last, next+n-1)
			out[i].Ranges = append(out[i].Ranges, backends.IndexRange{First: next, Last: last})
			n -= last - next + 1
			if last == arr.Ranges[r].Last {
				r++
				if r < len(arr.Ranges) {
					next = arr.Ranges[r].First
				}
			} else {
				next = last + 1
			}
		}
	}
	return out
}

// spreadShares is the spread of arr over the candidates: the targets that
// get tasks, each with its indexes, in the targets' order. With no
// candidate able to take the job it is choose's error (transient when a
// target did not answer, else invalid input).
func spreadShares(cands []candidate, arr backends.Array) ([]record.Share, error) {
	if _, err := choose(record.PolicyOrdered, cands); err != nil {
		return nil, err
	}
	counts := apportion(arr.Count(), spreadWeights(cands, arr))
	var shares []record.Share
	for i, part := range takeTasks(arr, counts) {
		if counts[i] == 0 {
			continue
		}
		shares = append(shares, record.Share{Target: cands[i].target.Name, Indexes: part.Indexes(), Tasks: counts[i]})
	}
	return shares, nil
}
