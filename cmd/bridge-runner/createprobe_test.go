package main

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rayDashboard answers /api/version as a Ray dashboard does.
func rayDashboard(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/version" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"version":"4","ray_version":"2.40.0","ray_commit":"x"}`)
}

// create-configmap's probe of a resourceURL (is it a Ray dashboard?) goes
// through the binary's one HTTP client: it follows no redirect to another
// origin, and it verifies TLS with --ca-file. It used Go's default client,
// which followed the redirect and had no --ca-file.
func TestCreateConfigMapProbeFollowsTheConnectionPolicy(t *testing.T) {
	clearEnv(t)
	var reached atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		rayDashboard(w, r)
	}))
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	r := run(t, "create-configmap", "--state-dir", t.TempDir(), "--job-name", "j", "--script", "print(1)", "--resource-url", redirector.URL)
	assert.Equal(t, ExitInvalid, r.code, r.stderr)
	assert.Contains(t, r.stderr, "backend", "the error names the field to set")
	assert.Zero(t, reached.Load(), "the probe followed a redirect to another origin")

	// A dashboard behind TLS with a private CA: recognised with --ca-file.
	tlsRay := httptest.NewTLSServer(http.HandlerFunc(rayDashboard))
	defer tlsRay.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsRay.Certificate().Raw}), 0o600))
	state := t.TempDir()
	r = run(t, "create-configmap", "--state-dir", state, "--job-name", "j", "--script", "print(1)", "--resource-url", tlsRay.URL, "--ca-file", ca)
	require.Equal(t, 0, r.code, r.stderr)
	rec, err := os.ReadFile(filepath.Join(state, "j-bridge-cm.json"))
	require.NoError(t, err)
	assert.Contains(t, string(rec), `"backend": "ray"`)

	// Without it, the same dashboard is not trusted, and nothing is written.
	state = t.TempDir()
	r = run(t, "create-configmap", "--state-dir", state, "--job-name", "j", "--script", "print(1)", "--resource-url", tlsRay.URL)
	assert.Equal(t, ExitInvalid, r.code, r.stderr)
	assert.NoFileExists(t, filepath.Join(state, "j-bridge-cm.json"))
}
