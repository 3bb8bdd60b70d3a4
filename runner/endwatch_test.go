package runner_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/backends/slurm"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// statusProbe counts a real backend's status answers and notes when the
// job announced its end.
type statusProbe struct {
	backends.Backend
	mu        sync.Mutex
	answers   []answer
	announced time.Time
}

type answer struct {
	at    time.Time
	state backends.State
}

func (p *statusProbe) Status(ctx context.Context, id string) (backends.Status, error) {
	st, err := p.Backend.Status(ctx, id)
	if err == nil {
		p.mu.Lock()
		p.answers = append(p.answers, answer{time.Now(), st.State})
		p.mu.Unlock()
	}
	return st, err
}

func (p *statusProbe) Close() error {
	if c, ok := p.Backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// split is the answers before the announcement and those after it.
func (p *statusProbe) split() (before, after []answer, announced time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.answers {
		if p.announced.IsZero() || a.at.Before(p.announced) {
			before = append(before, a)
		} else {
			after = append(after, a)
		}
	}
	return before, after, p.announced
}

// announcingProbe is a statusProbe whose backend's jobs announce their end.
type announcingProbe struct{ *statusProbe }

func (p announcingProbe) WaitEnd(ctx context.Context, id string) error {
	err := p.Backend.(backends.EndWatcher).WaitEnd(ctx, id)
	if err == nil {
		p.mu.Lock()
		p.announced = time.Now()
		p.mu.Unlock()
	}
	return err
}

// sshTarget is a real login node of a backend that has EndWatcher.
type sshTarget struct {
	backend string
	srv     testssh.Server
	new     backends.Factory
}

func sshTargets(t testing.TB) []sshTarget {
	return []sshTarget{{slurm.Name, testssh.Default(t), slurm.New}, {htcondor.Name, testssh.Condor(t), htcondor.New}}
}

// endInvoker runs script on target through a probe; minPoll is the first
// poll delay and interval the longest.
func endInvoker(t *testing.T, target sshTarget, script, interval string, minPoll time.Duration) (*runner.Invoker, *statusProbe) {
	probe := &statusProbe{}
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register(target.backend, func(cfg backends.Config) (backends.Backend, error) {
		be, err := target.new(cfg)
		probe.Backend = be
		return announcingProbe{probe}, err
	}))
	spec := &record.Spec{Backend: target.backend, ResourceURL: target.srv.URL, JobScript: script, UpdateInterval: interval}
	iv := &runner.Invoker{JobName: "endmark", Store: record.NewFileStore(t.TempDir(), "endmark"), Registry: reg, Spec: spec,
		Backend: backends.Config{Credentials: testssh.Creds(t, target.srv.CredsDir)},
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)), MinPoll: minPoll,
		SubmitLease: 5 * time.Second, RetryBudget: 30 * time.Second, CancelWait: 10 * time.Second, Grace: 10 * time.Second}
	return iv, probe
}

// TestEndAnnouncedEndsTheFollow: polls every 60 s at the soonest, a job of
// 2 s is found DONE long before the second poll would have been sent: the
// job's announcement makes the loop ask at once, with no poll between the
// job's end and the announcement (every answer before it was not final).
// Polling alone would still be waiting when the test's ceiling ends it.
func TestEndAnnouncedEndsTheFollow(t *testing.T) {
	for _, target := range sshTargets(t) {
		t.Run(target.backend, func(t *testing.T) {
			iv, probe := endInvoker(t, target, "#!/bin/sh\nsleep 2\n", "120", 60*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
			defer cancel()
			require.NoError(t, iv.Run(ctx))
			require.NoError(t, ctx.Err(), "the step ended only when the test's ceiling did")
			require.Equal(t, "DONE", iv.Result().Status, iv.Result().Message)
			before, after, announced := probe.split()
			require.False(t, announced.IsZero(), "the job never announced its end")
			for _, a := range before {
				assert.False(t, a.state.Final(), "a poll found the end before the announcement: %+v", before)
			}
			require.NotEmpty(t, after)
			assert.Equal(t, backends.Done, after[len(after)-1].state)
			assert.LessOrEqual(t, len(after), 8, "confirming the announced end: %+v", after)
			t.Logf("%s: %d status answers before the announcement, %d after; the first after it %s later",
				target.backend, len(before), len(after), after[0].at.Sub(announced).Round(time.Millisecond))
		})
	}
}

// TestForgedEndMarkerDecidesNothing: a job writes an end marker saying 0
// while it runs (as anyone who may write its directory could): the loop
// asks slurmctld, which says RUNNING, and the step ends with the job's own
// outcome, FAILED with exit 4.
func TestForgedEndMarkerDecidesNothing(t *testing.T) {
	target := sshTargets(t)[0]
	iv, probe := endInvoker(t, target, "#!/bin/sh\nprintf '0\\n' > job.end\nsleep 12\nexit 4\n", "3", time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	require.NoError(t, iv.Run(ctx))
	assert.Equal(t, "FAILED", iv.Result().Status, iv.Result().Message)
	assert.Equal(t, "4", iv.Result().ExitCode)
	_, after, announced := probe.split()
	require.False(t, announced.IsZero(), "the forged marker was not seen")
	require.NotEmpty(t, after)
	assert.Equal(t, backends.Running, after[0].state, "the scheduler's answer after the forged marker")
}

// TestKilledWrapperIsFoundByPolls: a job whose wrapper was killed with
// SIGKILL leaves no marker; its end is found by the polls.
func TestKilledWrapperIsFoundByPolls(t *testing.T) {
	target := sshTargets(t)[0]
	iv, probe := endInvoker(t, target, "#!/bin/sh\nkill -9 $PPID\nsleep 1\n", "2", time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	require.NoError(t, iv.Run(ctx))
	assert.Equal(t, "FAILED", iv.Result().Status, iv.Result().Message)
	_, _, announced := probe.split()
	assert.True(t, announced.IsZero(), "a job whose wrapper was killed announced its end")
}

// laggingBackend is a scheduler that reports a job RUNNING for lag more
// answers after the job announced its end (slurmctld learning of a batch
// script's exit late), then DONE; lag < 0: RUNNING forever.
type laggingBackend struct {
	lag       int
	mu        sync.Mutex
	announced bool
	asked     int         // answers since the announcement
	at        []time.Time // when each was given
}

func (l *laggingBackend) Submit(context.Context, backends.Job) (string, error) { return "lag-1", nil }
func (l *laggingBackend) Cancel(context.Context, string) error                 { return nil }

func (l *laggingBackend) Status(context.Context, string) (backends.Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.announced {
		return backends.Status{State: backends.Running}, nil
	}
	l.asked++
	l.at = append(l.at, time.Now())
	if l.lag >= 0 && l.asked > l.lag {
		code := 0
		return backends.Status{State: backends.Done, ExitCode: &code}, nil
	}
	return backends.Status{State: backends.Running}, nil
}

func (l *laggingBackend) WaitEnd(ctx context.Context, _ string) error {
	if !record.SleepCtx(ctx, 300*time.Millisecond) {
		return ctx.Err()
	}
	l.mu.Lock()
	l.announced = true
	l.mu.Unlock()
	return nil
}

func lagInvoker(t *testing.T, l *laggingBackend) *runner.Invoker {
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("lagging", func(backends.Config) (backends.Backend, error) { return l, nil }))
	return &runner.Invoker{JobName: "lag", Store: record.NewFileStore(t.TempDir(), "lag"), Registry: reg,
		Spec: &record.Spec{Backend: "lagging", JobScript: "#!/bin/sh\ntrue\n", UpdateInterval: "120"},
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)), MinPoll: 60 * time.Second,
		SubmitLease: time.Second, RetryBudget: 5 * time.Second, CancelWait: time.Second, Grace: 5 * time.Second}
}

