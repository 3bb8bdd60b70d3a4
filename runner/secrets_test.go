package runner_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/runner"
)

func TestDirCredentials(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "username"), []byte("alice\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("  eyJhbGciOi.secret.part \r\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600))
	secrets := &runner.Secrets{}
	c := runner.DirCredentials{Dir: dir, Secrets: secrets}

	v, err := c.Get("user", "username")
	require.NoError(t, err)
	assert.Equal(t, "alice", v, "trailing newline trimmed; first present alias wins")
	v, err = c.Get("password", "token")
	require.NoError(t, err)
	assert.Equal(t, "eyJhbGciOi.secret.part", v)
	assert.Equal(t, "x [redacted] y", secrets.Scrub("x eyJhbGciOi.secret.part y"), "read values are registered as secrets")
	assert.Equal(t, "alice-bridge-cm", secrets.Scrub("alice-bridge-cm"), "a user name is an identity, not a secret")
	// A jump host's user and its key (package sshexec's jumpN- prefix) are
	// what the unprefixed names are: jump1-username is no secret, but
	// jump1-ssh-privatekey is, and so is jumpy-username.
	for name, secret := range map[string]bool{"jump1-username": false, "jump12-known_hosts": false, "jump1-ssh-privatekey": true, "jumpy-username": true, "jump-username": true} {
		v := "value-of-" + name
		if strings.HasSuffix(name, "privatekey") || strings.HasSuffix(name, "known_hosts") {
			v += "\nline 2 of " + name // multi-line, as its unprefixed key may be
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600))
		_, err := c.Get(name)
		require.NoError(t, err)
		assert.Equal(t, !secret, secrets.Scrub(v) == v, "%s scrubbed: %v", name, secrets.Scrub(v) != v)
	}

	_, err = c.Get("empty", "apikey")
	var fe *backends.FieldError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, "credentials", fe.Field)
	assert.Contains(t, err.Error(), "empty, apikey", "the message names the keys looked for")

	_, err = runner.DirCredentials{Dir: filepath.Join(dir, "missing"), Secrets: secrets}.Get("token")
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "cannot read the credentials directory")

	if os.Geteuid() != 0 { // root reads anything
		require.NoError(t, os.Chmod(filepath.Join(dir, "username"), 0))
		_, err = c.Get("username")
		assert.ErrorIs(t, err, backends.ErrInvalid)
	}
}

func TestScrubHandler(t *testing.T) {
	secrets := &runner.Secrets{}
	secrets.Add("hunter2-long")
	secrets.Add("abc") // too short to scrub: it would mangle ordinary words
	var buf bytes.Buffer
	log := slog.New(runner.NewScrubHandler(slog.NewJSONHandler(&buf, nil), secrets))
	log.With("pre", "with hunter2-long").Info("token hunter2-long seen",
		"err", errors.New("auth hunter2-long refused"),
		slog.Group("g", "inner", "hunter2-long"),
		"n", 3, "abc", "abc")
	out := buf.String()
	assert.NotContains(t, out, "hunter2-long")
	assert.Contains(t, out, "[redacted]")
	assert.Contains(t, out, `"abc":"abc"`)
}

func TestHTTPClientCAFile(t *testing.T) {
	_, err := runner.NewHTTPClient(filepath.Join(t.TempDir(), "nope.pem"), false)
	var fe *backends.FieldError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, "ca-file", fe.Field)
	bad := filepath.Join(t.TempDir(), "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a cert"), 0o600))
	_, err = runner.NewHTTPClient(bad, false)
	assert.ErrorIs(t, err, backends.ErrInvalid)
}

// TestHTTPClientRedirectPolicy: the client every backend gets follows a
// redirect only within the origin, even when a request does not go through
// httpx.Open; the other origin never sees the request or its header.
func TestHTTPClientRedirectPolicy(t *testing.T) {
	rd := testutil.NewRedirector(t, "http://127.0.0.1:9", false)
	rd.Set(http.StatusTemporaryRedirect, nil, testutil.To(rd.Other.URL))
	c, err := runner.NewHTTPClient("", false)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, rd.Front.URL+"/x", nil)
	require.NoError(t, err)
	req.Header.Set("X-SLURM-USER-TOKEN", "tok-redirect-secret")
	_, err = c.Do(req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redirect refused: to another origin")
	assert.Empty(t, rd.Received())
}
