package quantum

import (
	"strings"
	"testing"
)

// validJobID accepts what the old pattern ^[A-Za-z0-9_-]{1,128}$ did, and
// nothing more.
func TestValidJobID(t *testing.T) {
	for id, want := range map[string]bool{
		"": false, "d1x2y3": true, "A-b_9": true, strings.Repeat("x", 128): true,
		strings.Repeat("x", 129): false, "a/b": false, "a b": false, "../x": false, "é": false, "a\n": false,
	} {
		if got := validJobID(id); got != want {
			t.Errorf("validJobID(%q) = %v, want %v", id, got, want)
		}
	}
}
