package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// syncBuffer collects log output from concurrent requests.

type harness struct {
	f     *fakeSlurm
	b     *Backend
	creds *testutil.Creds
	logs  *testutil.SyncBuffer
}

func newHarness(t *testing.T, release string, urlSuffix string) *harness {
	t.Helper()
	f := newFake(t, release)
	h := &harness{f: f, creds: testutil.NewCreds(map[string]string{"username": "bridge", "token": f.goodToken()}), logs: &testutil.SyncBuffer{}}
	be, err := New(backends.Config{URL: f.URL + urlSuffix, Credentials: h.creds, HTTPClient: f.Client(),
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	h.b = be.(*Backend)
	return h
}

// latest returns, for each known version, a harness on the newest release
// that serves it, pinned to it by URL.
func eachVersion(t *testing.T, fn func(t *testing.T, v apiVersion, h *harness)) {
	for v := minVersion; v <= maxVersion; v++ {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			fn(t, v, newHarness(t, releaseOf[v], "/slurm/"+v.String()+"/"))
		})
	}
}

func testJob(script string) backends.Job {
	return backends.Job{Name: "hello", Key: "br-0123456789abcdef0123", Script: script}
}

const hello = "#!/bin/bash\necho hello\n"

func TestDiscoveryPicksTheHighestServedVersion(t *testing.T) {
	for release, served := range releases {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, release, "/")
			id, err := h.b.Submit(context.Background(), testJob(hello))
			require.NoError(t, err)
			want := served[len(served)-1]
			reqs := h.f.reqs()
			assert.Equal(t, append(pingsDownTo(want), "POST /slurm/"+want.String()+"/job/submit"), reqs, "a ping per version from the newest known down to the newest served")
			assert.Contains(t, h.logs.String(), "slurm="+release)

			// Discovery happens once per backend.
			_, err = h.b.Status(context.Background(), id)
			require.NoError(t, err)
			assert.Len(t, h.f.reqs(), len(reqs)+1)
		})
	}
}

// pingsDownTo is discovery's requests on a server whose newest version
// this package knows is v.
func pingsDownTo(v apiVersion) []string {
	var l []string
	for n := maxVersion; n >= v; n-- {
		l = append(l, "GET /slurm/"+n.String()+"/ping")
	}
	return l
}

func TestURL(t *testing.T) {
	for _, c := range []struct {
		in, base string
		pinned   apiVersion
		old      apiVersion
		bad      bool
	}{
		{in: "http://h:6820", base: "http://h:6820"},
		{in: "http://h:6820/", base: "http://h:6820"},
		{in: "https://gw.example.org/hpc/", base: "https://gw.example.org/hpc"},
		{in: "http://h:6820/slurm/v0.0.40/", base: "http://h:6820", pinned: 40},
		{in: "http://h:6820/proxy/slurm/v0.0.38", base: "http://h:6820/proxy", pinned: 38},
		{in: "http://mycluster.ibm.com:6820/slurm/v0.0.36/", base: "http://mycluster.ibm.com:6820", old: 36},
		{in: "http://h:6820/slurm/v0.0.44/", base: "http://h:6820", pinned: 44},
		{in: "", bad: true},
		{in: "h:6820", bad: true},
		{in: "ftp://h/", bad: true},
		{in: "http://h:6820/?x=1", bad: true},
	} {
		base, pinned, old, err := parseURL(c.in)
		if c.bad {
			assert.ErrorIs(t, err, backends.ErrInvalid, c.in)
			assert.Contains(t, err.Error(), "resourceURL")
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.base, base, c.in)
		assert.Equal(t, c.pinned, pinned, c.in)
		assert.Equal(t, c.old, old, c.in)
	}
}

func TestPinnedVersionSkipsDiscovery(t *testing.T) {
	h := newHarness(t, "23.11.11", "/slurm/v0.0.39/")
	_, err := h.b.Submit(context.Background(), testJob(hello))
	require.NoError(t, err)
	assert.Equal(t, []string{"POST /slurm/v0.0.39/job/submit"}, h.f.reqs())

	// A version the server does not serve is a configuration error.
	h = newHarness(t, "22.05.8", "/slurm/v0.0.41/")
	_, err = h.b.Submit(context.Background(), testJob(hello))
	assert.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "resourceURL")

	// An old version in the URL (the Bridge Operator's samples) is ignored.
	h = newHarness(t, "22.05.8", "/slurm/v0.0.36/")
	_, err = h.b.Submit(context.Background(), testJob(hello))
	require.NoError(t, err)
	assert.Contains(t, h.logs.String(), "older than this backend speaks")
}

func TestNoSlurmrestdAtURL(t *testing.T) {
	h := newHarness(t, "nothing", "/") // serves no version
	_, err := h.b.Submit(context.Background(), testJob(hello))
	assert.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "serves none of the slurmrestd APIs")
}

