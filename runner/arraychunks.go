package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// An array past the cluster's limit (Slurm's MaxArraySize, or the key's
// "/N") runs as several native arrays, chunks, under one record. Chunk k
// is submitted with a key of its own (chunkKey), after chunk k-1's id is
// in the record: so at most one chunk can have been submitted and not
// recorded when an invoker dies, and the next one finds it by its key
// before it submits. The record keeps the plan's size and one line per
// chunk (KeyArrayChunks); the job id is the chunks' ids with their
// offsets, "123@0+124@1001", which Status, Cancel and cleanup read without
// the record.

// ChunkCrashPoints are the moments between chunks at which tests kill
// invoke (BRIDGE_CRASH_AT, as CrashPoints): a chunk submitted and not
// recorded, and a chunk recorded before the next is submitted.
var ChunkCrashPoints = []string{"after-chunk-submit", "after-chunk-id"}

// chunkRef is one chunk of a chunked array's id.
type chunkRef struct {
	id     string
	offset int
}

// chunkedID writes refs as a job id: "123@0+124@1001".
func chunkedID(refs []chunkRef) string {
	parts := make([]string, len(refs))
	for i, c := range refs {
		parts[i] = c.id + "@" + strconv.Itoa(c.offset)
	}
	return strings.Join(parts, "+")
}

// parseChunkedID reads an id chunkedID wrote; ok is false for any other.
func parseChunkedID(id string) (refs []chunkRef, ok bool) {
	if !strings.Contains(id, "@") {
		return nil, false
	}
	for _, p := range strings.Split(id, "+") {
		cid, off, found := strings.Cut(p, "@")
		n, err := strconv.Atoi(off)
		if !found || cid == "" || err != nil || n < 0 {
			return nil, false
		}
		refs = append(refs, chunkRef{cid, n})
	}
	return refs, true
}

// logID is the id whose output is the step's live log: a chunked array's
// first chunk (it holds the array's lowest index), else id.
func logID(id string) string {
	if refs, ok := parseChunkedID(id); ok {
		return refs[0].id
	}
	return id
}

// ChunkKey is chunk k's idempotency key, of the array whose key is key: a
// key of its own, so that the array's key finds no chunk alone (backends
// match a key's prefix in job names).
func ChunkKey(key string, k int) string {
	return IdempotencyKey(key + "/chunk/" + strconv.Itoa(k))
}

// plan is the array's chunks: one when it fits the cluster. The size is
// the record's when a submit fixed it, else the key's "/N", else the
// cluster's limit (cluster.Cluster.ArrayLimit: once per cluster when the
// process shares a book of its clusters).
func (a *arrayBackend) plan(ctx context.Context) ([]backends.Array, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.chunks != nil {
		return a.chunks, nil
	}
	if len(a.shares) > 0 {
		return a.spreadPlan(ctx)
	}
	size := a.size
	switch {
	case size > 0:
	case a.arr.Chunk > 0:
		size = a.arr.Chunk
	case a.limiter != nil:
		n, err := a.cluster.ArrayLimit(ctx, a.limiter)
		if err != nil {
			return nil, fmt.Errorf("reading the cluster's array limit: %w", err)
		}
		size = n
	}
	a.size, a.chunks = size, a.arr.Chunks(size)
	return a.chunks, nil
}

// findChunks finds the chunks submitted with key's chunk keys: their id
// ("" when none is found), and whether every chunk was. It stops at the
// first chunk not found.
func (a *arrayBackend) findChunks(ctx context.Context, key string, chunks []backends.Array) (string, bool, error) {
	var refs []chunkRef
	for k, c := range chunks {
		be, _ := a.chunkBackend(k)
		f, ok := be.(backends.Finder)
		if !ok {
			return "", false, nil
		}
		id, err := f.FindByKey(ctx, ChunkKey(key, k))
		if err != nil {
			return "", false, err
		}
		if id == "" {
			break // chunk k+1 is submitted only once chunk k is
		}
		refs = append(refs, chunkRef{a.qualify(k, id), c.Offset})
	}
	if len(refs) == 0 {
		return "", false, nil
	}
	return chunkedID(refs), len(refs) == len(chunks), nil
}

// complete reports whether id is a whole array: one job, or every chunk.
func (a *arrayBackend) complete(ctx context.Context, id string) bool {
	refs, ok := parseChunkedID(id)
	if !ok {
		return true
	}
	chunks, err := a.plan(ctx)
	return err == nil && len(refs) == len(chunks)
}

