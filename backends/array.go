package backends

import (
	"context"
	"slices"
	"strconv"
	"strings"
)

// Array is a job array: one job description run as many tasks, each with
// its own index (jobdata's `array` key, e.g. "0-999%50").
type Array struct {
	// Ranges are the tasks' indexes: sorted, disjoint and not adjacent.
	Ranges []IndexRange
	// MaxParallel is how many tasks may run at once; 0 means no limit.
	MaxParallel int
	// Chunk, when set (the key's "/N"), is the most indexes one native
	// array may span: the runner splits the array into native arrays of
	// indexes [o, o+Chunk) each (see Chunks). 0: the cluster's limit
	// (ArrayLimiter) decides.
	Chunk int
	// Offset is added to each of Ranges' indexes to give the index the
	// task's script sees (TaskIndexVar): a chunk past the cluster's limit
	// is submitted as indexes from 0 and told its own. Only backends that
	// are ArrayLimiters take an Offset.
	Offset int
}

// IndexRange is the indexes First to Last, both included.
type IndexRange struct{ First, Last int }

// Count is the number of tasks.
func (a Array) Count() int {
	n := 0
	for _, r := range a.Ranges {
		n += r.Last - r.First + 1
	}
	return n
}

// Max is the highest index (-1 for an empty array).
func (a Array) Max() int {
	if len(a.Ranges) == 0 {
		return -1
	}
	return a.Ranges[len(a.Ranges)-1].Last
}

// Indexes is the ranges as Slurm's --array and LSF's job name write them:
// "0-9,12,20-29".
func (a Array) Indexes() string { return FormatRanges(a.Ranges) }

// String is the array as a scheduler takes it: Indexes, then "%M" when
// MaxParallel is set (Chunk is the runner's, not the scheduler's).
func (a Array) String() string {
	s := a.Indexes()
	if a.MaxParallel > 0 {
		s += "%" + strconv.Itoa(a.MaxParallel)
	}
	return s
}

// FormatRanges writes ranges as "0-9,12,20-29".
func FormatRanges(rs []IndexRange) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.First))
		if r.Last != r.First {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r.Last))
		}
	}
	return b.String()
}

// TaskIndexVar is the environment variable that carries a task's index to
// its script on every backend (beside the backend's own, such as
// SLURM_ARRAY_TASK_ID), so that one script serves every backend.
const TaskIndexVar = "BRIDGE_TASK_INDEX"

// ArraySubmitter is implemented by backends with native job arrays (Slurm
// --array, HTCondor's queue N, LSF's -J "name[1-N]%M"). The runner folds
// the tasks' states into the array's one state and one record.
type ArraySubmitter interface {
	// SubmitArray submits job as one array of a's tasks and returns the
	// array's id, which Status, Cancel (every task) and FindByKey (by
	// job.Key, like Submit) take as they take a job's. Each task's script
	// sees its index in TaskIndexVar. An array the backend cannot take
	// (an index past Slurm's MaxArraySize, say) is refused with an error
	// wrapping ErrInvalid that names the `array` key and the limit.
	SubmitArray(ctx context.Context, job Job, a Array) (string, error)
	// ArrayStatus reports the array's tasks by index, in one query (or a
	// small number that does not grow with the tasks). A task the backend
	// does not list yet (Slurm keeps pending tasks as one record) is left
	// out: the runner counts it as pending.
	ArrayStatus(ctx context.Context, id string) (map[int]Status, error)
}

// ArrayLimiter is implemented by ArraySubmitters that can say how far one
// native array may reach, and that honour Array.Offset.
type ArrayLimiter interface {
	// ArrayLimit is the cluster's limit on one array: indexes 0 to
	// limit-1 (Slurm's MaxArraySize). 0 means the cluster sets none.
	ArrayLimit(ctx context.Context) (int, error)
}