func TestSubmitShapesPerVersion(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		job := testJob(hello)
		job.Parameters = json.RawMessage(`{"n": 3}`)
		job.Properties = json.RawMessage(`{"partition":"debug","time_limit":"1:30:00","tasks":2,
			"environment":{"OMP_NUM_THREADS":"4"},"standard_output":"/tmp/%j.out"}`)
		id, err := h.b.Submit(context.Background(), job)
		require.NoError(t, err)
		fj := h.f.job(id)
		require.NotNil(t, fj)
		assert.Equal(t, hello, fj.script)
		assert.Equal(t, "br-0123456789abcdef0123", fj.comment)
		assert.Equal(t, "hello", fj.name, "the user's name: squeue -n finds it")
		assert.Equal(t, "/tmp", fj.cwd)
		assert.Equal(t, "/tmp/%j.out", fj.stdout)
		require.NotNil(t, fj.timeLimit)
		assert.EqualValues(t, 90, *fj.timeLimit)
		assert.Equal(t, "4", fj.env["OMP_NUM_THREADS"])
		assert.Equal(t, DefaultPath, fj.env["PATH"])
		assert.Equal(t, "br-0123456789abcdef0123", fj.env["BRIDGE_JOB_KEY"])
		assert.Equal(t, `{"n": 3}`, fj.env["BRIDGE_JOB_PARAMETERS"])
		assert.EqualValues(t, 2, fj.body["tasks"])

		switch {
		case v == 38:
			assert.IsType(t, map[string]any{}, fj.body["environment"])
			assert.EqualValues(t, 90, fj.body["time_limit"])
		default:
			assert.IsType(t, []any{}, fj.body["environment"])
			assert.Equal(t, map[string]any{"set": true, "infinite": false, "number": float64(90)}, fj.body["time_limit"])
		}
		assert.Equal(t, v >= 41, fj.jobScript, "job.script from v0.0.41")
		assert.Equal(t, v < 41, fj.topLevelScript, "top-level script before v0.0.41")
	})
}

func TestInfiniteTimeLimit(t *testing.T) {
	assert.Equal(t, "INFINITE", (&timeLimit{infinite: true}).encode(38))
	assert.Equal(t, map[string]any{"set": false, "infinite": true, "number": uint32(0)}, (&timeLimit{infinite: true}).encode(40))
}

// awkward has every character a hand-built JSON string gets wrong.
func awkward() string {
	var sb strings.Builder
	sb.WriteString("#!/bin/bash\n")
	sb.WriteString("# quotes ' \" ` and backslashes \\ \\n \\\" \\\\\n")
	sb.WriteString("echo \"$HOME ${USER:-x} $(date) $((1+2))\" '$PATH'\n")
	sb.WriteString("printf 'tab\there\\n'\t# a real tab\n")
	sb.WriteString("# unicode: é ü ß 中文 日本語 🚀 \u2028 \u2029 and <html> & {\"json\": [1]}\n")
	sb.WriteString("# a carriage return\r in the middle, %j %x %% and a NUL-free \x01\x1f control\n")
	sb.WriteString("cat <<'EOF'\n$not $expanded \"x\"\nEOF\n")
	for sb.Len() < 200*1024 {
		sb.WriteString("# filler line to make the script 200 KB long: 0123456789 abcdefghijklmnopqrstuvwxyz\n")
	}
	sb.WriteString("exit 0") // no final newline
	return sb.String()
}

func TestScriptArrivesByteForByte(t *testing.T) {
	script := awkward()
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		id, err := h.b.Submit(context.Background(), testJob(script))
		require.NoError(t, err)
		assert.True(t, h.f.job(id).script == script, "the script changed on the way")
	})
}

func TestScriptRefusedBeforeSubmit(t *testing.T) {
	h := newHarness(t, "22.05.8", "/")
	for _, c := range []struct{ script, want string }{
		{"echo no shebang\n", "must start with a #! line"},
		{"", "empty"},
		{"  \n", "empty"},
		{"\ufeff#!/bin/sh\necho\n", "byte-order mark"},
		{"#!/bin/sh\r\necho\r\n", "carriage return"},
		{"#!/bin/sh\necho \x00\n", "NUL"},
		{"#!/bin/sh\necho \xff\xfe\n", "UTF-8"},
	} {
		err := h.b.Validate(testJob(c.script))
		require.ErrorIs(t, err, backends.ErrInvalid, "%q", c.script)
		var fe *backends.FieldError
		require.True(t, errors.As(err, &fe))
		assert.Equal(t, "jobdata.jobScript", fe.Field)
		assert.Contains(t, err.Error(), c.want)
		_, err = h.b.Submit(context.Background(), testJob(c.script))
		assert.ErrorIs(t, err, backends.ErrInvalid)
	}
	assert.Empty(t, h.f.reqs(), "nothing may be sent for a refused script")
}

func TestRemoteScriptWrapper(t *testing.T) {
	h := newHarness(t, "22.05.8", "/")
	job := backends.Job{Name: "r", Key: "br-1", ScriptPath: "/home/u/it's here.sh"}
	id, err := h.b.Submit(context.Background(), job)
	require.NoError(t, err)
	s := h.f.job(id).script
	assert.True(t, strings.HasPrefix(s, "#!/bin/sh\n"))
	assert.Contains(t, s, `script='/home/u/it'\''s here.sh'`)
}

