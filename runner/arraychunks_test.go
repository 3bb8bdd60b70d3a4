package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
)

// An array past the cluster's limit runs as native arrays (chunks) under
// one record: one submit per chunk, each chunk's indexes from 0 with the
// offset that gives its tasks the user's indexes, one line per chunk in
// the record, and one set of counts and failed indexes over all chunks.
func TestArrayPastTheLimitRunsAsChunks(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.ArrayMax = 4
	spec := h.spec(`{"pending":"50ms","run":"100ms","failIndexes":[1,7]}`)
	spec.Array = "0-9"
	iv := h.invoker(spec)
	require.NoError(t, iv.Run(context.Background()))
	res := iv.Result()
	assert.Equal(t, "FAILED", res.Status)
	assert.Equal(t, "DONE=8 FAILED=2", res.ArrayCounts)
	assert.Equal(t, "1,7", res.ArrayFailed, "failed tasks by the user's indexes, not the chunks'")
	assert.Equal(t, "fake-1@0+fake-2@4+fake-3@8", res.ID)
	assert.Equal(t, 3, h.fake.Count("submit"), "one submit per chunk")

	arrays := h.fake.Arrays()
	want := map[string]backends.Array{
		"fake-1": {Ranges: []backends.IndexRange{{First: 0, Last: 3}}, Offset: 0},
		"fake-2": {Ranges: []backends.IndexRange{{First: 0, Last: 3}}, Offset: 4},
		"fake-3": {Ranges: []backends.IndexRange{{First: 0, Last: 1}}, Offset: 8},
	}
	assert.Equal(t, want, arrays, "each chunk runs indexes below the limit")
	d := h.record()
	assert.Equal(t, "size 4\n0-3 fake-1\n4-7 fake-2\n8-9 fake-3", d[record.KeyArrayChunks])
	assert.Equal(t, "1,7", d[record.KeyArrayFailed])
	keys := map[string]bool{}
	for _, j := range h.fake.Jobs() {
		keys[j.Key] = true
	}
	assert.Len(t, keys, 3, "each chunk has a key of its own")
	assert.NotContains(t, keys, d[record.KeyKey], "the array's own key finds no chunk alone")
}