// chunkStatus reads each chunk's tasks and gives them their indexes in
// the user's array.
func (a *arrayBackend) chunkStatus(ctx context.Context, refs []chunkRef) (map[int]backends.Status, error) {
	tasks := map[int]backends.Status{}
	for _, c := range refs {
		_, as, raw := a.route(c.id)
		ts, err := as.ArrayStatus(ctx, raw)
		if err != nil {
			return nil, fmt.Errorf("chunk %s: %w", c.id, err)
		}
		for i, st := range ts {
			tasks[i+c.offset] = st
		}
	}
	return tasks, nil
}

// cancelChunks cancels every chunk, even when one fails; the first
// failure is returned (a retry cancels again: cancel is idempotent).
func (a *arrayBackend) cancelChunks(ctx context.Context, refs []chunkRef) error {
	var errs []error
	for _, c := range refs {
		be, _, raw := a.route(c.id)
		if err := be.Cancel(ctx, raw); err != nil {
			errs = append(errs, fmt.Errorf("chunk %s: %w", c.id, err))
		}
	}
	return errors.Join(errs...)
}

// chunkSubmitter submits one chunk where run.submit submits a job.
type chunkSubmitter struct {
	backends.Backend
	as    backends.ArraySubmitter
	chunk backends.Array
}

func (c chunkSubmitter) Submit(ctx context.Context, job backends.Job) (string, error) {
	return c.as.SubmitArray(ctx, job, c.chunk)
}

// submitJob submits the job: an array past the cluster's limit chunk by
// chunk, anything else as one.
func (r *run) submitJob(ctx context.Context, be backends.Backend, job backends.Job, find func(context.Context) (string, error), log *slog.Logger) (string, error) {
	if r.arr == nil {
		return r.submit(ctx, be, job, find, log)
	}
	var chunks []backends.Array
	err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) (err error) {
		chunks, err = r.arr.plan(ctx)
		return err
	})
	if err != nil {
		return "", err
	}
	if len(chunks) == 1 && chunks[0].Offset == 0 {
		return r.submit(ctx, be, job, find, log)
	}
	return r.submitChunks(ctx, job, chunks, log)
}

// submitChunks submits the chunks the record does not list yet, in order,
// each recorded before the next is submitted, and returns the array's id.
func (r *run) submitChunks(ctx context.Context, job backends.Job, chunks []backends.Array, log *slog.Logger) (string, error) {
	if err := r.recordChunkSize(ctx); err != nil {
		return "", err
	}
	done := recordedChunks(r.rec.Data[record.KeyArrayChunks])
	refs := make([]chunkRef, len(chunks))
	looked := false
	for k, c := range chunks {
		if id := done[c.Offset]; id != "" {
			refs[k] = chunkRef{id, c.Offset}
			continue
		}
		be, props := r.arr.chunkBackend(k)
		finder, _ := be.(backends.Finder)
		ck := job
		ck.Key = ChunkKey(job.Key, k)
		if props != nil {
			ck.Properties = props // the target's partition or queue
		}
		if k > 0 && (ck.LogShip == nil || ck.LogShip.Tasks == nil) {
			ck.LogShip = nil // one live log: the first chunk's (it has the lowest index)
		}
		find := func(ctx context.Context) (string, error) { return r.findByKey(ctx, finder, ck.Key) }
		id, err := r.submitChunk(ctx, be, ck, c, find, !looked, log)
		looked = true
		var ns *notSubmitted
		if k > 0 && errors.As(err, &ns) {
			err = ns.error // earlier chunks run: the intent stays for a retry or cleanup
		}
		if err != nil && (k == 0 || errors.Is(err, backends.ErrTransient)) {
			return "", fmt.Errorf("array chunk %d of %d (indexes %s): %w", k+1, len(chunks), globalIndexes(c), err)
		}
		if err != nil {
			// Earlier chunks run: neither "invalid input" (exit 2, nothing
			// submitted) nor "nothing reached the backend" may be said, and
			// the intent stays in the record for a retry or cleanup.
			return "", fmt.Errorf("array chunk %d of %d (indexes %s) failed after chunks before it were submitted (they run; a retry submits the rest, cleanup cancels them all): %s",
				k+1, len(chunks), globalIndexes(c), err.Error())
		}
		crashPoint("after-chunk-submit")
		id = r.arr.qualify(k, id)
		if err := r.recordChunk(ctx, c, id); err != nil {
			return "", err
		}
		crashPoint("after-chunk-id")
		refs[k] = chunkRef{id, c.Offset}
		log.Info("array chunk submitted", "chunk", k+1, "of", len(chunks), "indexes", globalIndexes(c), "chunk_id", id)
	}
	return chunkedID(refs), nil
}