func TestIBMAliases(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		job := testJob(hello)
		// As in IBM/Bridge-Operator samples/core/operator/job0slurm.yaml.
		job.Properties = json.RawMessage(`{
			"NodesNumber":"1", "Queue": "debug", "Tasks": "1", "slurmJobName": "test",
			"currentWorkingDir": "/home/ec2-user/test/",
			"envPath": "/usr/mpi/bin:/usr/bin",
			"envLibPath": "/usr/mpi/lib",
			"ErrorFileName": "slurmjob-sample.err",
			"OutputFileName": "slurmjob-sample.out"}`)
		id, err := h.b.Submit(context.Background(), job)
		require.NoError(t, err)
		fj := h.f.job(id)
		if v.dataParser() { // a string, or 24.11 warns on every submit
			assert.Equal(t, "1", fj.body["nodes"])
		} else {
			assert.EqualValues(t, 1, fj.body["nodes"])
		}
		assert.EqualValues(t, 1, fj.body["tasks"])
		assert.Equal(t, "debug", fj.body["partition"])
		assert.Equal(t, "test", fj.name)
		assert.Equal(t, "/home/ec2-user/test/", fj.cwd)
		assert.Equal(t, "slurmjob-sample.out", fj.stdout)
		assert.Equal(t, "slurmjob-sample.err", fj.body["standard_error"])
		assert.Equal(t, "/usr/mpi/bin:/usr/bin", fj.env["PATH"])
		assert.Equal(t, "/usr/mpi/lib", fj.env["LD_LIBRARY_PATH"])
		for _, ibm := range []string{"NodesNumber", "Queue", "Tasks", "slurmJobName", "currentWorkingDir", "envPath", "envLibPath", "ErrorFileName", "OutputFileName"} {
			assert.NotContains(t, fj.body, ibm)
		}
	})
}

func TestPropertiesRefused(t *testing.T) {
	h := newHarness(t, "22.05.8", "/")
	for _, c := range []struct{ props, want string }{
		{`[1]`, "must be a JSON object"},
		{`{"Queue":"a","partition":"b"}`, `both "Queue" and "partition"`},
		{`{"comment":"mine"}`, "idempotency key"},
		{`{"Comment":"mine"}`, "idempotency key"},
		{`{"script":"#!/bin/sh"}`, "jobdata.jobScript"},
		{`{"environment":"PATH=/bin"}`, "environment must be"},
		{`{"environment":["PATH"]}`, "not NAME=value"},
		{`{"environment":{"A=B":"x"}}`, "not valid"},
		{`{"time_limit":"soon"}`, "time_limit"},
		{`{"time_limit":1.5}`, "time_limit"},
	} {
		job := testJob(hello)
		job.Properties = json.RawMessage(c.props)
		err := h.b.Validate(job)
		require.ErrorIs(t, err, backends.ErrInvalid, c.props)
		assert.Contains(t, err.Error(), "jobproperties")
		assert.Contains(t, err.Error(), c.want)
	}
	assert.Empty(t, h.f.reqs())
}

func TestSlurmRefusalsAreInvalid(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		job := testJob(hello)
		job.Properties = json.RawMessage(`{"bogus":1}`)
		_, err := h.b.Submit(context.Background(), job)
		require.ErrorIs(t, err, backends.ErrInvalid)
		assert.Contains(t, err.Error(), "jobproperties")
		assert.Contains(t, err.Error(), `Unknown key "bogus"`, "Slurm's words, verbatim")

		job.Properties = json.RawMessage(`{"partition":"gpu"}`)
		_, err = h.b.Submit(context.Background(), job)
		require.ErrorIs(t, err, backends.ErrInvalid)
		assert.Contains(t, err.Error(), "Invalid partition name specified")
	})
}

func TestTimeLimitFormats(t *testing.T) {
	for in, want := range map[string]uint32{
		"90": 90, "5:30": 6, "1:30:00": 90, "2-0": 2880, "1-2:3": 1563, "1-0:0:1": 1441, "0": 0,
	} {
		m, inf, ok := parseSlurmTime(in)
		assert.True(t, ok, in)
		assert.False(t, inf, in)
		assert.Equal(t, want, m, in)
	}
	for _, in := range []string{"INFINITE", "unlimited"} {
		_, inf, ok := parseSlurmTime(in)
		assert.True(t, ok && inf, in)
	}
	for _, in := range []string{"", "x", "1:2:3:4", "-5", "1-2:3:4:5"} {
		_, _, ok := parseSlurmTime(in)
		assert.False(t, ok, in)
	}
	tl, err := parseTimeLimit(json.RawMessage(`{"set":true,"infinite":false,"number":15}`))
	require.NoError(t, err)
	assert.EqualValues(t, 15, tl.minutes)
	for _, unset := range []string{`{"set":false}`, `null`} {
		tl, err = parseTimeLimit(json.RawMessage(unset))
		require.NoError(t, err)
		assert.Nil(t, tl, unset)
	}
}

