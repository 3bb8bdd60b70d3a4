package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
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
// candidate able to take the job it is noTarget's error (transient when a
// target did not answer, else invalid input).
func spreadShares(cands []candidate, arr backends.Array) ([]record.Share, error) {
	if firstFit(cands) < 0 {
		return nil, noTarget(cands)
	}
	counts := apportion(arr.Count(), spreadWeights(cands, arr))
	var shares []record.Share
	for i, part := range takeTasks(arr, counts) {
		if counts[i] == 0 {
			continue
		}
		shares = append(shares, record.Share{Target: cands[i].target.Name, Backend: cands[i].target.Backend, Indexes: part.Indexes(), Tasks: counts[i]})
	}
	return shares, nil
}

// peer is one more target of a spread array: its backend, and the
// jobproperties its chunks are submitted with.
type peer struct {
	be      backends.Backend
	as      backends.ArraySubmitter
	props   json.RawMessage
	cluster cluster.Cluster // the target's: its array limit is asked once per cluster
}

// A spread array's id is its chunks' as for a chunked one; a chunk on a
// target other than the placed one (record.Placed.Target, whose backend
// is the array's own) is named "target:id", so that Status, Cancel and
// cleanup reach each chunk on its own cluster from the id alone, and no
// log reader of the placed target takes another cluster's job id for one
// of its own.

// qualify is chunk k's id as the array's id names it.
func (a *arrayBackend) qualify(k int, id string) string {
	if k < len(a.targets) && a.targets[k] != "" {
		return a.targets[k] + ":" + id
	}
	return id
}

// route is the backend that runs the chunk id names, and its id there.
func (a *arrayBackend) route(id string) (backends.Backend, backends.ArraySubmitter, string) {
	if t, raw, ok := strings.Cut(id, ":"); ok {
		if p := a.peers[t]; p != nil {
			return p.be, p.as, raw
		}
	}
	return a.Backend, a.as, id
}

// chunkBackend is the backend chunk k goes to, and the jobproperties of
// its target (nil: the job's own, as placed).
func (a *arrayBackend) chunkBackend(k int) (backends.Backend, json.RawMessage) {
	if k < len(a.targets) {
		if p := a.peers[a.targets[k]]; p != nil {
			return p.be, p.props
		}
	}
	return a.Backend, nil
}

// spreadPlan is a spread array's chunks: each share's tasks split past
// the size (the record's once a submit fixed it, else the key's "/N",
// else the smallest limit of the targets), in the shares' order, each
// chunk with its tasks from 0 and the offset of its first index (so a
// share that fits is one chunk, and a task's index is found from its
// chunk alone). Called with a.mu held.
func (a *arrayBackend) spreadPlan(ctx context.Context) ([]backends.Array, error) {
	size := a.size
	if size == 0 {
		size = a.arr.Chunk
	}
	if size == 0 {
		var err error
		if size, err = a.smallestLimit(ctx); err != nil {
			return nil, err
		}
	}
	var chunks []backends.Array
	var targets []string
	par := shareParallel(a.arr.MaxParallel, a.shares)
	for i, s := range a.shares {
		part, err := backends.ParseArray(s.Indexes)
		if err != nil || part.Count() != s.Tasks {
			return nil, backends.Invalid(record.KeyPlacement, "names a share bridge-runner did not write; the record was edited: cleanup, then run the step again")
		}
		part.MaxParallel = par[i]
		for _, c := range part.Chunks(size) {
			chunks = append(chunks, rebase(c))
			targets = append(targets, a.peerName(s.Target))
		}
	}
	a.size, a.chunks, a.targets = size, chunks, targets
	return chunks, nil
}

// peerName is "" for the array's own target, else t.
func (a *arrayBackend) peerName(t string) string {
	if a.peers[t] == nil {
		return ""
	}
	return t
}

// smallestLimit is the smallest array limit of the spread's targets (the
// largest index count when none sets one): one size for every chunk, so
// that the record's one size line splits the array again the same way.
// Each target's limit is its cluster's, asked once per cluster.
func (a *arrayBackend) smallestLimit(ctx context.Context) (int, error) {
	size := backends.MaxArrayIndex + 1
	targets := []peer{{be: a.Backend, cluster: a.cluster}}
	for _, p := range a.peers {
		targets = append(targets, *p)
	}
	for _, t := range targets {
		l, ok := t.be.(backends.ArrayLimiter)
		if !ok {
			continue
		}
		n, err := t.cluster.ArrayLimit(ctx, l)
		if err != nil {
			return 0, fmt.Errorf("reading the cluster's array limit: %w", err)
		}
		if n > 0 {
			size = min(size, n)
		}
	}
	return size, nil
}

