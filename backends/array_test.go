package backends_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

func TestParseArray(t *testing.T) {
	for in, want := range map[string]struct {
		canon string
		count int
	}{
		"0-999%50":       {"0-999%50", 1000},
		"7":              {"7", 1},
		" 8-15, 1,3 ,2 ": {"1-3,8-15", 11},
		"0-9,5-20,22":    {"0-20,22", 22},
		"4000000":        {"4000000", 1},
		"0-99999":        {"0-99999", 100000},
	} {
		a, err := backends.ParseArray(in)
		require.NoError(t, err, in)
		assert.Equal(t, want.canon, a.String(), in)
		assert.Equal(t, want.count, a.Count(), in)
	}
	for _, bad := range []string{"", "a", "1-", "-1", "5-2", "1,,2", "0-9%0", "0-9%x", "4000001", "+3", "0-100000", "1.5", "0x10"} {
		_, err := backends.ParseArray(bad)
		require.Error(t, err, bad)
		assert.True(t, errors.Is(err, backends.ErrInvalid), bad)
		assert.Contains(t, err.Error(), "array", bad)
	}
	assert.Equal(t, "3,17-19,40", backends.FormatRanges(backends.RangesOf([]int{40, 17, 3, 18, 19})))
}

// Chunks splits an array at the cluster's limit into native arrays whose
// indexes start at 0, each with the offset that gives back the user's
// indexes; a sparse array gets no more chunks than its indexes need, and
// an array that fits is left as it is.
func TestArrayChunks(t *testing.T) {
	a, err := backends.ParseArray("0-2499%10")
	require.NoError(t, err)
	cs := a.Chunks(1001)
	require.Len(t, cs, 3)
	for k, want := range []struct {
		ranges string
		offset int
	}{{"0-1000", 0}, {"0-1000", 1001}, {"0-497", 2002}} {
		assert.Equal(t, want.ranges, cs[k].Indexes(), "chunk %d", k)
		assert.Equal(t, want.offset, cs[k].Offset, "chunk %d", k)
		assert.Equal(t, 10, cs[k].MaxParallel, "chunk %d keeps %%M", k)
	}
	total := 0
	for _, c := range cs {
		total += c.Count()
		assert.Less(t, c.Max(), 1001, "every native index below the limit")
	}
	assert.Equal(t, a.Count(), total, "no index lost or doubled")

	sparse, err := backends.ParseArray("5,3000-3001,3005,9999")
	require.NoError(t, err)
	cs = sparse.Chunks(1001)
	require.Len(t, cs, 3)
	assert.Equal(t, []int{5, 3000, 9999}, []int{cs[0].Offset, cs[1].Offset, cs[2].Offset})
	assert.Equal(t, "0-1,5", cs[1].Indexes())

	fits, err := backends.ParseArray("0-1000")
	require.NoError(t, err)
	assert.Equal(t, []backends.Array{fits}, fits.Chunks(1001))
	assert.Equal(t, []backends.Array{fits}, fits.Chunks(0), "no limit: one array")
}

func TestParseArrayChunkSize(t *testing.T) {
	a, err := backends.ParseArray("0-4999%50/1000")
	require.NoError(t, err)
	assert.Equal(t, 1000, a.Chunk)
	assert.Equal(t, 50, a.MaxParallel)
	assert.Equal(t, "0-4999%50", a.String(), "the chunk size is not the scheduler's")
	for _, bad := range []string{"0-9/0", "0-9/-1", "0-9/x", "0-9/", "0-9/4000002"} {
		_, err := backends.ParseArray(bad)
		require.ErrorIs(t, err, backends.ErrInvalid, bad)
		assert.Contains(t, err.Error(), "after / comes", bad)
	}
}