func TestStateMapping(t *testing.T) {
	for _, c := range []struct {
		states []string
		reason string
		want   backends.State
		wantR  string
	}{
		{[]string{"PENDING"}, "Priority", backends.Pending, "Priority"},
		{[]string{"RUNNING"}, "None", backends.Running, ""},
		{[]string{"SUSPENDED"}, "", backends.Suspended, ""},
		{[]string{"COMPLETED"}, "None", backends.Done, ""},
		{[]string{"CANCELLED"}, "None", backends.Killed, ""},
		{[]string{"FAILED"}, "NonZeroExitCode", backends.Failed, "NonZeroExitCode"},
		{[]string{"FAILED"}, "None", backends.Failed, "FAILED"},
		{[]string{"TIMEOUT"}, "TimeLimit", backends.Failed, "TIMEOUT"},
		{[]string{"NODE_FAIL"}, "", backends.Failed, "NODE_FAIL"},
		{[]string{"PREEMPTED"}, "", backends.Failed, "PREEMPTED"},
		{[]string{"BOOT_FAIL"}, "", backends.Failed, "BOOT_FAIL"},
		{[]string{"DEADLINE"}, "", backends.Failed, "DEADLINE"},
		{[]string{"OUT_OF_MEMORY"}, "", backends.Failed, "OUT_OF_MEMORY"},
		// Flags, alone (≤v0.0.39 strings) and with a base state (v0.0.40+).
		{[]string{"COMPLETING"}, "", backends.Running, "COMPLETING"},
		{[]string{"COMPLETED", "COMPLETING"}, "", backends.Running, "COMPLETING"},
		{[]string{"TIMEOUT", "COMPLETING"}, "", backends.Running, "COMPLETING"},
		{[]string{"STAGE_OUT"}, "", backends.Running, "STAGE_OUT"},
		{[]string{"PENDING", "COMPLETING"}, "", backends.Pending, "COMPLETING"},
		{[]string{"CONFIGURING"}, "", backends.Running, "CONFIGURING"},
		{[]string{"RUNNING", "CONFIGURING"}, "", backends.Running, ""},
		{[]string{"POWER_UP_NODE"}, "", backends.Running, "POWER_UP_NODE"},
		{[]string{"RESIZING"}, "", backends.Running, "RESIZING"},
		{[]string{"SIGNALING"}, "", backends.Running, "SIGNALING"},
		{[]string{"RUNNING", "SIGNALING"}, "", backends.Running, ""},
		{[]string{"REQUEUED"}, "", backends.Pending, "REQUEUED"},
		{[]string{"PENDING", "EXPEDITING"}, "", backends.Pending, "EXPEDITING"},
		{[]string{"NODE_FAIL", "EXPEDITING"}, "", backends.Pending, "EXPEDITING"},
		{[]string{"NODE_FAIL", "REQUEUED"}, "", backends.Pending, "REQUEUED"},
		{[]string{"REQUEUE_FED"}, "", backends.Pending, "REQUEUE_FED"},
		// Held jobs are SUSPENDED, as the README's state table says (issue 25).
		{[]string{"PENDING", "REQUEUE_HOLD"}, "JobHeldUser", backends.Suspended, "JobHeldUser"},
		{[]string{"SPECIAL_EXIT"}, "", backends.Suspended, "SPECIAL_EXIT"},
		{[]string{"RESV_DEL_HOLD"}, "", backends.Suspended, "RESV_DEL_HOLD"},
		{[]string{"PENDING"}, "JobHeldUser", backends.Suspended, "JobHeldUser"},
		{[]string{"PENDING"}, "JobHeldAdmin", backends.Suspended, "JobHeldAdmin"},
		{[]string{"STOPPED"}, "", backends.Suspended, "STOPPED"},
		{[]string{"RUNNING", "STOPPED"}, "", backends.Suspended, "STOPPED"},
		{[]string{"REVOKED"}, "", backends.Unknown, "REVOKED"},
		{[]string{"FAILED", "LAUNCH_FAILED"}, "", backends.Failed, "FAILED"},
		{[]string{"COMPLETED", "UPDATE_DB"}, "", backends.Done, ""},
		{[]string{"RUNNING", "RECONFIG_FAIL"}, "", backends.Running, ""},
		{[]string{"NEW_STATE_2030"}, "", backends.Running, "unrecognized Slurm state NEW_STATE_2030"},
	} {
		got, reason := mapState(c.states, c.reason)
		assert.Equal(t, c.want, got, "%v", c.states)
		assert.Equal(t, c.wantR, reason, "%v", c.states)
	}
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		raw    string
		code   int
		signal int
		ok     bool
	}{
		{`0`, 0, 0, true},
		{`768`, 3, 0, true},   // v0.0.38: exit 3 as a wait status
		{`15`, 143, 15, true}, // v0.0.38: SIGTERM
		{`null`, 0, 0, false},
		{`4294967294`, 0, 0, false}, // NO_VAL
		{`{"set":true,"infinite":false,"number":768}`, 3, 0, true},
		{`{"set":false,"infinite":false,"number":0}`, 0, 0, false},
		{`{"status":["SUCCESS"],"return_code":{"set":true,"infinite":false,"number":0},"signal":{"id":{"set":false,"infinite":false,"number":0},"name":""}}`, 0, 0, true},
		{`{"status":["ERROR"],"return_code":{"set":true,"infinite":false,"number":3},"signal":{"id":{"set":false,"infinite":false,"number":0},"name":""}}`, 3, 0, true},
		{`{"status":["SIGNALED"],"return_code":{"set":false,"infinite":false,"number":0},"signal":{"id":{"set":true,"infinite":false,"number":9},"name":"KILL"}}`, 137, 9, true},
		{`{"status":["PENDING"],"return_code":{"set":false,"infinite":false,"number":0},"signal":{"id":{"set":false,"infinite":false,"number":0},"name":""}}`, 0, 0, false},
	} {
		e, ok := decodeExitCode(json.RawMessage(c.raw))
		assert.Equal(t, c.ok, ok, c.raw)
		if ok {
			assert.Equal(t, c.code, e.code, c.raw)
			assert.Equal(t, c.signal, e.signal, c.raw)
		}
	}
}

