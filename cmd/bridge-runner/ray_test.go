package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

// rayURL is the real Ray of hack/ray-up.sh and the directory of its
// credentials (the file token when Ray runs with token auth).
func rayURL(t *testing.T) (url, creds string) {
	u, c := os.Getenv("BRIDGE_TEST_RAY_URL"), os.Getenv("BRIDGE_TEST_RAY_CREDS_DIR")
	if u == "" || c == "" {
		msg := "this test needs a real Ray: bash hack/ray-up.sh && source /tmp/bridge-runner-ray/env"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return u, c
}

// rayJob is one job of Ray's job list.
type rayJob struct {
	SubmissionID string `json:"submission_id"`
	Status       string `json:"status"`
}

// rayJobList lists every job Ray knows, asked of Ray directly.
func rayJobList(t *testing.T, url, creds string) []rayJob {
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(url, "/")+"/api/jobs/", nil)
	require.NoError(t, err)
	if tok, err := os.ReadFile(filepath.Join(creds, "token")); err == nil {
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var jobs []rayJob
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&jobs))
	return jobs
}

// rayJobs counts the Ray jobs with this submission id.
func rayJobs(t *testing.T, url, creds, id string) int {
	n := 0
	for _, j := range rayJobList(t, url, creds) {
		if j.SubmissionID == id {
			n++
		}
	}
	return n
}

// rayJobStates maps the submission id to the status of the Ray job
// submitted as id (invoke's submission id is the key): one entry at most,
// as Ray refuses a second submission with an id it knows.
func rayJobStates(t *testing.T, url, creds, id string) map[string]string {
	out := map[string]string{}
	for _, j := range rayJobList(t, url, creds) {
		if j.SubmissionID == id {
			out[j.SubmissionID] = j.Status
		}
	}
	return out
}

const tickScript = "import time\nfor i in range(10):\n    print('tick', i, flush=True)\n    time.sleep(0.2)\n"

// liveTickScript prints 20 lines over 10 s: long enough that a loaded
// machine, where Ray's driver and invoke's polls lag by seconds, still sees
// the job RUNNING while its lines arrive (tickScript's 2 s job ended before
// invoke saw it running, in a CI run of 2026-11-30).
const liveTickScript = "import time\nfor i in range(20):\n    print('tick', i, flush=True)\n    time.sleep(0.5)\n"

// TestRayLiveLogs: the entrypoint's lines reach invoke's stderr while the
// job runs, not only at its end.
func TestRayLiveLogs(t *testing.T) {
	clearEnv(t)
	url, creds := rayURL(t)
	state := t.TempDir()
	cmd := exec.Command(binary, "invoke", "--state-dir", state, "--job-name", "ray-logs", "--backend", "ray",
		"--resource-url", url, "--credentials-dir", creds, "--script", liveTickScript, "--update-interval", "1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var ticksWhileRunning, ticks int
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tick ") {
			ticks++
			rec, err := record.NewFileStore(state, "ray-logs").Get(context.Background())
			if err == nil && rec.Data[record.KeyJobStatus] == "RUNNING" {
				ticksWhileRunning++
			}
		}
	}
	_, _ = io.Copy(io.Discard, stderr)
	require.Equal(t, 0, exitOf(cmd.Wait()))
	assert.Equal(t, 20, ticks, "every line, once")
	assert.Greater(t, ticksWhileRunning, 3, "lines arrive while the job runs")
}

func TestRaySIGTERMStopsTheJob(t *testing.T) {
	clearEnv(t)
	url, creds := rayURL(t)
	state := t.TempDir()
	cmd, out := startInvoke(t, nil, "--state-dir", state, "--job-name", "ray-term", "--backend", "ray",
		"--resource-url", url, "--credentials-dir", creds, "--script", "import time\ntime.sleep(300)\n")
	waitForStatus(t, state, "ray-term", "RUNNING")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, ExitKilled, exitOf(cmd.Wait()), out.String())
	rec, err := record.NewFileStore(state, "ray-term").Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "KILLED", rec.Data[record.KeyJobStatus])
	assert.Equal(t, "STOPPED", rec.Data[record.KeyRawState])
}

// TestRayRestartReattaches: invoke dies right after Ray accepted the job and
// before the id was recorded; the restart finds the submission id and
// finishes without a second job.
func TestRayRestartReattaches(t *testing.T) {
	clearEnv(t)
	url, creds := rayURL(t)
	state := t.TempDir()
	args := []string{"--state-dir", state, "--job-name", "ray-crash", "--backend", "ray", "--resource-url", url,
		"--credentials-dir", creds, "--script", tickScript, "--submit-lease", "3s"}
	cmd, out := startInvoke(t, []string{"BRIDGE_CRASH_AT=after-submit"}, args...)
	require.NotEqual(t, 0, exitOf(cmd.Wait()), out.String())
	start := time.Now()
	code, out2 := runBinary(t, append([]string{"invoke"}, args...)...)
	require.Equal(t, 0, code, out2)
	t.Logf("restart to DONE: %s", time.Since(start).Round(time.Millisecond))
	rec, err := record.NewFileStore(state, "ray-crash").Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, rec.Data[record.KeyKey], rec.Data[record.KeyID], "the submission id is the key")
	assert.Equal(t, 1, rayJobs(t, url, creds, rec.Data[record.KeyID]), "one Ray job")
}

// TestRayWrongTokenIsInvalid: Ray with token authentication refuses a wrong
// token: invoke exits 2 with nothing submitted, and the token appears in no
// output and not in the record.
func TestRayWrongTokenIsInvalid(t *testing.T) {
	clearEnv(t)
	url, creds := os.Getenv("BRIDGE_TEST_RAY_AUTH_URL"), os.Getenv("BRIDGE_TEST_RAY_AUTH_CREDS_DIR")
	if _, err := os.Stat(filepath.Join(creds, "token")); url == "" || err != nil {
		msg := "no Ray with token auth: hack/services.sh starts one (BRIDGE_RAY_DIR=/tmp/bridge-runner-ray-auth BRIDGE_RAY_AUTH=token hack/ray-up.sh) and exports BRIDGE_TEST_RAY_AUTH_URL and _CREDS_DIR"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	wrong := t.TempDir()
	secret := "wrong-ray-token-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	require.NoError(t, os.WriteFile(filepath.Join(wrong, "token"), []byte(secret+"\n"), 0o600))
	state := t.TempDir()
	// A record made first (as create-configmap does) stays to be read; one
	// invoke made itself would go with the refusal.
	code, out := runBinary(t, "create-configmap", "--state-dir", state, "--job-name", "ray-auth", "--backend", "ray",
		"--resource-url", url, "--script", "print('never')")
	require.Equal(t, ExitDone, code, out)
	code, out = runBinary(t, "invoke", "--state-dir", state, "--job-name", "ray-auth", "--backend", "ray",
		"--resource-url", url, "--credentials-dir", wrong, "--script", "print('never')")
	assert.Equal(t, ExitInvalid, code, out)
	assert.Contains(t, strings.ToLower(out), "token", "the message says what is wrong")
	assert.NotContains(t, out, secret)
	rec, err := record.NewFileStore(state, "ray-auth").Get(context.Background())
	require.NoError(t, err)
	for k, v := range rec.Data {
		assert.NotContains(t, v, secret, k)
	}
	assert.Empty(t, rec.Data[record.KeyID], "nothing was submitted")
}