// TestAnnouncedEndReaskedWhileTheSchedulerLags: the scheduler still says
// RUNNING for three answers after the announcement: the loop asks again
// on its short back-off (not at its 60 s poll) and ends DONE.
func TestAnnouncedEndReaskedWhileTheSchedulerLags(t *testing.T) {
	l := &laggingBackend{lag: 3}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, lagInvoker(t, l).Run(ctx))
	require.NoError(t, ctx.Err(), "the step ended only when the test's ceiling did")
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, 4, l.asked, "answers after the announcement: three RUNNING, then DONE")
}

// TestAnnouncedEndReasksAreBounded: a scheduler that never confirms the
// announced end gets a bounded number of re-asks (endConfirmFor, 10 s, on
// a growing back-off), then the normal polls (60 s here) resume.
func TestAnnouncedEndReasksAreBounded(t *testing.T) {
	l := &laggingBackend{lag: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = lagInvoker(t, l).Run(ctx) // ends at the ceiling: the job never ends
	l.mu.Lock()
	defer l.mu.Unlock()
	end, _ := ctx.Deadline()
	var reasks []time.Time // before the ceiling (after it, SIGTERM's cancel polls)
	for _, at := range l.at {
		if at.Before(end) {
			reasks = append(reasks, at)
		}
	}
	require.GreaterOrEqual(t, len(reasks), 3, "the announced end was not asked about again")
	assert.LessOrEqual(t, len(reasks), 16, "re-asks after the announcement: want them bounded")
	assert.Greater(t, end.Sub(reasks[len(reasks)-1]), 4*time.Second, "the re-asks went on to the ceiling")
	t.Logf("%d re-asks over %s", len(reasks), reasks[len(reasks)-1].Sub(reasks[0]).Round(time.Millisecond))
}

// TestCleanupRemovesTheEndMarker: cleanup removes the end marker the
// wrapper left in the job's directory on the login node, with the record.
func TestCleanupRemovesTheEndMarker(t *testing.T) {
	target := sshTargets(t)[0]
	iv, _ := endInvoker(t, target, "#!/bin/sh\ntrue\n", "2", time.Second)
	ctx := testssh.Ctx(t, 90*time.Second)
	require.NoError(t, iv.Run(ctx))
	require.Equal(t, "DONE", iv.Result().Status, iv.Result().Message)
	rec, err := iv.Store.Get(ctx)
	require.NoError(t, err)
	marker := "bridge-runner/" + runner.IdempotencyKey(rec.UID) + "/job.end"
	c := newSSHClient(t, target.srv)
	exists := func() bool {
		res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"test", "-e", marker}})
		require.NoError(t, err)
		return res.ExitCode == 0
	}
	require.True(t, exists(), "the job left no end marker at %s", marker)
	plain := backends.NewRegistry() // the backend itself, not the probe
	require.NoError(t, plain.Register(target.backend, target.new))
	res, err := (&runner.Cleaner{Store: iv.Store, Registry: plain, Backend: iv.Backend, RetryBudget: 10 * time.Second, Wait: 5 * time.Second}).Run(ctx)
	require.NoError(t, err)
	require.True(t, res.Deleted)
	assert.False(t, exists(), "the end marker stays after cleanup")
}

func newSSHClient(t *testing.T, srv testssh.Server) *sshexec.Client {
	target, err := sshexec.ParseURL(srv.URL)
	require.NoError(t, err)
	c := sshexec.New(target, testssh.Creds(t, srv.CredsDir), nil, sshexec.Options{})
	t.Cleanup(func() { c.Close() })
	return c
}