// rebase is chunk c with its indexes from 0 and its first index as its
// offset (Chunks leaves a chunk that fits as it was, at offset 0).
func rebase(c backends.Array) backends.Array {
	if c.Offset != 0 || len(c.Ranges) == 0 || c.Ranges[0].First == 0 {
		return c
	}
	first := c.Ranges[0].First
	rs := make([]backends.IndexRange, len(c.Ranges))
	for i, r := range c.Ranges {
		rs[i] = backends.IndexRange{First: r.First - first, Last: r.Last - first}
	}
	c.Ranges, c.Offset = rs, first
	return c
}

// addPeers makes a the spread array its record's placement names: the
// other targets' backends, built as the placed one is, each with its own
// credentials. Every target must take an array's offset (an
// ArrayLimiter): a share's tasks keep their indexes in the user's array.
func (r *run) addPeers(a *arrayBackend, desc *record.Description) error {
	if r.rec == nil {
		return nil
	}
	p, err := record.ParsePlaced(r.rec.Data[record.KeyPlacement])
	if err != nil || p == nil || len(p.Shares) < 2 {
		return err
	}
	a.shares, a.home, a.peers = p.Shares, p.Target, map[string]*peer{}
	if a.limiter == nil {
		return backends.Invalid(record.KeyPlacement, "spread needs backends whose arrays take an offset (Slurm); target %s's backend %s does not", p.Target, desc.Backend)
	}
	for _, s := range p.Shares {
		if s.Target == p.Target {
			continue
		}
		d := *desc
		if err := d.Place(record.Placed{Target: s.Target, Backend: s.Backend}); err != nil {
			return err
		}
		c, err := r.clusterOf(&d)
		if err != nil {
			return err
		}
		be, err := r.backendFor(c)
		if err != nil {
			return err
		}
		as, ok := be.(backends.ArraySubmitter)
		a.peers[s.Target] = &peer{be: be, as: as, props: d.Properties, cluster: c}
		if _, lim := be.(backends.ArrayLimiter); !ok || !lim {
			return backends.Invalid(record.KeyPlacement, "spread needs backends whose arrays take an offset (Slurm); target %s's backend %s does not", s.Target, s.Backend)
		}
	}
	return nil
}

// targetOf is the target the step's outputs name: the placed one, or a
// spread array's targets, "a,b".
func (r *run) targetOf(desc *record.Description) string {
	if r.arr == nil || len(r.arr.shares) == 0 {
		return desc.Target
	}
	names := make([]string, len(r.arr.shares))
	for i, s := range r.arr.shares {
		names[i] = s.Target
	}
	return strings.Join(names, ",")
}

// chooseSpread probes the targets and spreads the array over them: the
// candidates, the one placed (the first share's target, whose backend is
// the array's own) and the shares (none when one target takes it all).
// Where the targets' figures are shared, each share is counted into its
// cluster's, as choose counts a single job, so that a placement right
// after this one sees the clusters as full as the spread made them; if
// any cluster's figures moved meanwhile, the shares counted are taken
// back and it spreads again on the new figures.
func (r *run) chooseSpread(ctx context.Context, desc *record.Description) ([]candidate, int, []record.Share, error) {
	for round := 1; ; round++ {
		cands := r.probeTargets(ctx, desc)
		shares, err := spreadShares(cands, *desc.Array)
		if err != nil {
			return nil, -1, nil, err
		}
		if round < maxChoices && !reserveShares(context.WithoutCancel(ctx), cands, shares, *desc.Array) {
			continue
		}
		choice := 0
		for i, c := range cands {
			if c.target.Name == shares[0].Target {
				choice = i
			}
		}
		if len(shares) == 1 {
			shares = nil
		}
		return cands, choice, shares, nil
	}
}

