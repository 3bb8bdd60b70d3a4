package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The operator's bad flags are exit 2 naming the flag, before any API call.
func TestOperatorBadFlags(t *testing.T) {
	clearEnv(t)
	r := run(t, "operator", "--kubeconfig", "/nonexistent")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "job-image"), r.stderr)
	r = run(t, "operator", "--job-image", "x:1", "--status-keys", "theirs")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "status-keys"), r.stderr)
	r = run(t, "operator", "--job-image", "x:1", "--kubeconfig", "/nonexistent")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "kubeconfig"), r.stderr)
	r = run(t, "operator", "--job-image", "x:1", "--metrics-bind-address", "8080")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "metrics-bind-address"), r.stderr)
	r = run(t, "operator", "--job-image", "x:1", "--job-image-pull-policy", "always")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "job-image-pull-policy") && strings.Contains(r.stderr, "IfNotPresent"), r.stderr)
}

// BRIDGE_BACKEND reaches the operator's --backend (IBM's BridgeJobs have no
// backend): an unknown one is exit 2 naming it, before any API call.
func TestOperatorBackendFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("BRIDGE_BACKEND", "pbs")
	r := run(t, "operator", "--job-image", "x:1", "--kubeconfig", "/nonexistent")
	assert.Equal(t, 2, r.code)
	assert.True(t, strings.Contains(r.stderr, "backend") && strings.Contains(r.stderr, "pbs"), r.stderr)
}