func TestStatusPerVersion(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		ctx := context.Background()
		for _, c := range []struct {
			state    []string
			reason   string
			exit     *uint32
			want     backends.State
			wantR    string
			wantCode *int
			wantRaw  string
		}{
			{state: []string{"PENDING"}, reason: "Priority", want: backends.Pending, wantR: "Priority", wantRaw: "PENDING"},
			{state: []string{"RUNNING"}, reason: "None", want: backends.Running, wantRaw: "RUNNING"},
			{state: []string{"COMPLETED"}, reason: "None", exit: u32(0), want: backends.Done, wantCode: ptr(0), wantRaw: "COMPLETED"},
			{state: []string{"FAILED"}, reason: "NonZeroExitCode", exit: u32(3 << 8), want: backends.Failed, wantR: "NonZeroExitCode", wantCode: ptr(3), wantRaw: "FAILED"},
			{state: []string{"TIMEOUT"}, reason: "TimeLimit", exit: u32(15), want: backends.Failed, wantR: "TIMEOUT", wantCode: ptr(143), wantRaw: "TIMEOUT"},
			{state: []string{"OUT_OF_MEMORY"}, reason: "OutOfMemory", exit: u32(9), want: backends.Failed, wantR: "OUT_OF_MEMORY", wantCode: ptr(137), wantRaw: "OUT_OF_MEMORY"},
			{state: []string{"CANCELLED"}, reason: "None", exit: u32(15), want: backends.Killed, wantCode: ptr(143), wantRaw: "CANCELLED"},
			{state: []string{"COMPLETED", "COMPLETING"}, reason: "None", exit: u32(0), want: backends.Running, wantR: "COMPLETING"},
			{state: []string{"NODE_FAIL", "REQUEUED"}, reason: "None", want: backends.Pending, wantR: "REQUEUED"},
		} {
			id, err := h.b.Submit(ctx, testJob(hello))
			require.NoError(t, err)
			h.f.set(id, c.reason, c.exit, c.state...)
			st, err := h.b.Status(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, c.want, st.State, "%v", c.state)
			assert.Equal(t, c.wantR, st.Reason, "%v", c.state)
			assert.Equal(t, c.wantCode, st.ExitCode, "%v", c.state)
			if c.wantRaw != "" {
				assert.Equal(t, c.wantRaw, st.Raw)
			}
			assert.False(t, st.SubmitTime.IsZero())
			if c.want == backends.Pending {
				assert.True(t, st.StartTime.IsZero(), "a pending job's start_time is a forecast")
			} else {
				assert.False(t, st.StartTime.IsZero())
			}
			assert.Equal(t, c.want.Final(), !st.EndTime.IsZero(), "end_time only once final")
			assert.Contains(t, st.Message, "Slurm job "+id)
		}
	})
}

func ptr(n int) *int { return &n }

func TestVanishedJobIsNotFound(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		ctx := context.Background()
		id, err := h.b.Submit(ctx, testJob(hello))
		require.NoError(t, err)
		h.f.set(id, "None", nil, "RUNNING")
		_, err = h.b.Status(ctx, id)
		require.NoError(t, err)
		h.f.vanish(id) // MinJobAge passed
		_, err = h.b.Status(ctx, id)
		assert.ErrorIs(t, err, backends.ErrNotFound)
		assert.NotErrorIs(t, err, backends.ErrTransient)
		assert.ErrorIs(t, h.b.Cancel(ctx, id), backends.ErrNotFound)
		_, err = h.b.Status(ctx, "12345678")
		assert.ErrorIs(t, err, backends.ErrNotFound)
		_, err = h.b.Status(ctx, "../jobs")
		assert.ErrorIs(t, err, backends.ErrNotFound)
	})
}

// With accounting, a job past MinJobAge is read from slurmdbd: its final
// state, exit code and times, not UNKNOWN; a job slurmdbd does not know
// either is still not found, and a slurmdbd behind a failing gateway is a
// transient error, not a verdict.
func TestVanishedJobIsReadFromAccounting(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		ctx := context.Background()
		h.f.accounting = true
		id, err := h.b.Submit(ctx, testJob(hello))
		require.NoError(t, err)
		h.f.set(id, "NonZeroExitCode", u32(3<<8), "FAILED")
		live, err := h.b.Status(ctx, id)
		require.NoError(t, err)
		h.f.vanish(id)
		st, err := h.b.Status(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, backends.Failed, st.State)
		assert.Equal(t, "FAILED", st.Raw)
		require.NotNil(t, st.ExitCode)
		assert.Equal(t, 3, *st.ExitCode)
		assert.Equal(t, live.EndTime, st.EndTime)
		assert.Equal(t, "/slurmdb/"+v.String()+"/job/"+id, strings.Fields(h.f.reqs()[len(h.f.reqs())-1])[1])

		_, err = h.b.Status(ctx, "12345678")
		assert.ErrorIs(t, err, backends.ErrNotFound)
		h.f.addFault(&fault{path: "/slurmdb/" + v.String() + "/job/12345678", status: 503, body: "busy", contentType: "text/plain", times: 1})
		_, err = h.b.Status(ctx, "12345678")
		assert.ErrorIs(t, err, backends.ErrTransient)
	})
}

func TestCancel(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		ctx := context.Background()
		id, err := h.b.Submit(ctx, testJob(hello))
		require.NoError(t, err)
		h.f.set(id, "None", nil, "RUNNING")
		require.NoError(t, h.b.Cancel(ctx, id))
		st, err := h.b.Status(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, backends.Killed, st.State)
		assert.Equal(t, "CANCELLED", st.Raw)
		// Cancelling an ended job is fine.
		require.NoError(t, h.b.Cancel(ctx, id))
		for _, r := range h.f.reqs() {
			if strings.HasPrefix(r, "DELETE") {
				assert.Equal(t, "DELETE /slurm/"+v.String()+"/job/"+id, r, "DELETE without ?signal=, which would only signal")
			}
		}
	})
}