// submitChunk submits chunk c, unless lookFirst finds it already
// submitted: the first chunk this invoker has not seen recorded may be one
// a crashed invoker submitted and did not record (never a later one).
func (r *run) submitChunk(ctx context.Context, be backends.Backend, job backends.Job, c backends.Array, find func(context.Context) (string, error),
	lookFirst bool, log *slog.Logger) (string, error) {
	if lookFirst {
		id, err := find(ctx)
		if err != nil {
			return "", fmt.Errorf("looking for an earlier submission: %w", err)
		}
		if id != "" {
			log.Info("adopting the array chunk found by its idempotency key", "chunk_id", id, "key", job.Key)
			return id, nil
		}
	}
	return r.submit(ctx, chunkSubmitter{Backend: be, as: be.(backends.ArraySubmitter), chunk: c}, job, find, log)
}

// globalIndexes is chunk c's indexes as the user gave them.
func globalIndexes(c backends.Array) string {
	rs := make([]backends.IndexRange, len(c.Ranges))
	for i, x := range c.Ranges {
		rs[i] = backends.IndexRange{First: x.First + c.Offset, Last: x.Last + c.Offset}
	}
	return backends.FormatRanges(rs)
}

// recordedChunks reads record.KeyArrayChunks's chunk lines: job id by offset.
func recordedChunks(v string) map[int]string {
	out := map[int]string{}
	for _, line := range strings.Split(v, "\n") {
		idx, id, ok := strings.Cut(line, " ")
		if !ok || idx == "size" {
			continue
		}
		first, _, _ := strings.Cut(idx, "-")
		first, _, _ = strings.Cut(first, ",")
		if n, err := strconv.Atoi(first); err == nil {
			out[n] = id
		}
	}
	return out
}

// recordedChunkSize is the size a submit fixed in v, or 0.
func recordedChunkSize(v string) int {
	first, _, _ := strings.Cut(v, "\n")
	if s, ok := strings.CutPrefix(first, "size "); ok {
		n, _ := strconv.Atoi(s)
		return n
	}
	return 0
}

// recordChunkSize fixes the plan's size in the record before the first
// chunk's submit: a restart splits the array the same way, whatever the
// cluster's limit says by then.
func (r *run) recordChunkSize(ctx context.Context) error {
	if recordedChunkSize(r.rec.Data[record.KeyArrayChunks]) > 0 {
		return nil
	}
	line := "size " + strconv.Itoa(r.arr.size)
	return r.updateChunks(ctx, func(v string) string { return line })
}

// recordChunk adds chunk c's line to the record.
func (r *run) recordChunk(ctx context.Context, c backends.Array, id string) error {
	line := globalIndexes(c) + " " + id
	return r.updateChunks(ctx, func(v string) string {
		if _, ok := recordedChunks(v)[c.Offset]; ok {
			return v
		}
		return v + "\n" + line
	})
}

// updateChunks writes record.KeyArrayChunks with the record's fenced update, as
// recordID writes the id: only while this invoker holds the submit intent.
func (r *run) updateChunks(ctx context.Context, edit func(string) string) error {
	wctx, cancel := r.stopping(ctx, 0)
	defer cancel()
	err := retryTransient(wctx, r.RetryBudget, func(wctx context.Context) error {
		return r.update(wctx, func(d map[string]string) (bool, error) {
			if cur, _ := parseIntent(d[record.KeyIntent]); cur.holder != r.Holder || d[record.KeyID] != "" {
				return false, fmt.Errorf("%s: another invoker took over the submit of this array", r.Store.Describe())
			}
			return record.Set(d, record.KeyArrayChunks, edit(d[record.KeyArrayChunks])), nil
		})
	})
	if err != nil {
		return fmt.Errorf("recording the array's chunks in %s (a retry finds them by key): %w", r.Store.Describe(), err)
	}
	return nil
}

// needsLimit reports whether plan would ask the cluster its array limit
// (false for nil: not an array). A spread array asks every target's
// (spreadPlan): one cluster's agent cannot tell it.
func (a *arrayBackend) needsLimit() bool {
	if a == nil || a.limiter == nil || a.arr.Chunk > 0 || len(a.shares) > 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.size == 0 && a.chunks == nil
}

// useLimit makes n (the limit the cluster's agent read) the array's chunk
// size, if plan has not fixed one yet; it reports whether it did.
func (a *arrayBackend) useLimit(n int) bool {
	if !a.needsLimit() || n <= 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.size != 0 || a.chunks != nil {
		return false
	}
	a.size = n
	return true
}
