package slurm

// Integration tests against real Slurm clusters with slurmrestd: 22.05 as
// started by hack/slurm-up.sh, 24.11 as started by hack/slurm2411-up.sh and
// 26.05 as started by hack/slurm2605-up.sh (see realTargets):
//
//	hack/slurm-up.sh && . /tmp/bridge-runner-slurm/env
//	hack/slurm2411-up.sh && . /tmp/bridge-runner-slurm2411/env
//	hack/slurm2605-up.sh && . /tmp/bridge-runner-slurm2605/env
//	go test ./backends/slurm/ -run Real -count=1 -v
//
// For each cluster they read <PREFIX>_URL and either <PREFIX>_USER plus
// <PREFIX>_TOKEN or <PREFIX>_CREDS (a directory with username and token
// files, like a mounted Secret); <PREFIX>_JWT_KEY (the cluster's HS256 key)
// enables the expired-token test; <PREFIX>_ROOT is where a chrooted
// cluster's files are seen from here. A cluster without them is skipped, except
// under CI, where its absence fails the tests.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// dirCreds reads credentials from files, on every call, as the runner does.
type dirCreds struct{ dir string }

func (c dirCreds) Get(names ...string) (string, error) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(c.dir, n))
		if err == nil {
			return strings.TrimSpace(string(b)), nil
		}
	}
	return "", backends.Invalid("credentials", "none of %v in %s", names, c.dir)
}

// countingTransport counts requests by "METHOD path".
type countingTransport struct {
	mu   sync.Mutex
	n    map[string]int
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method+" "+r.URL.Path]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// snapshot is a copy of the counts so far.
func (c *countingTransport) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func (c *countingTransport) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := 0
	for _, n := range c.n {
		t += n
	}
	return t
}

type realSlurm struct {
	name   string // Slurm release and API, for subtest names
	url    string
	creds  backends.Credentials
	user   string
	jwtKey string
	local  bool   // slurmrestd on this machine: job files can be read here
	root   string // the cluster's root directory here, if it runs chrooted
}

// realTargets are the real clusters the tests run on, each with the APIs to
// speak to it: "" lets the backend discover the newest (v0.0.38 on 22.05,
// v0.0.42 on 24.11, v0.0.45 on 26.05); others pin a version through
// resourceURL, so that every version a real slurmrestd serves is spoken. The env
// prefix names the variables that the cluster's up script writes.
var realTargets = []struct {
	release, env, up string
	apis             []string
}{
	{"22.05", "BRIDGE_TEST_SLURM", "hack/slurm-up.sh (/tmp/bridge-runner-slurm/env)", []string{""}},
	{"24.11", "BRIDGE_TEST_SLURM2411", "hack/slurm2411-up.sh (/tmp/bridge-runner-slurm2411/env)", []string{"", "v0.0.40", "v0.0.41"}},
	{"26.05", "BRIDGE_TEST_SLURM2605", "hack/slurm2605-up.sh (/tmp/bridge-runner-slurm2605/env)", []string{"", "v0.0.42", "v0.0.43", "v0.0.44"}},
}

// realSlurms returns one realSlurm per target and API. A missing cluster
// skips its tests, except under CI, where it fails them.
func realSlurms(t *testing.T) []*realSlurm {
	t.Helper()
	var all []*realSlurm
	for _, tg := range realTargets {
		rs := realSlurmEnv(t, tg.env)
		if rs == nil {
			msg := fmt.Sprintf("no real Slurm %s: set %s_URL and %s_USER/%s_TOKEN (or %s_CREDS); %s starts one and writes them",
				tg.release, tg.env, tg.env, tg.env, tg.env, tg.up)
			if os.Getenv("CI") != "" {
				t.Error(msg)
			} else {
				t.Log(msg)
			}
			continue
		}
		for _, api := range tg.apis {
			c := *rs
			c.name = tg.release
			if api != "" {
				c.name += "-" + api
				c.url = strings.TrimRight(c.url, "/") + "/slurm/" + api
			}
			all = append(all, &c)
		}
	}
	if len(all) == 0 {
		t.Skip("no real Slurm")
	}
	return all
}