func TestFindByKey(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		ctx := context.Background()
		other := testJob(hello)
		other.Key = "br-ffffffffffffffffffff"
		_, err := h.b.Submit(ctx, other)
		require.NoError(t, err)
		id, err := h.b.Submit(ctx, testJob(hello))
		require.NoError(t, err)
		found, err := h.b.FindByKey(ctx, "br-0123456789abcdef0123")
		require.NoError(t, err)
		assert.Equal(t, id, found)
		found, err = h.b.FindByKey(ctx, "br-00000000000000000000")
		require.NoError(t, err)
		assert.Equal(t, "", found)
		assert.Equal(t, "GET /slurm/"+v.String()+"/jobs/", h.f.reqs()[len(h.f.reqs())-1])
	})
}

func TestBadTokenIsErrAuth(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		ctx := context.Background()
		id, err := h.b.Submit(ctx, testJob(hello))
		require.NoError(t, err)
		// A token slurmctld does not accept (wrong signature, not expired).
		h.creds.Set("token", mintJWT([]byte("another key, another cluster...."), "bridge", time.Now().Add(time.Hour)))
		_, err = h.b.Status(ctx, id)
		assert.ErrorIs(t, err, backends.ErrAuth, "status")
		assert.NotErrorIs(t, err, backends.ErrTransient)
		_, err = h.b.Submit(ctx, testJob(hello))
		assert.ErrorIs(t, err, backends.ErrAuth, "submit")
		assert.ErrorIs(t, h.b.Cancel(ctx, id), backends.ErrAuth, "cancel")
		_, err = h.b.FindByKey(ctx, "br-x")
		assert.ErrorIs(t, err, backends.ErrAuth, "find")
		assert.NotContains(t, err.Error(), "another key", "no token in messages")

		// The Secret is rotated: the next request uses the new token.
		h.creds.Set("token", h.f.goodToken())
		_, err = h.b.Status(ctx, id)
		assert.NoError(t, err)
	})
}

func TestExpiredToken(t *testing.T) {
	h := newHarness(t, "22.05.8", "/")
	ctx := context.Background()
	id, err := h.b.Submit(ctx, testJob(hello))
	require.NoError(t, err)
	expired := mintJWT(fakeKey, "bridge", time.Now().Add(-time.Minute))
	h.f.mu.Lock()
	h.f.tokens[expired] = true // slurmctld would know it, but exp has passed
	h.f.mu.Unlock()
	h.creds.Set("token", expired)
	n := len(h.f.reqs())
	_, err = h.b.Submit(ctx, testJob(hello))
	require.ErrorIs(t, err, backends.ErrAuth)
	assert.Contains(t, err.Error(), "expired at")
	assert.Len(t, h.f.reqs(), n, "an expired token is refused before anything is sent")

	_, err = h.b.Status(ctx, id)
	require.ErrorIs(t, err, backends.ErrAuth)
	assert.Contains(t, err.Error(), "expired at")
}

func TestTokenExpiringBeforeTimeLimitIsWarned(t *testing.T) {
	h := newHarness(t, "22.05.8", "/")
	short := mintJWT(fakeKey, "bridge", time.Now().Add(10*time.Minute))
	h.f.mu.Lock()
	h.f.tokens[short] = true
	h.f.mu.Unlock()
	h.creds.Set("token", short)
	job := testJob(hello)
	job.Properties = json.RawMessage(`{"time_limit":60}`)
	_, err := h.b.Submit(context.Background(), job)
	require.NoError(t, err)
	assert.Contains(t, h.logs.String(), "level=WARN")
	assert.Contains(t, h.logs.String(), "expires before the job's time limit")

	h.logs = &testutil.SyncBuffer{}
	h.b.log = slog.New(slog.NewTextHandler(h.logs, nil))
	job.Properties = json.RawMessage(`{"time_limit":5}`)
	_, err = h.b.Submit(context.Background(), job)
	require.NoError(t, err)
	assert.NotContains(t, h.logs.String(), "level=WARN")
}

func TestControllerDownIsTransientNotAuth(t *testing.T) {
	eachVersion(t, func(t *testing.T, v apiVersion, h *harness) {
		ctx := context.Background()
		id, err := h.b.Submit(ctx, testJob(hello))
		require.NoError(t, err)
		h.f.mu.Lock()
		h.f.ctldDown = true
		h.f.mu.Unlock()
		_, err = h.b.Status(ctx, id)
		assert.ErrorIs(t, err, backends.ErrTransient)
		assert.NotErrorIs(t, err, backends.ErrAuth)
		_, err = h.b.Submit(ctx, testJob(hello))
		assert.ErrorIs(t, err, backends.ErrTransient)
		assert.NotErrorIs(t, err, backends.ErrInvalid)
	})
}

