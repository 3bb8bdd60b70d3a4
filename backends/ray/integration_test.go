package ray

// Integration tests against a real Ray cluster started by hack/ray-up.sh:
//
//	bash hack/ray-up.sh && source /tmp/bridge-runner-ray/env
//	go test ./backends/ray/ -count=1 -v -run Real
//
// Without BRIDGE_TEST_RAY_URL they skip, except under CI (env CI non-empty),
// where a test that needs a service must fail rather than pass silently.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// dirCreds reads a mounted-Secret-like directory as the runner does (one
// file per key, trimmed, re-read on every call).
type dirCreds string

func (d dirCreds) Get(names ...string) (string, error) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(string(d), n))
		if err == nil && strings.TrimSpace(string(b)) != "" {
			return strings.TrimSpace(string(b)), nil
		}
	}
	return "", backends.Invalid("credentials", "none of %v in %s", names, string(d))
}

type realRay struct {
	url   string
	creds dirCreds
	token bool
}

func needRay(t *testing.T) *realRay { return needRayAt(t, "BRIDGE_TEST_RAY") }

// needRayAt reads the Ray whose env variables start with prefix: the
// default one (BRIDGE_TEST_RAY) or the one with token authentication
// (BRIDGE_TEST_RAY_AUTH, started by hack/services.sh).
func needRayAt(t *testing.T, prefix string) *realRay {
	t.Helper()
	u := os.Getenv(prefix + "_URL")
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s_URL is not set under CI: start Ray with hack/ray-up.sh (hack/services.sh starts both) and source its env file", prefix)
		}
		t.Skip("no Ray cluster: run `bash hack/ray-up.sh && source /tmp/bridge-runner-ray/env` to run this test")
	}
	rr := &realRay{url: u, creds: dirCreds(os.Getenv(prefix + "_CREDS_DIR"))}
	if rr.creds != "" {
		_, err := os.Stat(filepath.Join(string(rr.creds), "token"))
		rr.token = err == nil
	}
	return rr
}

func (rr *realRay) backend(t *testing.T) *Backend {
	t.Helper()
	var creds backends.Credentials
	if rr.creds != "" {
		creds = rr.creds
	}
	be, err := New(backends.Config{URL: rr.url, Credentials: creds, HTTPClient: &http.Client{Timeout: 30 * time.Second}})
	require.NoError(t, err)
	return be.(*Backend)
}

func newKey(t *testing.T) string {
	b := make([]byte, 10)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "br-" + hex.EncodeToString(b)
}

// follower polls a job every interval, streams its log, and records when
// things happened.
type follower struct {
	be       *Backend
	id       string
	interval time.Duration

	mu     sync.Mutex
	log    bytes.Buffer
	off    int64
	states []backends.State
	// lineAt: when each complete line was first delivered, and the state
	// the job was in at that poll.
	lines []deliveredLine
}

type deliveredLine struct {
	text  string
	at    time.Time
	state backends.State
}

func (f *follower) poll(ctx context.Context) (backends.Status, error) {
	st, err := f.be.Status(ctx, f.id)
	if err != nil {
		return st, err
	}
	if n := len(f.states); n == 0 || f.states[n-1] != st.State {
		f.states = append(f.states, st.State)
	}
	before := f.log.Len()
	next, err := f.be.ReadLogs(ctx, f.id, f.off, &f.log)
	if err != nil {
		return st, err
	}
	f.off = next
	now := time.Now()
	// Record lines completed by this read.
	all := f.log.String()
	start := strings.LastIndexByte(all[:before], '\n') + 1
	for _, l := range strings.SplitAfter(all[start:], "\n") {
		if strings.HasSuffix(l, "\n") {
			f.lines = append(f.lines, deliveredLine{text: strings.TrimSuffix(l, "\n"), at: now, state: st.State})
		}
	}
	return st, nil
}

// until polls until the job is in a final state (or cond holds) and
// returns the status and when it was first seen.
func (f *follower) until(t *testing.T, timeout time.Duration, cond func(backends.Status) bool) (backends.Status, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		st, err := f.poll(ctx)
		if err == nil && cond(st) {
			return st, time.Now()
		}
		if err != nil && !errors.Is(err, backends.ErrTransient) {
			require.NoError(t, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s: timed out after %s; states %v; log:\n%s", f.id, timeout, f.states, f.log.String())
		case <-time.After(f.interval):
		}
	}
}

func final(st backends.Status) bool { return st.State.Final() }