// reserveShares counts each share into its target's shared figures (see
// loadShare.reserve), all or none: false when one target's moved since
// they were read, after taking back the shares already counted.
func reserveShares(ctx context.Context, cands []candidate, shares []record.Share, arr backends.Array) bool {
	par := shareParallel(arr.MaxParallel, shares)
	var counted []*loadShare
	var jobs []backends.Load
	for i, s := range shares {
		for _, c := range cands {
			if c.target.Name != s.Target || c.share == nil {
				continue
			}
			job := shareLoad(c.load, arr, s.Tasks, par[i])
			// A spread is chosen over all targets at once: any move of
			// one's figures chooses it again.
			if !c.share.reserve(ctx, job, func(shareEntry) bool { return false }) {
				for k, sh := range counted {
					sh.release(ctx, jobs[k])
				}
				return false
			}
			counted, jobs = append(counted, c.share), append(jobs, job)
		}
	}
	return true
}

// shareLoad is what a share of tasks of arr asks of a target whose probe
// gave l: its tasks' CPUs, as many at once as its part of the parallel
// bound (par, 0: no bound) lets run, and its part of the array's
// CPU-seconds (0 when the probe could not tell them).
func shareLoad(l backends.Load, arr backends.Array, tasks, par int) backends.Load {
	running := tasks
	if par > 0 {
		running = min(running, par)
	}
	job := backends.Load{JobCPUs: running * taskCPUs(l, arr)}
	if n := arr.Count(); l.JobCPUSeconds > 0 && n > 0 {
		job.JobCPUSeconds = l.JobCPUSeconds * int64(tasks) / int64(n)
	}
	return job
}

// sharesSummary is a spread's shares in one line for the log, "a 15, b 5"
// ("" when the job went to one target).
func sharesSummary(shares []record.Share) string {
	parts := make([]string, len(shares))
	for i, s := range shares {
		parts[i] = s.Target + " " + strconv.Itoa(s.Tasks)
	}
	return strings.Join(parts, ", ")
}

// chunkName is how job.log names the chunk id: with its target's name
// when the array is spread ("a:123", "b:77"), so each task's line says
// which cluster ran it.
func (a *arrayBackend) chunkName(id string) string {
	if a.home == "" || strings.Contains(id, ":") {
		return id
	}
	return a.home + ":" + id
}

// shareParallel divides the array's "%M" (at most M tasks at once) among
// the shares by their tasks, so that all clusters together keep to M: each
// share gets at least one (with fewer than one per target, the bound is
// the number of targets). 0 (no bound) stays 0 everywhere.
func shareParallel(m int, shares []record.Share) []int {
	out := make([]int, len(shares))
	if m <= 0 {
		return out
	}
	w := make([]float64, len(shares))
	for i, s := range shares {
		w[i] = float64(s.Tasks)
	}
	for i, n := range apportion(m, w) {
		out[i] = max(n, 1)
	}
	return out
}

// chunkTasks reads each task's output, and its standard error where the
// backend keeps it apart, from the cluster that ran the task's chunk: a
// spread array's chunk id names its target ("b:77") and is routed as
// Status and Cancel are; any other id is the array's own backend's. A
// cluster whose backend cannot read its tasks' logs has none to give
// (ErrNotFound: job.log says "-").
type chunkTasks struct{ a *arrayBackend }

// taskReader is tr, the array's own backend's TaskLogReader, as the runner
// reads tasks' logs through it: routed to each chunk's cluster when the
// array is spread.
func (a *arrayBackend) taskReader(tr backends.TaskLogReader) backends.TaskLogReader {
	if a == nil || len(a.peers) == 0 {
		return tr
	}
	return chunkTasks{a}
}

func (c chunkTasks) ReadTaskLogs(ctx context.Context, id string, task int, offset int64, w io.Writer) (int64, error) {
	be, _, raw := c.a.route(id)
	tr, ok := be.(backends.TaskLogReader)
	if !ok {
		return offset, fmt.Errorf("array chunk %s: its cluster's backend does not read its tasks' logs: %w", id, backends.ErrNotFound)
	}
	return tr.ReadTaskLogs(ctx, raw, task, offset, w)
}

func (c chunkTasks) ReadTaskErrs(ctx context.Context, id string, task int, offset int64, w io.Writer) (int64, error) {
	be, _, raw := c.a.route(id)
	er, ok := be.(backends.TaskErrReader)
	if !ok {
		return offset, fmt.Errorf("array chunk %s: its standard error is in its output: %w", id, backends.ErrNotFound)
	}
	return er.ReadTaskErrs(ctx, raw, task, offset, w)
}
