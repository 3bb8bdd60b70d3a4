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