func TestRealLiveLogsAndDone(t *testing.T) {
	rr := needRay(t)
	be := rr.backend(t)
	ctx := context.Background()
	key := newKey(t)
	script := `import time
for i in range(15):
    print("tick %d %.3f" % (i, time.time()))
    time.sleep(0.4)
print("END %.3f" % time.time())
`
	t0 := time.Now()
	id, err := be.Submit(ctx, backends.Job{Name: "live-logs", Key: key, Script: script})
	require.NoError(t, err)
	require.Equal(t, key, id)
	t.Cleanup(func() { _ = be.Cancel(context.Background(), id) })

	f := &follower{be: be, id: id, interval: 100 * time.Millisecond}
	st, seenAt := f.until(t, 120*time.Second, final)
	require.Equal(t, backends.Done, st.State, "log:\n%s", f.log.String())
	assert.Equal(t, "SUCCEEDED", st.Raw)
	require.NotNil(t, st.ExitCode)
	assert.Equal(t, 0, *st.ExitCode)
	assert.False(t, st.SubmitTime.IsZero())
	assert.False(t, st.EndTime.IsZero())

	// Every tick exactly once, in order, and most of them while running.
	var ticks []deliveredLine
	var endLine string
	for _, l := range f.lines {
		if strings.HasPrefix(l.text, "tick ") {
			ticks = append(ticks, l)
		}
		if strings.HasPrefix(l.text, "END ") {
			endLine = l.text
		}
	}
	require.Len(t, ticks, 15, "log:\n%s", f.log.String())
	whileRunning := 0
	for i, l := range ticks {
		assert.True(t, strings.HasPrefix(l.text, fmt.Sprintf("tick %d ", i)), l.text)
		if l.state == backends.Running {
			whileRunning++
		}
	}
	assert.GreaterOrEqual(t, whileRunning, 10, "lines must arrive while the job runs, not at its end")
	// Delay from print to delivery of each line while running.
	var worst time.Duration
	for _, l := range ticks {
		ts, _ := strconv.ParseFloat(strings.Fields(l.text)[2], 64)
		d := l.at.Sub(time.UnixMilli(int64(ts * 1000)))
		worst = max(worst, d)
	}
	require.NotEmpty(t, endLine)
	endTS, _ := strconv.ParseFloat(strings.Fields(endLine)[1], 64)
	driverEnd := time.UnixMilli(int64(endTS * 1000))
	t.Logf("submit→final %s; %d of 15 lines delivered while RUNNING; worst print→delivery %s (polling every %s)",
		seenAt.Sub(t0).Round(time.Millisecond), whileRunning, worst.Round(time.Millisecond), f.interval)
	t.Logf("end→detect: driver's last print→Status final %s; Ray's end_time→Status final %s (polling every %s)",
		seenAt.Sub(driverEnd).Round(time.Millisecond), seenAt.Sub(st.EndTime).Round(time.Millisecond), f.interval)
	assert.Equal(t, int64(len(f.log.String())), f.off)
}

func TestRealExitOneIsFailed(t *testing.T) {
	rr := needRay(t)
	be := rr.backend(t)
	key := newKey(t)
	id, err := be.Submit(context.Background(), backends.Job{Name: "fails", Key: key,
		Script: "import sys\nprint('about to fail')\nsys.exit(1)\n"})
	require.NoError(t, err)
	f := &follower{be: be, id: id, interval: 200 * time.Millisecond}
	st, _ := f.until(t, 120*time.Second, final)
	assert.Equal(t, backends.Failed, st.State)
	assert.Equal(t, "FAILED", st.Raw)
	assert.Equal(t, "JOB_ENTRYPOINT_COMMAND_ERROR", st.Reason)
	require.NotNil(t, st.ExitCode)
	assert.Equal(t, 1, *st.ExitCode)
	assert.Contains(t, st.Message, "exit code 1")
	assert.Contains(t, f.log.String(), "about to fail\n")
	t.Logf("FAILED status: %+v", st)
}

func TestRealCancelStopsJob(t *testing.T) {
	rr := needRay(t)
	be := rr.backend(t)
	ctx := context.Background()
	key := newKey(t)
	id, err := be.Submit(ctx, backends.Job{Name: "cancel-me", Key: key,
		Script: "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.1)\n"})
	require.NoError(t, err)
	f := &follower{be: be, id: id, interval: 200 * time.Millisecond}
	f.until(t, 120*time.Second, func(st backends.Status) bool {
		return st.State == backends.Running && strings.Contains(f.log.String(), "started")
	})
	cancelAt := time.Now()
	require.NoError(t, be.Cancel(ctx, id))
	st, seenAt := f.until(t, 60*time.Second, final)
	assert.Equal(t, backends.Killed, st.State)
	assert.Equal(t, "STOPPED", st.Raw)
	t.Logf("cancel→KILLED seen in %s; status %+v", seenAt.Sub(cancelAt).Round(time.Millisecond), st)
	require.NoError(t, be.Cancel(ctx, id), "cancelling a stopped job is no error")
}

