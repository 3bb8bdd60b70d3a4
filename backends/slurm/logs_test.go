package slurm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
)

// TestShipScriptShipsWhileTheJobRuns runs the wrapper as Slurm would (its
// standard output is the job's output file) against a server that keeps
// every PUT: the output arrives while the script runs, whole at the end,
// and the script's exit status and arguments are kept.
func TestShipScriptShipsWhileTheJobRuns(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the log shipper needs curl:", err)
	}
	var mu sync.Mutex
	var puts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		assert.Equal(t, http.MethodPut, r.Method)
		assert.Equal(t, r.ContentLength, int64(len(b)), "a Content-Length, never chunked (S3 refuses chunked PUTs)")
		mu.Lock()
		puts = append(puts, string(b))
		mu.Unlock()
	}))
	defer srv.Close()

	user := "#!/bin/bash\n#SBATCH --time=5\necho \"args: $*; url: ${BRIDGE_LOG_URL:-unset}\"\nfor i in 1 2 3; do echo line $i; sleep 1; done\necho BRIDGE_JOB_SCRIPT_ in the text\nexit 3"
	s := &jobSpec{env: map[string]string{}, script: user}
	s.shipLogs(backends.LogShip{URL: srv.URL + "/bucket/job.live.log?X-Amz-Signature=x", Every: 1}, wrapping{})
	assert.Equal(t, srv.URL+"/bucket/job.live.log?X-Amz-Signature=x", s.env["BRIDGE_LOG_URL"], "the URL travels in the environment")
	assert.NotContains(t, s.script, srv.URL, "never in the script")
	assert.True(t, strings.HasPrefix(s.script, "#!/bin/sh\n#SBATCH --time=5\n"), "#SBATCH lines stay at the top")

	dir := t.TempDir()
	script := filepath.Join(dir, "batch")
	require.NoError(t, os.WriteFile(script, []byte(s.script), 0o700))
	outFile, err := os.Create(filepath.Join(dir, "slurm-1.out"))
	require.NoError(t, err)
	defer outFile.Close()
	cmd := exec.Command("/bin/sh", script, "a b", "c")
	cmd.Stdout, cmd.Stderr = outFile, outFile
	cmd.Env = append(os.Environ(), "BRIDGE_LOG_URL="+s.env["BRIDGE_LOG_URL"], "TMPDIR="+dir)
	err = cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 3, exit.ExitCode(), "the job's exit status")

	whole, err := os.ReadFile(outFile.Name())
	require.NoError(t, err)
	assert.Equal(t, "args: a b c; url: unset\nline 1\nline 2\nline 3\nBRIDGE_JOB_SCRIPT_ in the text\n", string(whole))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, puts)
	assert.Equal(t, string(whole), puts[len(puts)-1], "the last PUT is the whole output")
	assert.Greater(t, len(puts), 1, "shipped while running too: %q", puts)
	for i := 1; i < len(puts); i++ {
		assert.True(t, strings.HasPrefix(puts[i], puts[i-1]) && len(puts[i]) > len(puts[i-1]), "each PUT grows the last (never the same twice): %q", puts)
	}
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 2, "the wrapper cleans up after itself")
}

// A chunk's wrapper gives the task its index in the user's array, in
// BRIDGE_TASK_INDEX and in SLURM_ARRAY_TASK_ID, which scripts read.
func TestWrapperTaskOffset(t *testing.T) {
	for _, c := range []struct {
		offset int
		want   string
	}{{0, "2 2\n"}, {1001, "1003 1003\n"}} {
		script := wrapScript("#!/bin/sh\necho \"$BRIDGE_TASK_INDEX $SLURM_ARRAY_TASK_ID\"\n", wrapping{taskIndex: true, taskOffset: c.offset})
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = append(os.Environ(), "SLURM_ARRAY_TASK_ID=2", "TMPDIR="+t.TempDir())
		out, err := cmd.Output()
		require.NoError(t, err)
		assert.Equal(t, c.want, string(out), "offset %d", c.offset)
	}
}
