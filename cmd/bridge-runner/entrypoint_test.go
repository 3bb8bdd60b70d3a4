package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommandAfterEntrypoint: KFP's local DockerRunner (and `docker run
// IMAGE /bridge-runner version`) passes the component's command as the
// arguments of the image's ENTRYPOINT /bridge-runner, so the binary sees its
// own path before the command. It runs the command; any other unknown first
// word is still an error that names it.
func TestCommandAfterEntrypoint(t *testing.T) {
	out, err := exec.Command(binary, binary, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "bridge-runner ")

	// The same file under another name (a symlink, as an image might have).
	link := filepath.Join(t.TempDir(), "br")
	require.NoError(t, exec.Command("ln", "-s", binary, link).Run())
	out, err = exec.Command(binary, link, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)

	out, err = exec.Command(binary, "/bin/sh", "version").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), `unknown command "/bin/sh"`)

	require.Equal(t, []string{"invoke", "--job-name", "x"}, commandArgs([]string{"/bridge-runner", "/bridge-runner", "invoke", "--job-name", "x"}))
	require.Equal(t, []string{"invoke"}, commandArgs([]string{"/bridge-runner", "invoke"}))
	require.Nil(t, commandArgs([]string{"/bridge-runner"}))
}