func TestTransientFaults(t *testing.T) {
	for _, fl := range []fault{
		{status: 502, body: "bad gateway", contentType: "text/plain"},
		{status: 503, body: "{}"},
		{status: 504, body: "gateway timeout", contentType: "text/html"},
		{status: 429, body: "slow down", contentType: "text/plain"},
		{drop: true},
		{status: 500, body: `{"errors":[{"error_code":1800,"error":"Unable to contact slurm controller (connect failure)"}]}`},
		{status: 500, body: `{"errors":[{"error_number":2007,"error":"Slurm temporarily unable to accept job, sleeping and retrying"}]}`},
		{delay: time.Second, status: 200, body: "{}"},
	} {
		t.Run(fmt.Sprintf("%d-drop=%v-delay=%v", fl.status, fl.drop, fl.delay), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "24.11.7", "/")
			if fl.drop {
				// net/http replays an idempotent request whose reused
				// connection drops; make every connection new.
				h.b.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			}
			ctx := context.Background()
			id, err := h.b.Submit(ctx, testJob(hello))
			require.NoError(t, err)
			// Short only for the faulted requests (the delay's 1 s must
			// outlast it): the discovery and the first submit, and the
			// request after the faults, keep the default, which a loaded
			// machine needs (a fresh connection's ping took over 200 ms).
			normal := h.b.requestTimeout
			h.b.requestTimeout = 200 * time.Millisecond
			for _, path := range []string{"/job/" + id, "/job/submit", "/jobs/"} {
				f := fl
				f.path, f.times = strings.TrimSuffix(path, "/"), 1

				h.f.addFault(&f)
			}
			_, err = h.b.Status(ctx, id)
			assert.ErrorIs(t, err, backends.ErrTransient, "status")
			_, err = h.b.Submit(ctx, testJob(hello))
			assert.ErrorIs(t, err, backends.ErrTransient, "submit")
			_, err = h.b.FindByKey(ctx, "br-0123456789abcdef0123")
			assert.ErrorIs(t, err, backends.ErrTransient, "find")
			// and the next request works again
			h.b.requestTimeout = normal
			_, err = h.b.Status(ctx, id)
			assert.NoError(t, err)
		})
	}
}

func TestDiscoveryTransient(t *testing.T) {
	h := newHarness(t, "24.11.7", "/")
	h.f.addFault(&fault{path: "/v0.0.44/ping", status: 503, body: "busy", contentType: "text/plain", times: 1})
	_, err := h.b.Submit(context.Background(), testJob(hello))
	assert.ErrorIs(t, err, backends.ErrTransient, "a higher version may be served: do not settle")
	_, err = h.b.Submit(context.Background(), testJob(hello))
	require.NoError(t, err)
	assert.Equal(t, apiVersion(42), h.b.ver.v)
}

// A gateway that refuses ping: the OpenAPI document instead.
func TestDiscoveryByDocumentBehindAGateway(t *testing.T) {
	h := newHarness(t, "24.11.7", "/")
	h.f.addFault(&fault{path: "/ping", status: 403, body: "forbidden", contentType: "text/html"})
	_, err := h.b.Submit(context.Background(), testJob(hello))
	require.NoError(t, err)
	assert.Equal(t, apiVersion(42), h.b.ver.v)
	assert.Equal(t, []string{"GET /slurm/v0.0.46/ping", "GET /openapi/v3", "POST /slurm/v0.0.42/job/submit"}, h.f.reqs())

	h2 := newHarness(t, "24.11.7", "/")
	h2.f.addFault(&fault{path: "/ping", status: 404, body: "no", contentType: "text/plain"})
	h2.f.addFault(&fault{path: "/openapi/v3", status: 404, body: "no", contentType: "text/plain"})
	_, err = h2.b.Submit(context.Background(), testJob(hello))
	require.ErrorIs(t, err, backends.ErrInvalid, "neither ping nor the document: not slurmrestd")
	assert.Contains(t, err.Error(), "resourceURL")
}

// Newer servers than this package knows: the oldest of their versions, spoken
// like the newest known; none at all is a resourceURL error.
func TestDiscoveryChoosesFromTheDocument(t *testing.T) {
	for _, c := range []struct {
		paths []string
		want  apiVersion
	}{
		{[]string{"/slurm/v0.0.41/ping/", "/slurm/v0.0.42/ping/", "/slurmdb/v0.0.42/jobs/", "/slurm/v0.0.99/ping/"}, 42},
		{[]string{"/slurm/v0.0.98/ping/", "/slurm/v0.0.99/job/submit"}, 98},
		{[]string{"/slurm/v0.0.36/ping", "/slurm/v0.0.37/ping", "/slurm/v0.0.38/ping"}, 38},
		{[]string{"/slurm/v0.0.36/ping", "/slurmdb/v0.0.43/ping/"}, 0},
	} {
		paths := map[string]any{}
		for _, p := range c.paths {
			paths[p] = map[string]any{"get": map[string]any{}}
		}
		body, _ := json.Marshal(map[string]any{"info": map[string]any{"version": "Slurm-26.05.1&openapi/slurmctld"}, "paths": paths})
		h := newHarness(t, "24.11.7", "/")
		h.f.addFault(&fault{path: "/ping", status: 404, body: "Unable find requested URL.", contentType: "text/plain"}) // serves none we know
		h.f.addFault(&fault{path: "/openapi/v3", status: 200, body: string(body)})
		v, err := h.b.version(context.Background())
		if c.want == 0 {
			require.ErrorIs(t, err, backends.ErrInvalid, c.paths)
			assert.Contains(t, err.Error(), "v0.0.36")
			continue
		}
		require.NoError(t, err, c.paths)
		assert.Equal(t, c.want, v, c.paths)
	}
}