func TestRealSubmitTwiceIsOneJob(t *testing.T) {
	rr := needRay(t)
	be := rr.backend(t)
	ctx := context.Background()
	key := newKey(t)

	got, err := be.FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Empty(t, got)

	job := backends.Job{Name: "twice", Key: key, Script: "print('once')\n"}
	_, err = be.Submit(ctx, job)
	require.NoError(t, err)
	_, err = be.Submit(ctx, job)
	require.ErrorIs(t, err, backends.ErrExists)
	assert.NotErrorIs(t, err, backends.ErrTransient)
	t.Logf("second submit: %v", err)

	got, err = be.FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, key, got)

	// Ray's own list has the key once.
	resp, err := be.do(ctx, http.MethodGet, "/api/jobs/", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.status)
	var list []struct {
		SubmissionID *string `json:"submission_id"`
	}
	require.NoError(t, json.Unmarshal(resp.body, &list))
	n := 0
	for _, j := range list {
		if j.SubmissionID != nil && *j.SubmissionID == key {
			n++
		}
	}
	assert.Equal(t, 1, n)
	f := &follower{be: be, id: key, interval: 200 * time.Millisecond}
	st, _ := f.until(t, 120*time.Second, final)
	assert.Equal(t, backends.Done, st.State)
	assert.Equal(t, 1, strings.Count(f.log.String(), "once\n"), "the script ran once")
}

// Arguments, parameters and hostile text arrive intact: nothing passes
// through a shell.
func TestRealArgumentsAndParametersArriveIntact(t *testing.T) {
	rr := needRay(t)
	be := rr.backend(t)
	key := newKey(t)
	nasty := `a 'b' "c" $(touch /tmp/bridge-ray-pwned) ` + "`id`; rm -rf / \\ \n ü"
	params, _ := json.Marshal(map[string]string{"p": nasty})
	props, _ := json.Marshal(map[string]any{"args": []string{nasty, "--n=2"}, "env_vars": map[string]string{"MY_VAR": nasty}})
	script := `import json, os, sys
def j(v): return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
print("ARGV=" + j(sys.argv[1:]))
print("PARAM=" + j(json.loads(os.environ["BRIDGE_JOB_PARAMETERS"])["p"]))
print("VAR=" + j(os.environ["MY_VAR"]))
print("NAME=" + os.environ["BRIDGE_JOB_NAME"] + " MAIN=" + __name__)
`
	id, err := be.Submit(context.Background(), backends.Job{Name: "intact", Key: key, Script: script,
		Parameters: params, Properties: props})
	require.NoError(t, err)
	f := &follower{be: be, id: id, interval: 200 * time.Millisecond}
	st, _ := f.until(t, 120*time.Second, final)
	require.Equal(t, backends.Done, st.State, f.log.String())
	j, _ := json.Marshal(nasty)
	argv, _ := json.Marshal([]string{nasty, "--n=2"})
	out := f.log.String()
	assert.Contains(t, out, "ARGV="+string(argv)+"\n")
	assert.Contains(t, out, "PARAM="+string(j)+"\n")
	assert.Contains(t, out, "VAR="+string(j)+"\n")
	assert.Contains(t, out, "NAME=intact MAIN=__main__\n")
	_, err = os.Stat("/tmp/bridge-ray-pwned")
	assert.True(t, os.IsNotExist(err), "nothing was run by a shell")
}