// realSlurmEnv reads one cluster's variables; nil if they are not set.
func realSlurmEnv(t testing.TB, env string) *realSlurm {
	t.Helper()
	rs := &realSlurm{url: os.Getenv(env + "_URL"), jwtKey: os.Getenv(env + "_JWT_KEY"), root: os.Getenv(env + "_ROOT")}
	switch dir := os.Getenv(env + "_CREDS"); {
	case os.Getenv(env+"_TOKEN") != "":
		rs.user = os.Getenv(env + "_USER")
		rs.creds = testutil.NewCreds(map[string]string{"username": rs.user, "token": os.Getenv(env + "_TOKEN")})
	case dir != "":
		rs.creds = dirCreds{dir}
		rs.user, _ = rs.creds.Get("username", "user")
	}
	if rs.url == "" || rs.creds == nil {
		return nil
	}
	if u, err := url.Parse(rs.url); err == nil {
		ip := net.ParseIP(u.Hostname())
		rs.local = u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())
	}
	return rs
}

func (rs *realSlurm) backend(t *testing.T, creds backends.Credentials) (*Backend, *countingTransport) {
	t.Helper()
	ct := &countingTransport{n: map[string]int{}, next: http.DefaultTransport}
	if creds == nil {
		creds = rs.creds
	}
	be, err := New(backends.Config{URL: rs.url, Credentials: creds, HTTPClient: &http.Client{Transport: ct},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	require.NoError(t, err)
	return be.(*Backend), ct
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newKey() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "br-" + hex.EncodeToString(b)
}

// waitFor polls Status until done(st) or the deadline; it returns the last
// status and how many polls it took.
func waitFor(t *testing.T, b *Backend, id string, limit time.Duration, done func(backends.Status) bool) (backends.Status, int) {
	t.Helper()
	deadline := time.Now().Add(limit)
	polls := 0
	for {
		st, err := b.Status(context.Background(), id)
		polls++
		require.NoError(t, err)
		if done(st) {
			return st, polls
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s (%s) after %s", id, st.State, st.Raw, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func final(st backends.Status) bool { return st.State.Final() }

// outPath is where a test job writes; /tmp is on the (one-node) cluster.
func outPath(key, ext string) string { return "/tmp/bridge-slurm-it-" + key + "." + ext }

func readJobFile(t *testing.T, rs *realSlurm, path string) (string, bool) {
	t.Helper()
	if !rs.local {
		t.Logf("slurmrestd is not on this machine: not reading %s", path)
		return "", false
	}
	path = filepath.Join(rs.root, path)
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the job's file on the cluster")
	t.Cleanup(func() { os.Remove(path) })
	return string(b), true
}

func TestRealSlurm(t *testing.T) {
	for _, rs := range realSlurms(t) {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel() // the clusters and APIs side by side: the timeout case alone takes over a minute
			testRealSlurm(t, rs)
		})
	}
}

func testRealSlurm(t *testing.T, rs *realSlurm) {
	for _, c := range realSlurmCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, rs) })
	}
}

// realSlurmCases: what every real cluster and API version is put through,
// each case starting its own jobs.
var realSlurmCases = []struct {
	name string
	run  func(t *testing.T, rs *realSlurm)
}{
	{"hello", realSlurmHello},
	{"submit-latency", realSlurmSubmitLatency},
	{"awkward-script", realSlurmAwkwardScript},
	{"exit-3", realSlurmExit3},
	{"timeout", realSlurmTimeout},
	{"cancel", realSlurmCancel},
	{"find-by-key", realSlurmFindByKey},
	{"remote-script", realSlurmRemoteScript},
	{"time-limit-shapes", realSlurmTimeLimitShapes},
	{"not-found", realSlurmNotFound},
	{"refused-properties", realSlurmRefusedProperties},
	{"site-gateway", realSlurmSiteGateway},
	{"bearer-token", realSlurmBearerToken},
	{"bad-token", realSlurmBadToken},
	{"redirect", realSlurmRedirect},
}

