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
	"time"

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

// taskPosts is a server that keeps every POST form the wrappers of an
// array's tasks send, by key.
type taskPosts struct {
	mu    sync.Mutex
	files map[string][]string // key -> each POST's file, in order
	forms []map[string]string
}

func (p *taskPosts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseMultipartForm(1<<20) != nil {
		http.Error(w, "a POST form, please", http.StatusBadRequest)
		return
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		http.Error(w, "no file", http.StatusBadRequest)
		return
	}
	b, _ := io.ReadAll(f)
	form := map[string]string{}
	for k, v := range r.MultipartForm.Value {
		form[k] = v[0]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.files[form["key"]] = append(p.files[form["key"]], string(b))
	p.forms = append(p.forms, form)
	w.WriteHeader(http.StatusNoContent)
}

// TestTaskShipScriptPostsEachTaskByItsIndex runs a chunk's task wrapper
// (offset 1001) as Slurm would: each task POSTs its own output with the
// array's form to KeyPrefix+<its index in the user's array>.log; the live
// task while it runs, the others (every minute here) at least at their
// end. Neither the form nor the URL reaches the script.
func TestTaskShipScriptPostsEachTaskByItsIndex(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the log shipper needs curl:", err)
	}
	posts := &taskPosts{files: map[string][]string{}}
	srv := httptest.NewServer(posts)
	defer srv.Close()
	user := "#!/bin/bash\necho \"task $BRIDGE_TASK_INDEX; form: ${BRIDGE_LOG_FORM:-unset} ${BRIDGE_LOG_URL:-unset}\"\nfor i in 1 2 3; do echo line $i >&2; sleep 1; done\n"
	s := &jobSpec{env: map[string]string{}, script: user}
	ship := backends.LogShip{URL: srv.URL + "/bucket/", Every: time.Second, Tasks: &backends.TaskShip{KeyPrefix: "job/key/tasks/",
		Fields: map[string]string{"policy": "cG9saWN5", "x-amz-signature": "c2ln"}, Live: 1003, OthersEvery: time.Minute}}
	require.NoError(t, s.shipLogs(ship, wrapping{taskIndex: true, taskOffset: 1001}))
	assert.NotContains(t, s.script, "c2ln", "the form's signature is never in the script")
	dir := t.TempDir()
	for _, slurmIndex := range []string{"2", "0"} { // 1003 (live), 1001
		outFile, err := os.Create(filepath.Join(dir, "slurm-"+slurmIndex+".out"))
		require.NoError(t, err)
		cmd := exec.Command("/bin/sh", "-c", s.script)
		cmd.Stdout, cmd.Stderr = outFile, outFile
		cmd.Env = append(os.Environ(), "SLURM_ARRAY_TASK_ID="+slurmIndex, "TMPDIR="+dir,
			"BRIDGE_LOG_URL="+s.env["BRIDGE_LOG_URL"], "BRIDGE_LOG_FORM="+s.env["BRIDGE_LOG_FORM"], "BRIDGE_LOG_KEY="+s.env["BRIDGE_LOG_KEY"])
		require.NoError(t, cmd.Run())
		outFile.Close()
	}
	posts.mu.Lock()
	defer posts.mu.Unlock()
	for _, c := range []struct {
		key, task string
		live      bool
	}{{"job/key/tasks/1003.log", "1003", true}, {"job/key/tasks/1001.log", "1001", false}} {
		files := posts.files[c.key]
		require.NotEmpty(t, files, "%s was shipped: %v", c.key, posts.files)
		assert.Equal(t, "task "+c.task+"; form: unset unset\nline 1\nline 2\nline 3\n", files[len(files)-1], "the last POST is the whole output")
		if c.live {
			assert.Greater(t, len(files), 1, "the live task ships while it runs: %q", files)
		} else {
			assert.Len(t, files, 1, "the other tasks ship once a minute, and at their end: %q", files)
		}
	}
	assert.Len(t, posts.files, 2, "one object per task: %v", posts.files)
	for _, f := range posts.forms {
		assert.Equal(t, "cG9saWN5", f["policy"])
		assert.Equal(t, "c2ln", f["x-amz-signature"])
	}
}

// A form field the wrapper could not pass on intact (blanks, glob
// characters, quotes) is refused before anything is submitted.
func TestTaskFormRefusesUnsafeFields(t *testing.T) {
	for _, v := range []string{"a b", "a*", "a\"b", "a[1]", ""} {
		_, err := taskForm(backends.TaskShip{KeyPrefix: "p/", Fields: map[string]string{"policy": v}})
		if v == "" {
			assert.NoError(t, err, "an empty value is passed as name=")
			continue
		}
		assert.Error(t, err, "%q", v)
	}
	_, err := taskForm(backends.TaskShip{KeyPrefix: "p q/", Fields: map[string]string{}})
	assert.Error(t, err, "a key prefix with a blank")
}