func TestRealUnknownJobAndAuth(t *testing.T) {
	rr := needRayAt(t, "BRIDGE_TEST_RAY_AUTH")
	be := rr.backend(t)
	ctx := context.Background()
	_, err := be.Status(ctx, "br-00000000000000000000")
	require.ErrorIs(t, err, backends.ErrNotFound)
	assert.ErrorContains(t, err, "HTTP 404 from the Ray dashboard: Job … does not exist")
	assert.ErrorIs(t, be.Cancel(ctx, "br-00000000000000000000"), backends.ErrNotFound)

	if !rr.token {
		// Ray 2.61 turns token auth on by default, so CI runs Ray with it.
		msg := "Ray runs without token auth (BRIDGE_RAY_AUTH=token hack/ray-up.sh enables it; hack/services.sh does): auth refusals not exercised"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Log(msg)
		return
	}
	noTok, err := New(backends.Config{URL: rr.url})
	require.NoError(t, err)
	_, err = noTok.Status(ctx, "br-00000000000000000000")
	require.ErrorIs(t, err, backends.ErrAuth)
	t.Logf("without token: %v", err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("wrong\n"), 0o600))
	bad, err := New(backends.Config{URL: rr.url, Credentials: dirCreds(dir)})
	require.NoError(t, err)
	_, err = bad.Status(ctx, "br-00000000000000000000")
	require.ErrorIs(t, err, backends.ErrAuth)
	t.Logf("wrong token: %v", err)

	// A rotated Secret as the kubelet writes it: token -> ..data/token,
	// ..data -> a timestamped directory, swapped with one rename. The same
	// backend reads the new token on its next request.
	good, err := rr.creds.Get("token")
	require.NoError(t, err)
	mounted := t.TempDir()
	writeGen := func(gen, tok string) {
		d := filepath.Join(mounted, gen)
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "token"), []byte(tok+"\n"), 0o600))
		require.NoError(t, os.Symlink(gen, filepath.Join(mounted, "..data_tmp")))
		require.NoError(t, os.Rename(filepath.Join(mounted, "..data_tmp"), filepath.Join(mounted, "..data")))
	}
	writeGen("..2026_01", "wrong-before-rotation")
	require.NoError(t, os.Symlink("..data/token", filepath.Join(mounted, "token")))
	rotated, err := New(backends.Config{URL: rr.url, Credentials: dirCreds(mounted)})
	require.NoError(t, err)
	_, err = rotated.Status(ctx, "br-00000000000000000000")
	require.ErrorIs(t, err, backends.ErrAuth, "before the rotation")
	writeGen("..2026_02", good)
	_, err = rotated.Status(ctx, "br-00000000000000000000")
	require.ErrorIs(t, err, backends.ErrNotFound, "after the rotation the token is accepted")
	writeGen("..2026_03", "revoked")
	_, err = rotated.Status(ctx, "br-00000000000000000000")
	require.ErrorIs(t, err, backends.ErrAuth, "and a token rotated away is refused again")
}

// TestRealLogStreamWithToken: the log stream's handshake carries the bearer
// token, so a Ray with token auth streams the job's output too.
func TestRealLogStreamWithToken(t *testing.T) {
	rr := needRayAt(t, "BRIDGE_TEST_RAY_AUTH")
	be := rr.backend(t)
	key := newKey(t)
	_, err := be.Submit(context.Background(), backends.Job{Name: "tail-auth", Key: key, Script: "print('hello through the stream')\n"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = be.Cancel(context.Background(), key) })
	f := &follower{be: be, id: key, interval: 200 * time.Millisecond}
	st, _ := f.until(t, 120*time.Second, final)
	require.Equal(t, backends.Done, st.State, f.log.String())
	assert.Contains(t, f.log.String(), "hello through the stream\n")
}

// TestRealRedirectNeverCarriesTheToken: the real dashboard (token mode)
// behind a front that redirects a status read or the log stream to another
// origin: refused and named, the other origin gets no request; a slash
// added on the same origin reaches Ray with the token.
func TestRealRedirectNeverCarriesTheToken(t *testing.T) {
	rr := needRayAt(t, "BRIDGE_TEST_RAY_AUTH")
	rd := testutil.NewRedirector(t, rr.url, false)
	var creds backends.Credentials
	if rr.creds != "" {
		creds = rr.creds
	}
	be, err := New(backends.Config{URL: rd.Front.URL, Credentials: creds, HTTPClient: rd.Front.Client()})
	require.NoError(t, err)
	b := be.(*Backend)
	c := testutil.RedirectCases[0]
	id := "br-00000000000000000000"
	rd.Set(http.StatusTemporaryRedirect, nil, testutil.To(c.Dest(rd)))
	_, err = b.Status(context.Background(), id)
	testutil.RequireRefusedRedirect(t, err, rd, c, "the Ray dashboard", "GET /api/jobs/"+id, "resourceURL")
	_, err = b.ReadLogs(context.Background(), id, 0, io.Discard)
	testutil.RequireRefusedRedirect(t, err, rd, c, "the Ray dashboard", "GET /api/jobs/"+id+"/logs/tail", "resourceURL")
	rd.Set(http.StatusMovedPermanently, nil, testutil.Slash)
	_, err = b.Status(context.Background(), id)
	require.ErrorIs(t, err, backends.ErrNotFound, "Ray answered, the token accepted")
	assert.Equal(t, 2+1, rd.Redirected())
}
