package main

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRetryBudgetCapsAClosedPort: --retry-budget is a ceiling. With 1s, a
// backend whose port is closed is given up on (exit 75) after about a
// second, not after four fifths of the 30 s submit lease.
func TestRetryBudgetCapsAClosedPort(t *testing.T) {
	clearEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	start := time.Now()
	r := run(t, "invoke", "--state-dir", t.TempDir(), "--job-name", "closed", "--backend", "ray",
		"--resource-url", "http://"+addr, "--credentials-dir", t.TempDir(), "--script", "echo hi",
		"--retry-budget", "1s", "--termination-log", "")
	took := time.Since(start)
	assert.Equal(t, 75, r.code, r.stderr)
	assert.Contains(t, r.summary["message"], "connection refused")
	assert.Less(t, took, 10*time.Second, "bounded by the 1 s budget, not by the 24 s of the lease")
}