// Chunks splits a into native arrays whose indexes run from 0 to at most
// limit-1, each with the Offset that gives its tasks their indexes in a:
// chunk k starts at the lowest index the earlier ones left, so a sparse
// array needs no more chunks than its indexes call for. An array that
// fits (limit 0, or Max below limit) is one chunk, unchanged.
func (a Array) Chunks(limit int) []Array {
	if limit <= 0 || a.Max() < limit {
		return []Array{a}
	}
	var out []Array
	for _, r := range a.Ranges {
		for first := r.First; first <= r.Last; {
			n := len(out)
			if n == 0 || first > out[n-1].Offset+limit-1 {
				out = append(out, Array{MaxParallel: a.MaxParallel, Offset: first})
				n++
			}
			c := &out[n-1]
			last := min(r.Last, c.Offset+limit-1)
			c.Ranges = append(c.Ranges, IndexRange{first - c.Offset, last - c.Offset})
			first = last + 1
		}
	}
	return out
}

// Bounds of an array key: the record stays small (counts and ranges), and
// no scheduler takes more (Slurm's MaxArraySize is at most 4,000,001).
const (
	MaxArrayTasks = 100_000
	MaxArrayIndex = 4_000_000
)

// ParseArray reads an array key: indexes as "0-999", "1,3,8-15" (any
// order, overlaps merged), then optionally "%M", at most M tasks at once,
// then optionally "/N", native arrays of at most N indexes each.
func ParseArray(s string) (Array, error) {
	var a Array
	rest, chunk, hasChunk := strings.Cut(strings.TrimSpace(s), "/")
	if hasChunk {
		n, err := strconv.Atoi(strings.TrimSpace(chunk))
		if err != nil || n < 1 || n > MaxArrayIndex+1 {
			return a, Invalid("array", "%q: after / comes the most indexes one native array may span (the cluster's MaxArraySize, say), a whole number from 1 to %d (e.g. 0-4999/1000)", s, MaxArrayIndex+1)
		}
		a.Chunk = n
	}
	spec, par, hasPar := strings.Cut(rest, "%")
	if hasPar {
		m, err := strconv.Atoi(par)
		if err != nil || m < 1 {
			return a, Invalid("array", "%q: after %% comes how many tasks may run at once, a whole number of at least 1 (e.g. 0-99%%10)", s)
		}
		a.MaxParallel = m
	}
	var rs []IndexRange
	for _, part := range strings.Split(spec, ",") {
		r, err := parseIndexRange(strings.TrimSpace(part))
		if err != nil {
			return Array{}, Invalid("array", "%q: %v; write indexes as 0-999 or 1,3,8-15, then %%M for at most M at once", s, err)
		}
		rs = append(rs, r)
	}
	a.Ranges = mergeRanges(rs)
	if n := a.Count(); n > MaxArrayTasks {
		return Array{}, Invalid("array", "%q has %d tasks; at most %d fit one array: split the work over several steps", s, n, MaxArrayTasks)
	}
	return a, nil
}

func parseIndexRange(p string) (IndexRange, error) {
	first, last, isRange := strings.Cut(p, "-")
	f, err := parseIndex(first)
	if err != nil {
		return IndexRange{}, err
	}
	l := f
	if isRange {
		if l, err = parseIndex(last); err != nil {
			return IndexRange{}, err
		}
		if l < f {
			return IndexRange{}, errorString("range " + p + " ends before it starts")
		}
	}
	return IndexRange{f, l}, nil
}

func parseIndex(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || len(s) > 7 || strings.HasPrefix(s, "+") {
		return 0, errorString("index " + strconv.Quote(s) + " is not a whole number from 0 to " + strconv.Itoa(MaxArrayIndex))
	}
	if n > MaxArrayIndex {
		return 0, errorString("index " + s + " is over " + strconv.Itoa(MaxArrayIndex))
	}
	return n, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// mergeRanges sorts rs and merges the ranges that overlap or touch.
func mergeRanges(rs []IndexRange) []IndexRange {
	slices.SortFunc(rs, func(a, b IndexRange) int { return a.First - b.First })
	var out []IndexRange
	for _, r := range rs {
		if n := len(out); n > 0 && r.First <= out[n-1].Last+1 {
			out[n-1].Last = max(out[n-1].Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}

// RangesOf is the sorted indexes idx as ranges (for failed tasks' indexes).
func RangesOf(idx []int) []IndexRange {
	rs := make([]IndexRange, 0, len(idx))
	for _, i := range idx {
		rs = append(rs, IndexRange{i, i})
	}
	return mergeRanges(rs)
}