// realSlurmRedirect: the real slurmrestd behind a front that redirects the
// submit to another origin: refused and named, and the other origin gets
// no request (no token, no script); a slash added on the same origin works.
func realSlurmRedirect(t *testing.T, rs *realSlurm) {
	t.Parallel()
	u, err := url.Parse(rs.url)
	require.NoError(t, err)
	rd := testutil.NewRedirector(t, u.Scheme+"://"+u.Host, false)
	be, err := New(backends.Config{URL: rd.Front.URL + u.Path, Credentials: rs.creds, HTTPClient: rd.Front.Client()})
	require.NoError(t, err)
	submits := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/job/submit") }
	c := testutil.RedirectCases[0]
	for _, code := range testutil.RedirectCodes {
		rd.Set(code, submits, testutil.To(c.Dest(rd)))
		_, err = be.Submit(context.Background(), backends.Job{Name: "redirect", Key: newKey(), Script: "#!/bin/sh\ntrue\n"})
		testutil.RequireRefusedRedirect(t, err, rd, c, "slurmrestd", "POST /slurm/", "resourceURL")
	}
	rd.Set(http.StatusPermanentRedirect, submits, testutil.Slash)
	id, err := be.Submit(context.Background(), backends.Job{Name: "redirect", Key: newKey(), Script: "#!/bin/sh\ntrue\n"})
	require.NoError(t, err)
	require.NoError(t, be.Cancel(context.Background(), id))
}

func realSlurmHello(t *testing.T, rs *realSlurm) {
	t.Parallel()
	b, ct := rs.backend(t, nil)
	ctx := context.Background()
	start := time.Now()
	v, err := b.version(ctx)
	require.NoError(t, err)
	discovery, discoveryReqs := time.Since(start), ct.total()

	key := newKey()
	job := backends.Job{Name: "hello", Key: key, Script: "#!/bin/bash\necho \"hello from slurm as $(id -un) in $PWD\"\n",
		Properties: json.RawMessage(fmt.Sprintf(`{"standard_output":%q,"time_limit":5}`, outPath(key, "out")))}
	require.NoError(t, b.Validate(job))
	start = time.Now()
	id, err := b.Submit(ctx, job)
	submitRTT := time.Since(start)
	require.NoError(t, err)
	st, polls := waitFor(t, b, id, 60*time.Second, final)
	total := time.Since(start)
	require.Equal(t, backends.Done, st.State, st.Message)
	assert.Equal(t, "COMPLETED", st.Raw)
	require.NotNil(t, st.ExitCode)
	assert.Equal(t, 0, *st.ExitCode)
	assert.False(t, st.SubmitTime.IsZero() || st.StartTime.IsZero() || st.EndTime.IsZero(), "times: %+v", st)
	if out, ok := readJobFile(t, rs, outPath(key, "out")); ok {
		assert.Equal(t, "hello from slurm as "+rs.user+" in /tmp\n", out)
	}
	t.Logf("API %s; discovery %s in %d requests; submit round trip %s; DONE after %s; requests for the job: 1 submit + %d status (polling every 100 ms) = %d after discovery",
		v, discovery.Round(time.Millisecond), discoveryReqs, submitRTT.Round(time.Microsecond), total.Round(time.Millisecond), polls, ct.total()-discoveryReqs)
}