// The key's "/N" splits an array the cluster would take whole; a sparse
// array needs no more chunks than its indexes call for; %M goes to every
// chunk.
func TestArrayUserChunkSize(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{"run":"50ms"}`)
	spec.Array = "3,5-6,40,41%2/4"
	iv := h.invoker(spec)
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
	assert.Equal(t, "DONE=5", iv.Result().ArrayCounts)
	assert.Equal(t, map[string]backends.Array{
		"fake-1": {Ranges: []backends.IndexRange{{First: 0, Last: 0}, {First: 2, Last: 3}}, MaxParallel: 2, Offset: 3},
		"fake-2": {Ranges: []backends.IndexRange{{First: 0, Last: 1}}, MaxParallel: 2, Offset: 40},
	}, h.fake.Arrays())
	assert.Zero(t, h.fake.Count("arraylimit"), "a size given by the user is not asked of the cluster")
}

// An array that fits the cluster is submitted as before: one array, its
// own key, no chunk list.
func TestArrayWithinTheLimitIsOneArray(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.ArrayMax = 10
	spec := h.spec(`{"run":"50ms"}`)
	spec.Array = "0-9"
	iv := h.invoker(spec)
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "fake-1", iv.Result().ID)
	assert.Equal(t, 1, h.fake.Count("submit"))
	d := h.record()
	assert.Empty(t, d[record.KeyArrayChunks])
	assert.Equal(t, d[record.KeyKey], h.fake.Jobs()[0].Key)
}

func TestArrayChunksKilledCancelsEveryChunk(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.ArrayMax = 2
	spec := h.spec(`{"run":"60s"}`)
	spec.Array = "0-5"
	iv := h.invoker(spec)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(500 * time.Millisecond)
		cancel() // SIGTERM
	}()
	_ = iv.Run(ctx)
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.Equal(t, "KILLED=6", iv.Result().ArrayCounts)
	assert.Equal(t, 3, h.fake.Count("cancel"), "every chunk is cancelled")
}

// A run that stopped between chunks (here: the third chunk refused once)
// is finished by the next invoke, which submits only the chunks the record
// does not list: no chunk lost, none doubled. The refusal is not "invalid
// input" (exit 2 says nothing was submitted) and keeps the intent.
func TestArrayChunksResumeWhereTheyStopped(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.ArrayMax = 2
	refuse := &refuseChunk{noLimitArrays: noLimitArrays{h.fake}, offset: 4}
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) { return refuse, nil }))
	h.reg = reg
	spec := h.spec(`{"run":"50ms"}`)
	spec.Array = "0-5"
	err := h.invoker(spec).Run(context.Background())
	require.Error(t, err)
	assert.NotErrorIs(t, err, backends.ErrInvalid, "chunks were submitted: not exit 2")
	assert.Contains(t, err.Error(), "array chunk 3 of 3 (indexes 4-5)")
	d := h.record()
	assert.Equal(t, "size 2\n0-1 fake-1\n2-3 fake-2", d[record.KeyArrayChunks], "the chunks submitted are recorded")
	assert.NotEmpty(t, d[record.KeyIntent], "the intent stays while chunks run")
	assert.Empty(t, d[record.KeyID])

	again := h.invoker(spec)
	require.NoError(t, again.Run(context.Background()))
	assert.Equal(t, "DONE=6", again.Result().ArrayCounts)
	assert.Equal(t, 3, h.fake.Count("submit"), "the first two chunks are not submitted again")
	assert.Equal(t, "fake-1@0+fake-2@2+fake-3@4", again.Result().ID)
}

// cleanup of a run stopped between chunks cancels the chunks that run
// (found by their keys: the record has no id yet) and deletes the record.
func TestArrayChunksStoppedThenCleanedUp(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.ArrayMax = 2
	refuse := &refuseChunk{noLimitArrays: noLimitArrays{h.fake}, offset: 4}
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) { return refuse, nil }))
	h.reg = reg
	spec := h.spec(`{"run":"60s"}`)
	spec.Array = "0-5"
	require.Error(t, h.invoker(spec).Run(context.Background()))
	res, err := h.cleaner().Run(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Cancelled)
	assert.True(t, res.Deleted)
	assert.Equal(t, "fake-1@0+fake-2@2", res.ID, "the chunks submitted, found by their keys")
	assert.Equal(t, 2, h.fake.Count("cancel"), "each chunk that runs is cancelled")
}

// refuseChunk refuses the chunk at offset once, as a cluster refuses an
// array it cannot take.
type refuseChunk struct {
	noLimitArrays
	offset  int
	refused bool
}

func (r *refuseChunk) ArrayLimit(ctx context.Context) (int, error) { return r.f.ArrayLimit(ctx) }
func (r *refuseChunk) FindByKey(ctx context.Context, key string) (string, error) {
	return r.f.FindByKey(ctx, key)
}
func (r *refuseChunk) SubmitArray(ctx context.Context, j backends.Job, a backends.Array) (string, error) {
	if a.Offset == r.offset && !r.refused {
		r.refused = true
		return "", backends.Invalid("array", "refused by the test")
	}
	return r.f.SubmitArray(ctx, j, a)
}

// A bad chunk size is refused as input (exit 2, nothing submitted), and
// so is one for a backend without a limit to split at.
func TestArrayChunkSizeRefused(t *testing.T) {
	h := newHarness(t, nil)
	for _, a := range []string{"0-9/0", "0-9/x", "0-9%2/"} {
		spec := h.spec(`{}`)
		spec.Array = a
		err := h.invoker(spec).Run(context.Background())
		require.ErrorIs(t, err, backends.ErrInvalid, a)
		assert.Contains(t, err.Error(), "array", a)
		assert.Contains(t, err.Error(), "after / comes", a)
	}
	noLimit := noLimitArrays{h.fake}
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) { return noLimit, nil }))
	h.reg = reg
	spec := h.spec(`{}`)
	spec.Array = "0-9/5"
	err := h.invoker(spec).Run(context.Background())
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "drop /5")
	assert.Zero(t, h.fake.Count("submit"), "nothing submitted")
}

// noLimitArrays is a backend with arrays and no limit (HTCondor's kind).
type noLimitArrays struct{ f *fake.Backend }

func (n noLimitArrays) Submit(ctx context.Context, j backends.Job) (string, error) {
	return n.f.Submit(ctx, j)
}
func (n noLimitArrays) Status(ctx context.Context, id string) (backends.Status, error) {
	return n.f.Status(ctx, id)
}
func (n noLimitArrays) Cancel(ctx context.Context, id string) error { return n.f.Cancel(ctx, id) }
func (n noLimitArrays) SubmitArray(ctx context.Context, j backends.Job, a backends.Array) (string, error) {
	return n.f.SubmitArray(ctx, j, a)
}
func (n noLimitArrays) ArrayStatus(ctx context.Context, id string) (map[int]backends.Status, error) {
	return n.f.ArrayStatus(ctx, id)
}