// A re-attaching invoke recalls the version from the record and sends no
// discovery request; a recalled version the server no longer serves (it
// was upgraded) is a transient error, and the retry discovers again.
func TestRecalledVersion(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "24.11.7", "/")
	id, err := h.b.Submit(ctx, testJob(hello))
	require.NoError(t, err)
	memo := h.b.Remember()
	assert.Equal(t, "api=v0.0.42", memo)

	be, err := New(backends.Config{URL: h.f.URL, Credentials: h.creds, HTTPClient: h.f.Client()})
	require.NoError(t, err)
	b := be.(*Backend)
	b.Recall(memo)
	before := len(h.f.reqs())
	_, err = b.Status(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"GET /slurm/v0.0.42/job/" + id}, h.f.reqs()[before:], "no discovery")

	b.Recall("api=v0.0.nope") // ignored: already known
	pinned, err := New(backends.Config{URL: h.f.URL + "/slurm/v0.0.41", Credentials: h.creds, HTTPClient: h.f.Client()})
	require.NoError(t, err)
	assert.Equal(t, "", pinned.(backends.Rememberer).Remember(), "a pinned URL needs no memo")

	old := newHarness(t, "24.11.7", "/")
	old.b.Recall("api=v0.0.39") // the cluster was upgraded since
	_, err = old.b.Status(ctx, "100")
	require.ErrorIs(t, err, backends.ErrTransient)
	_, err = old.b.Status(ctx, "100")
	assert.ErrorIs(t, err, backends.ErrNotFound, "discovered v0.0.42 and asked again")
	assert.Equal(t, apiVersion(42), old.b.ver.v)
}

func TestSubmitWithoutJobID(t *testing.T) {
	h := newHarness(t, "22.05.8", "/slurm/v0.0.38/")
	h.f.addFault(&fault{path: "/job/submit", status: 200, body: `{"meta":{},"errors":[]}`})
	_, err := h.b.Submit(context.Background(), testJob(hello))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "without a job id")
}

func TestNotJSONAnswers(t *testing.T) {
	h := newHarness(t, "22.05.8", "/slurm/v0.0.38/")
	h.f.addFault(&fault{path: "/job/submit", status: 400, body: "Unable to parse query.", contentType: "text/plain", times: 1})
	_, err := h.b.Submit(context.Background(), testJob(hello))
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "Unable to parse query.")
}

func TestCredentials(t *testing.T) {
	f := newFake(t, "22.05.8")
	tok := f.goodToken()
	for _, m := range []map[string]string{
		{"username": "bridge", "token": tok},
		{"user": "bridge", "jwt": tok + "\n"},
		{"username": "bridge", "password": tok}, // the Bridge Operator's keys
		{"token": tok},                          // the user from the token's sun claim
	} {
		be, err := New(backends.Config{URL: f.URL, Credentials: testutil.NewCreds(m), HTTPClient: f.Client()})
		require.NoError(t, err)
		_, err = be.Submit(context.Background(), testJob(hello))
		assert.NoError(t, err, "%v", m)
	}
	be, err := New(backends.Config{URL: f.URL, Credentials: testutil.NewCreds(map[string]string{"username": "bridge"})})
	require.NoError(t, err)
	assert.Error(t, be.(backends.Validator).Validate(testJob(hello)))
	be, err = New(backends.Config{URL: f.URL})
	require.NoError(t, err)
	assert.ErrorIs(t, be.(backends.Validator).Validate(testJob(hello)), backends.ErrInvalid)
}

func TestRequestsPerJob(t *testing.T) {
	h := newHarness(t, "22.05.8", "/")
	ctx := context.Background()
	id, err := h.b.Submit(ctx, testJob(hello))
	require.NoError(t, err)
	h.f.set(id, "None", u32(0), "COMPLETED")
	st, err := h.b.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, backends.Done, st.State)
	// Discovery (a ping per version from the newest known down to v0.0.38,
	// once per process) + submit + one status.
	assert.Equal(t, append(pingsDownTo(38), "POST /slurm/v0.0.38/job/submit", "GET /slurm/v0.0.38/job/"+id), h.f.reqs())
}

// TestFailureCategories: each final base state's category, through the
// REST record and scontrol's words alike; a requeue in progress has none.
func TestFailureCategories(t *testing.T) {
	for _, c := range []struct {
		state string
		want  backends.Category
	}{
		{`["NODE_FAIL"]`, backends.CategoryInfrastructure},
		{`["BOOT_FAIL"]`, backends.CategoryInfrastructure},
		{`["PREEMPTED"]`, backends.CategoryInfrastructure},
		{`["TIMEOUT"]`, backends.CategoryTimeout},
		{`["DEADLINE"]`, backends.CategoryTimeout},
		{`["OUT_OF_MEMORY"]`, backends.CategoryJob},
		{`["FAILED"]`, backends.CategoryJob},
		{`["CANCELLED"]`, backends.CategoryCancelled},
		{`"TIMEOUT"`, backends.CategoryTimeout},
		{`["COMPLETED"]`, ""},
		{`["NODE_FAIL","REQUEUED"]`, ""},
		{`["PENDING"]`, ""},
	} {
		j := jobInfo{JobID: json.RawMessage(`7`), JobState: json.RawMessage(c.state)}
		st := j.status()
		assert.Equal(t, c.want, st.FailureCategory(), "REST %s", c.state)
		words := strings.Trim(strings.ReplaceAll(strings.Trim(c.state, "[]"), `"`, ""), " ")
		ss := scontrolStatus("7", map[string]string{"JobState": words})
		assert.Equal(t, c.want, ss.FailureCategory(), "scontrol %s", words)
	}
}