func realSlurmSubmitLatency(t *testing.T, rs *realSlurm) {
	t.Parallel()
	b, _ := rs.backend(t, nil)
	ctx := context.Background()
	_, err := b.version(ctx)
	require.NoError(t, err)
	var rtts []time.Duration
	for i := 0; i < 10; i++ {
		job := backends.Job{Name: "latency", Key: newKey(), Script: "#!/bin/sh\ntrue\n", Properties: json.RawMessage(`{"hold":true}`)}
		start := time.Now()
		id, err := b.Submit(ctx, job)
		rtts = append(rtts, time.Since(start))
		require.NoError(t, err)
		require.NoError(t, b.Cancel(ctx, id)) // held: never runs
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	t.Logf("submit round trip over %d jobs: min %s, median %s, max %s", len(rtts), rtts[0], rtts[len(rtts)/2], rtts[len(rtts)-1])
}

func realSlurmAwkwardScript(t *testing.T, rs *realSlurm) {
	t.Parallel()
	b, _ := rs.backend(t, nil)
	key := newKey()
	envValue := "quote ' double \" dollar $HOME back \\ tab\t é 中文 🚀 <&>"
	script := "#!/bin/bash\ncat \"$0\" > " + outPath(key, "script") + "\nprintf '%s' \"$AWKWARD\" > " + outPath(key, "env") + "\n" + strings.TrimPrefix(awkward(), "#!/bin/bash\n")
	props, _ := json.Marshal(map[string]any{"environment": map[string]string{"AWKWARD": envValue}, "time_limit": 5})
	id, err := b.Submit(context.Background(), backends.Job{Name: "awkward", Key: key, Script: script, Properties: props})
	require.NoError(t, err)
	st, _ := waitFor(t, b, id, 60*time.Second, final)
	require.Equal(t, backends.Done, st.State, st.Message)
	if got, ok := readJobFile(t, rs, outPath(key, "script")); ok {
		assert.Equal(t, len(script), len(got))
		assert.True(t, got == script, "the script Slurm ran differs from the one sent")
	}
	if got, ok := readJobFile(t, rs, outPath(key, "env")); ok {
		assert.Equal(t, envValue, got)
	}
}

func realSlurmExit3(t *testing.T, rs *realSlurm) {
	t.Parallel()
	b, _ := rs.backend(t, nil)
	id, err := b.Submit(context.Background(), backends.Job{Name: "exit3", Key: newKey(), Script: "#!/bin/sh\necho failing\nexit 3\n"})
	require.NoError(t, err)
	st, _ := waitFor(t, b, id, 60*time.Second, final)
	assert.Equal(t, backends.Failed, st.State)
	assert.Equal(t, "FAILED", st.Raw)
	assert.Equal(t, "NonZeroExitCode", st.Reason)
	require.NotNil(t, st.ExitCode)
	assert.Equal(t, 3, *st.ExitCode)
	assert.Contains(t, st.Message, "exit code 3")
}

func realSlurmTimeout(t *testing.T, rs *realSlurm) {
	if testing.Short() {
		t.Skip("takes over a minute")
	}
	t.Parallel()
	b, _ := rs.backend(t, nil)
	id, err := b.Submit(context.Background(), backends.Job{Name: "timeout", Key: newKey(), Script: "#!/bin/sh\nsleep 600\n",
		Properties: json.RawMessage(`{"time_limit":1}`)})
	require.NoError(t, err)
	st, _ := waitFor(t, b, id, 3*time.Minute, final)
	assert.Equal(t, backends.Failed, st.State)
	assert.Equal(t, "TIMEOUT", st.Raw)
	assert.Equal(t, "TIMEOUT", st.Reason)
	assert.WithinDuration(t, st.StartTime.Add(time.Minute), st.EndTime, 45*time.Second)
	t.Logf("TIMEOUT: %s", st.Message)
}

func realSlurmCancel(t *testing.T, rs *realSlurm) {
	t.Parallel()
	b, _ := rs.backend(t, nil)
	ctx := context.Background()
	id, err := b.Submit(ctx, backends.Job{Name: "cancel", Key: newKey(), Script: "#!/bin/sh\nsleep 600\n", Properties: json.RawMessage(`{"time_limit":15}`)})
	require.NoError(t, err)
	waitFor(t, b, id, 60*time.Second, func(st backends.Status) bool { return st.State == backends.Running })
	require.NoError(t, b.Cancel(ctx, id))
	st, _ := waitFor(t, b, id, 60*time.Second, final)
	assert.Equal(t, backends.Killed, st.State)
	assert.Equal(t, "CANCELLED", st.Raw)
	require.NoError(t, b.Cancel(ctx, id), "cancelling an ended job is fine")
}

func realSlurmFindByKey(t *testing.T, rs *realSlurm) {
	t.Parallel()
	b, _ := rs.backend(t, nil)
	ctx := context.Background()
	key := newKey()
	id, err := b.Submit(ctx, backends.Job{Name: "find", Key: key, Script: "#!/bin/sh\ntrue\n"})
	require.NoError(t, err)
	found, err := b.FindByKey(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, id, found)
	found, err = b.FindByKey(ctx, newKey())
	require.NoError(t, err)
	assert.Equal(t, "", found)
}

func realSlurmRemoteScript(t *testing.T, rs *realSlurm) {
	t.Parallel()
	if !rs.local {
		t.Skip("needs slurmrestd on this machine to place the script")
	}
	b, _ := rs.backend(t, nil)
	key := newKey()
	path := outPath(key, "sh")
	here := filepath.Join(rs.root, path)
	require.NoError(t, os.WriteFile(here, []byte("#!/bin/sh\necho remote ok\n"), 0o644)) // not executable: run through its #! line
	t.Cleanup(func() { os.Remove(here) })
	id, err := b.Submit(context.Background(), backends.Job{Name: "remote", Key: key, ScriptPath: path,
		Properties: json.RawMessage(fmt.Sprintf(`{"OutputFileName":%q}`, outPath(key, "out")))})
	require.NoError(t, err)
	st, _ := waitFor(t, b, id, 60*time.Second, final)
	require.Equal(t, backends.Done, st.State, st.Message)
	out, _ := readJobFile(t, rs, outPath(key, "out"))
	assert.Equal(t, "remote ok\n", out)
}

func realSlurmTimeLimitShapes(t *testing.T, rs *realSlurm) {
	t.Parallel()
	b, _ := rs.backend(t, nil)
	ctx := context.Background()
	for props, want := range map[string]string{
		`{"time_limit":"INFINITE"}`:                    "null",
		`{"time_limit":"0:30"}`:                        "1",
		`{"time_limit":"1-00:00:00"}`:                  "1440",
		`{"time_limit":{"set":true,"number":7}}`:       "7",
		`{"time_limit":{"set":false,"infinite":true}}`: "null",
	} {
		props = strings.Replace(props, "{", `{"hold":true,`, 1)
		id, err := b.Submit(ctx, backends.Job{Name: "tl", Key: newKey(), Script: "#!/bin/sh\ntrue\n", Properties: json.RawMessage(props)})
		require.NoError(t, err, props)
		r, err := b.do(ctx, http.MethodGet, b.apiPath("job/"+id), nil)
		require.NoError(t, err)
		var rec struct {
			Jobs []struct {
				TimeLimit json.RawMessage `json:"time_limit"`
			} `json:"jobs"`
		}
		require.NoError(t, json.Unmarshal(r.body, &rec))
		require.Len(t, rec.Jobs, 1)
		if tl := string(rec.Jobs[0].TimeLimit); !strings.HasPrefix(tl, "{") { // v0.0.38: minutes or null
			assert.Equal(t, want, tl, props)
		} else if n, ok := number(rec.Jobs[0].TimeLimit); want == "null" {
			assert.False(t, ok, props)
		} else {
			assert.Equal(t, want, fmt.Sprint(n), props)
		}
		require.NoError(t, b.Cancel(ctx, id))
	}
}

func realSlurmNotFound(t *testing.T, rs *realSlurm) {
	t.Parallel()
	b, _ := rs.backend(t, nil)
	_, err := b.Status(context.Background(), "99999999")
	assert.ErrorIs(t, err, backends.ErrNotFound)
	assert.ErrorIs(t, b.Cancel(context.Background(), "99999999"), backends.ErrNotFound)
}

func realSlurmRefusedProperties(t *testing.T, rs *realSlurm) {
	t.Parallel()
	var logs testutil.SyncBuffer
	be, err := New(backends.Config{URL: rs.url, Credentials: rs.creds, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	b := be.(*Backend)
	ctx := context.Background()
	v, err := b.version(ctx)
	require.NoError(t, err)
	refused := map[string]string{
		`{"partition":"nope"}`:  "Invalid partition name specified",
		`{"time_limit":"soon"}`: "time_limit",
	}
	unknown := `{"no_such_key":1,"hold":true}`
	if v <= 38 {
		refused[unknown] = `Unknown key "no_such_key"`
	} else {
		// v0.0.40+ parsers ignore an unknown key with a warning; the
		// backend passes the warning on to the log.
		id, err := b.Submit(ctx, backends.Job{Name: "unknown", Key: newKey(), Script: "#!/bin/sh\ntrue\n", Properties: json.RawMessage(unknown)})
		require.NoError(t, err)
		require.NoError(t, b.Cancel(ctx, id))
		assert.Contains(t, logs.String(), "no_such_key")
	}
	for props, want := range refused {
		_, err := b.Submit(ctx, backends.Job{Name: "bad", Key: newKey(), Script: "#!/bin/sh\ntrue\n", Properties: json.RawMessage(props)})
		require.ErrorIs(t, err, backends.ErrInvalid, props)
		assert.Contains(t, err.Error(), "jobproperties")
		assert.Contains(t, err.Error(), want)
	}
}

func realSlurmSiteGateway(t *testing.T, rs *realSlurm) {
	t.Parallel()
	u, err := url.Parse(rs.url)
	require.NoError(t, err)
	gw := siteGateway(t, u.Scheme+"://"+u.Host)
	creds := gatewayCreds(t, rs.creds, map[string]string{"tokenHeader": "X-Site-Token", "userHeader": "X-Site-User"})
	be, err := New(backends.Config{URL: gw.URL + "/site/hpc" + u.Path, Credentials: creds})
	require.NoError(t, err)
	b := be.(*Backend)
	id, err := b.Submit(context.Background(), backends.Job{Name: "gateway", Key: newKey(), Script: "#!/bin/sh\ntrue\n"})
	require.NoError(t, err)
	st, _ := waitFor(t, b, id, 60*time.Second, final)
	assert.Equal(t, backends.Done, st.State, st.Message)
}

// realSlurmBearerToken: the token as Authorization: Bearer, straight to
// slurmrestd without a user name and through a gateway that forwards only
// Authorization. 24.11 takes it; 22.05 refuses it with a plain 401, and the
// error says to drop tokenHeader.
func realSlurmBearerToken(t *testing.T, rs *realSlurm) {
	t.Parallel()
	b, _ := rs.backend(t, nil)
	v, err := b.version(context.Background())
	require.NoError(t, err)
	u, err := url.Parse(rs.url)
	require.NoError(t, err)
	gw := bearerGateway(t, u.Scheme+"://"+u.Host)
	for _, c := range []struct{ url, userHeader string }{{rs.url, "none"}, {gw.URL + u.Path, ""}} {
		creds := gatewayCreds(t, rs.creds, map[string]string{"tokenHeader": "Authorization", "userHeader": c.userHeader})
		be, err := New(backends.Config{URL: c.url, Credentials: creds})
		require.NoError(t, err)
		b = be.(*Backend)
		id, err := b.Submit(context.Background(), backends.Job{Name: "bearer", Key: newKey(), Script: "#!/bin/sh\ntrue\n"})
		if v < 39 {
			require.ErrorIs(t, err, backends.ErrAuth, c.url)
			assert.Contains(t, err.Error(), "HTTP 401 Unauthorized: slurmrestd did not accept the token as Authorization: Bearer (Slurm 22.05 and older read it only from X-SLURM-USER-TOKEN")
			tok, _ := rs.creds.Get("token")
			assert.NotContains(t, err.Error(), tok)
			continue
		}
		require.NoError(t, err, c.url)
		st, _ := waitFor(t, b, id, 60*time.Second, final)
		assert.Equal(t, backends.Done, st.State, st.Message)
	}
}

func realSlurmBadToken(t *testing.T, rs *realSlurm) {
	t.Parallel()
	ctx := context.Background()
	good, _ := rs.backend(t, nil)
	id, err := good.Submit(ctx, backends.Job{Name: "auth", Key: newKey(), Script: "#!/bin/sh\ntrue\n"})
	require.NoError(t, err)

	forged := mintJWT([]byte("not the cluster's key, 32 bytes."), rs.user, time.Now().Add(time.Hour))
	creds := testutil.NewCreds(map[string]string{"username": rs.user, "token": forged})
	b, _ := rs.backend(t, creds)
	_, err = b.Status(ctx, id)
	assert.ErrorIs(t, err, backends.ErrAuth, "status")
	_, err = b.Submit(ctx, backends.Job{Name: "auth", Key: newKey(), Script: "#!/bin/sh\ntrue\n"})
	assert.ErrorIs(t, err, backends.ErrAuth, "submit")
	assert.ErrorIs(t, b.Cancel(ctx, id), backends.ErrAuth, "cancel")
	_, err = b.FindByKey(ctx, "x")
	assert.ErrorIs(t, err, backends.ErrAuth, "find")

	if rs.jwtKey == "" {
		t.Log("BRIDGE_TEST_SLURM_JWT_KEY not set: skipping the expired-token half")
		return
	}
	key, err := os.ReadFile(rs.jwtKey)
	require.NoError(t, err)
	creds.Set("token", mintJWT(key, rs.user, time.Now().Add(-time.Minute)))
	_, err = b.Status(ctx, id)
	require.ErrorIs(t, err, backends.ErrAuth)
	assert.Contains(t, err.Error(), "expired at")
	_, err = b.Submit(ctx, backends.Job{Name: "auth", Key: newKey(), Script: "#!/bin/sh\ntrue\n"})
	require.ErrorIs(t, err, backends.ErrAuth)

	// Rotated to a good token minted with the cluster's key: works again.
	creds.Set("token", mintJWT(key, rs.user, time.Now().Add(time.Hour)))
	_, err = b.Status(ctx, id)
	assert.NoError(t, err)
}
