package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReleaseBinaryHasNoTestHooks: `make build` (what the image ships too)
// gives a binary without the crash hook, which would let an environment
// variable SIGKILL invoke inside the exactly-once protocol; the tests'
// binary has it, so the search below can find it when it is there.
func TestReleaseBinaryHasNoTestHooks(t *testing.T) {
	release := filepath.Join(t.TempDir(), "bridge-runner")
	out, err := exec.Command("make", "-C", "../..", "build", "BIN="+release).CombinedOutput()
	require.NoError(t, err, "make build: %s", out)
	hook := []byte("BRIDGE_CRASH_AT")

	b, err := os.ReadFile(release)
	require.NoError(t, err)
	assert.False(t, bytes.Contains(b, hook), "make build must not include the crash hook")

	tb, err := os.ReadFile(binary)
	require.NoError(t, err)
	assert.True(t, bytes.Contains(tb, hook), "the tests' binary has the hook (else this search proves nothing)")

	// The images (release and e2e) build their binary on their own: neither
	// may ask for the tag.
	for _, f := range []string{"../../Dockerfile", "../../hack/build-image.sh"} {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Contains(t, string(text), "go build", "%s builds the binary", f)
		assert.NotContains(t, string(text), "bridgetest", "%s: release builds never use the test hooks' tag", f)
	}
}
