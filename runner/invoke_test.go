package runner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// countingStore counts writes, to prove status is written only on change.
type countingStore struct {
	record.Store
	updates, gets, creates atomic.Int64
}

func (c *countingStore) Get(ctx context.Context) (*record.Record, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx)
}

func (c *countingStore) Create(ctx context.Context, d map[string]string) (*record.Record, error) {
	c.creates.Add(1)
	return c.Store.Create(ctx, d)
}

func (c *countingStore) Update(ctx context.Context, r *record.Record) (*record.Record, error) {
	c.updates.Add(1)
	return c.Store.Update(ctx, r)
}

type harness struct {
	t     *testing.T
	fake  *fake.Backend
	store record.Store
	reg   *backends.Registry
	logs  *syncWriter
}

func newHarness(t *testing.T, store record.Store) *harness {
	f := fake.New()
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", f.Factory()))
	if store == nil {
		store = record.NewFileStore(t.TempDir(), "job")
	}
	return &harness{t: t, fake: f, store: store, reg: reg, logs: &syncWriter{w: &bytes.Buffer{}}}
}

func (h *harness) spec(props string) *record.Spec {
	return &record.Spec{Backend: "fake", JobScript: "#!/bin/sh\ntrue\n", JobProperties: props, UpdateInterval: "0.5"}
}

func (h *harness) invoker(spec *record.Spec) *runner.Invoker {
	return &runner.Invoker{
		JobName: "job", Store: h.store, Registry: h.reg, Spec: spec,
		Log:         slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MinPoll:     20 * time.Millisecond,
		SubmitLease: 2 * time.Second,
		RetryBudget: 3 * time.Second,
		CancelWait:  2 * time.Second,
		Grace:       2 * time.Second,
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (h *harness) record() map[string]string {
	rec, err := h.store.Get(context.Background())
	require.NoError(h.t, err)
	return rec.Data
}

func TestInvokeDone(t *testing.T) {
	cs := &countingStore{Store: record.NewFileStore(t.TempDir(), "job")}
	h := newHarness(t, cs)
	iv := h.invoker(h.spec(`{"pending":"100ms","run":"1500ms","exitCode":0}`))
	require.NoError(t, iv.Run(context.Background()))
	res := iv.Result()
	assert.Equal(t, "DONE", res.Status)
	assert.Equal(t, "fake-1", res.ID)
	assert.Equal(t, "0", res.ExitCode)
	d := h.record()
	assert.Equal(t, "DONE", d[record.KeyJobStatus])
	assert.Equal(t, "fake-1", d[record.KeyID])
	assert.Empty(t, d[record.KeyIntent], "the intent is cleared once the id is recorded")
	for _, k := range []string{record.KeySubmit, record.KeyStart, record.KeyEnd} {
		_, err := time.Parse(time.RFC3339, d[k])
		assert.NoError(t, err, "%s=%q is RFC 3339", k, d[k])
	}
	polls := h.fake.Count("status")
	// intent, id, PENDING, RUNNING, DONE: status is written only on change.
	assert.LessOrEqual(t, cs.updates.Load(), int64(5), "writes: %d for %d polls", cs.updates.Load(), polls)
	assert.Greater(t, polls, 5, "the poll starts fast")
	t.Logf("requests: submit=%d status=%d find=%d; record writes=%d", h.fake.Count("submit"), polls, h.fake.Count("find"), cs.updates.Load())
}

func TestInvokeFinalStates(t *testing.T) {
	for _, final := range []backends.State{backends.Failed, backends.Killed, backends.Unknown, backends.Done} {
		t.Run(string(final), func(t *testing.T) {
			h := newHarness(t, nil)
			iv := h.invoker(h.spec(fmt.Sprintf(`{"run":"50ms","final":%q,"exitCode":3}`, final)))
			require.NoError(t, iv.Run(context.Background()))
			assert.Equal(t, string(final), iv.Result().Status)
			assert.Equal(t, "END_"+string(final), iv.Result().BackendState, "the raw state is kept beside the mapped one")
		})
	}
}

func TestConcurrentInvokersSubmitOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.SubmitDelay = 300 * time.Millisecond
	spec := h.spec(`{"run":"300ms"}`)
	const n = 5
	var wg sync.WaitGroup
	results := make([]*runner.Result, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			iv := h.invoker(spec)
			errs[i] = iv.Run(context.Background())
			results[i] = iv.Result()
		}(i)
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		require.NoError(t, errs[i])
		assert.Equal(t, "DONE", results[i].Status)
		assert.Equal(t, "fake-1", results[i].ID, "every invoker follows the one job")
	}
	assert.Equal(t, 1, h.fake.Count("submit"), "exactly one submission")
}

func TestLostSubmitResponseIsAdoptedByKey(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.LoseResponses = 1 // the job is made, the answer never arrives
	iv := h.invoker(h.spec(`{"run":"50ms"}`))
	require.NoError(t, iv.Run(context.Background()))
	assert.Len(t, h.fake.Jobs(), 1, "the lost submit was found by key, not repeated")
	assert.Equal(t, 1, h.fake.Count("submit"))
	assert.Equal(t, "DONE", iv.Result().Status)
}

func TestTransientSubmitFaultsAreRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.SubmitFaults = []error{backends.Transient(fmt.Errorf("503")), backends.Transient(fmt.Errorf("429"))}
	iv := h.invoker(h.spec(`{"run":"50ms"}`))
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, 3, h.fake.Count("submit"))
	assert.Len(t, h.fake.Jobs(), 1)
}

func TestSubmitRefusedIsInvalid(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.SubmitFaults = []error{backends.Invalid("jobproperties", "Unknown key \"partitionn\"")}
	iv := h.invoker(h.spec(`{}`))
	err := iv.Run(context.Background())
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Empty(t, h.fake.Jobs())
	assert.Contains(t, h.record()[record.KeyMessage], "partitionn", "the reason is left in the record")
}

func TestSubmitGivesUpWithTransientError(t *testing.T) {
	h := newHarness(t, nil)
	for i := 0; i < 100; i++ {
		h.fake.SubmitFaults = append(h.fake.SubmitFaults, backends.Transient(fmt.Errorf("connection refused")))
	}
	iv := h.invoker(h.spec(`{}`))
	err := iv.Run(context.Background())
	require.ErrorIs(t, err, backends.ErrTransient, "exit 75: a retry can do better")
	assert.Empty(t, h.fake.Jobs())
}

func TestStaleIntentOfCrashedInvoker(t *testing.T) {
	ctx := context.Background()
	t.Run("job submitted before the crash is adopted", func(t *testing.T) {
		h := newHarness(t, nil)
		spec := h.spec(`{"run":"50ms"}`)
		rec, err := runner.EnsureRecord(ctx, h.store, *spec, time.Second)
		require.NoError(t, err)
		// The crashed invoker recorded its intent and submitted, then died.
		key := runner.IdempotencyKey(rec.UID)
		_, err = h.fake.Submit(ctx, backends.Job{Key: key, Properties: []byte(`{"run":"50ms"}`)})
		require.NoError(t, err)
		next := rec.Clone()
		next.Data[record.KeyIntent] = "elsewhere/1/1@" + time.Now().UTC().Format(time.RFC3339Nano)
		_, err = h.store.Update(ctx, next)
		require.NoError(t, err)

		iv := h.invoker(spec)
		require.NoError(t, iv.Run(ctx))
		assert.Equal(t, 1, h.fake.Count("submit"), "adopted, not resubmitted")
		assert.Equal(t, "fake-1", iv.Result().ID)
	})
	t.Run("intent without a job is waited out, then taken over", func(t *testing.T) {
		h := newHarness(t, nil)
		spec := h.spec(`{"run":"50ms"}`)
		rec, err := runner.EnsureRecord(ctx, h.store, *spec, time.Second)
		require.NoError(t, err)
		next := rec.Clone()
		next.Data[record.KeyIntent] = "elsewhere/1/1@" + time.Now().UTC().Format(time.RFC3339Nano)
		_, err = h.store.Update(ctx, next)
		require.NoError(t, err)
		iv := h.invoker(spec)
		start := time.Now()
		require.NoError(t, iv.Run(ctx))
		assert.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "a live holder's lease is respected")
		assert.Equal(t, 1, h.fake.Count("submit"))
	})
}

func TestStatusFaultsAreRiddenOut(t *testing.T) {
	h := newHarness(t, nil)
	for i := 0; i < 5; i++ {
		h.fake.StatusFaults = append(h.fake.StatusFaults, backends.Transient(fmt.Errorf("502 bad gateway")))
	}
	iv := h.invoker(h.spec(`{"run":"200ms"}`))
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "DONE", iv.Result().Status)
}

func TestStatusOutageBeyondBudgetIsTemporaryFailure(t *testing.T) {
	h := newHarness(t, nil)
	for i := 0; i < 10000; i++ {
		h.fake.StatusFaults = append(h.fake.StatusFaults, backends.Transient(fmt.Errorf("connection refused")))
	}
	iv := h.invoker(h.spec(`{"run":"10s"}`))
	iv.RetryBudget = 500 * time.Millisecond
	err := iv.Run(context.Background())
	require.ErrorIs(t, err, backends.ErrTransient)
	assert.Equal(t, "fake-1", h.record()[record.KeyID], "the id stays recorded for the retry to re-attach")
}

func TestVanishedJobIsUnknownNeverDone(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"10s"}`))
	go func() {
		// Vanish only after invoke saw the job: before, not-found means
		// "not visible yet" and is retried.
		for {
			if rec, err := h.store.Get(context.Background()); err == nil && rec.Data[record.KeyJobStatus] == "RUNNING" {
				h.fake.Vanish("fake-1")
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "UNKNOWN", iv.Result().Status)
	assert.Contains(t, iv.Result().Message, "no longer knows")
}

func TestKillFlagCancels(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"30s"}`))
	done := make(chan error, 1)
	go func() { done <- iv.Run(context.Background()) }()
	require.Eventually(t, func() bool {
		rec, err := h.store.Get(context.Background())
		return err == nil && rec.Data[record.KeyJobStatus] == "RUNNING"
	}, time.Minute, 20*time.Millisecond)
	setKill(t, h.store)
	start := time.Now()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("invoke did not end after kill=true")
	}
	t.Logf("kill=true to invoke's end: %s", time.Since(start))
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.Equal(t, 1, h.fake.Count("cancel"))
	assert.Equal(t, "KILLED", h.record()[record.KeyJobStatus])
}

func setKill(t *testing.T, s record.Store) {
	ctx := context.Background()
	for {
		rec, err := s.Get(ctx)
		require.NoError(t, err)
		rec.Data["kill"] = "true"
		if _, err = s.Update(ctx, rec); err == nil {
			return
		}
		require.ErrorIs(t, err, record.ErrConflict)
	}
}

func TestKillBeforeSubmitSubmitsNothing(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.spec(`{}`)
	_, err := runner.EnsureRecord(context.Background(), h.store, *spec, time.Second)
	require.NoError(t, err)
	setKill(t, h.store)
	iv := h.invoker(spec)
	require.NoError(t, iv.Run(context.Background()))
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.Zero(t, h.fake.Count("submit"))
}

func TestTerminationCancels(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"30s"}`))
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- iv.Run(ctx) }()
	require.Eventually(t, func() bool { return h.fake.Count("status") > 2 }, 5*time.Second, 10*time.Millisecond)
	cancel(runner.ErrTerminated)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("invoke did not end after SIGTERM")
	}
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.Equal(t, 1, h.fake.Count("cancel"))
	assert.Equal(t, "KILLED", h.record()[record.KeyJobStatus], "the final state is recorded despite the cancelled context")
}

func TestBackendWithoutFinderStillSubmitsOnce(t *testing.T) {
	h := newHarness(t, nil)
	plain := fake.WithoutFinder(h.fake)
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) { return plain, nil }))
	h.reg = reg
	iv := h.invoker(h.spec(`{"run":"50ms"}`))
	require.NoError(t, iv.Run(context.Background()))
	assert.Contains(t, h.logs.String(), "cannot find jobs by key", "the user is warned")
	assert.Equal(t, 1, h.fake.Count("submit"))
}

func TestSecretsAreScrubbedFromRecordAndResult(t *testing.T) {
	h := newHarness(t, nil)
	secrets := &runner.Secrets{}
	secrets.Add("s3cr3t-t0ken")
	h.fake.SubmitFaults = []error{backends.Invalid("credentials", "token s3cr3t-t0ken refused")}
	iv := h.invoker(h.spec(`{}`))
	iv.Secrets = secrets
	err := iv.Run(context.Background())
	require.Error(t, err)
	assert.NotContains(t, iv.Result().Message, "s3cr3t-t0ken")
	assert.Contains(t, iv.Result().Message, "[redacted]")
	assert.NotContains(t, h.record()[record.KeyMessage], "s3cr3t-t0ken")
}

func TestDifferentDescriptionIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	_, err := runner.EnsureRecord(context.Background(), h.store, *h.spec(`{"run":"1s"}`), time.Second)
	require.NoError(t, err)
	iv := h.invoker(h.spec(`{"run":"2s"}`))
	err = iv.Run(context.Background())
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.Contains(t, err.Error(), "jobproperties")
	assert.Zero(t, h.fake.Count("submit"))
}

// TestSIGTERMOfADisruptedPodLeavesTheJob: when Detach says that only this
// pod is going away (evicted, deleted) while its step goes on, SIGTERM must
// not cancel the job: invoke exits 75 and the retry's new pod re-attaches.
// When it says no, or is not set, SIGTERM cancels.
func TestSIGTERMOfADisruptedPodLeavesTheJob(t *testing.T) {
	for _, tc := range []struct {
		name   string
		detach func(context.Context) (bool, string)
	}{
		{"disrupted", func(context.Context) (bool, string) { return true, "evicted" }},
		{"stopped", func(context.Context) (bool, string) { return false, "spec.shutdown=Stop" }},
		{"unset", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			iv := h.invoker(h.spec(`{"run":"30s"}`))
			iv.Detach = tc.detach
			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan error, 1)
			go func() { done <- iv.Run(ctx) }()
			require.Eventually(t, func() bool { return h.fake.Count("status") > 2 }, 5*time.Second, 10*time.Millisecond)
			cancel(runner.ErrTerminated)
			err := <-done
			if tc.name == "disrupted" {
				require.ErrorIs(t, err, backends.ErrTransient, "exit 75: the retry re-attaches")
				assert.Zero(t, h.fake.Count("cancel"), "the job keeps running")
				assert.Equal(t, "fake-1", h.record()[record.KeyID], "the id stays for the retry")
				assert.Equal(t, "RUNNING", h.record()[record.KeyJobStatus])
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "KILLED", iv.Result().Status)
			assert.Equal(t, 1, h.fake.Count("cancel"))
		})
	}
}

// TestRecordChangesDoNotDrivePolling: changes of the record that are not a
// kill (our own writes, someone's annotation) must not make invoke poll
// early: each early poll also advanced the backoff, so a short job was seen
// up to a second late.
func TestRecordChangesDoNotDrivePolling(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"10s"}`))
	iv.MinPoll = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- iv.Run(context.Background()) }()
	require.Eventually(t, func() bool { return h.fake.Count("status") > 0 }, 5*time.Second, 5*time.Millisecond)
	start := h.fake.Count("status")
	ctx := context.Background()
	for i := 0; i < 20; i++ { // 20 unrelated writes in one second
		rec, err := h.store.Get(ctx)
		require.NoError(t, err)
		rec.Data["note"] = strconv.Itoa(i)
		if _, err := h.store.Update(ctx, rec); err != nil {
			require.ErrorIs(t, err, record.ErrConflict)
		}
		time.Sleep(50 * time.Millisecond)
	}
	polls := h.fake.Count("status") - start
	assert.Less(t, polls, 8, "the poll schedule (200, 320, 512 ms ...), not the record's writes, sets the polls")
	setKill(t, h.store)
	require.NoError(t, <-done)
}

// TestFailureCategoryIsRecorded: the backend's category lands in the record
// and the result; without one, FAILED is the job's and KILLED cancelled.
func TestFailureCategoryIsRecorded(t *testing.T) {
	cases := []struct{ final, category, want string }{
		{"FAILED", "infrastructure", "infrastructure"},
		{"FAILED", "timeout", "timeout"},
		{"FAILED", "", "job"},
		{"KILLED", "", "cancelled"},
		{"DONE", "", ""},
		{"UNKNOWN", "", ""},
	}
	for _, c := range cases {
		t.Run(c.final+"-"+c.category, func(t *testing.T) {
			h := newHarness(t, nil)
			iv := h.invoker(h.spec(fmt.Sprintf(`{"run":"50ms","final":%q,"category":%q,"exitCode":3}`, c.final, c.category)))
			require.NoError(t, iv.Run(context.Background()))
			assert.Equal(t, c.final, iv.Result().Status)
			assert.Equal(t, c.want, iv.Result().FailureCategory)
			d := h.record()
			assert.Equal(t, c.want, d[record.KeyFailureCategory])
			_, present := d[record.KeyFailureCategory]
			assert.Equal(t, c.want != "", present, "no category key without a failure")
		})
	}
}

// TestKillFlagIsCancelledCategory: a job cancelled through the record is
// KILLED with the category cancelled.
func TestKillFlagIsCancelledCategory(t *testing.T) {
	h := newHarness(t, nil)
	iv := h.invoker(h.spec(`{"run":"30s"}`))
	done := make(chan error, 1)
	go func() { done <- iv.Run(context.Background()) }()
	require.Eventually(t, func() bool { return h.fake.Count("status") > 0 }, 5*time.Second, 10*time.Millisecond)
	setKill(t, h.store)
	require.NoError(t, <-done)
	assert.Equal(t, "KILLED", iv.Result().Status)
	assert.Equal(t, "cancelled", iv.Result().FailureCategory)
	assert.Equal(t, "cancelled", h.record()[record.KeyFailureCategory])
}

// A fault that refuses the step's input or configuration (exit 2: "nothing
// was submitted") but comes once the job is on the cluster (a credentials
// file gone mid-job) is a *SubmittedFault: exit 75, the id kept for the
// retry to re-attach, the intent untouched, and the message says the job
// goes on. Before the submit, the same fault stays as it is (exit 2).
func TestAFaultOfInputAfterTheSubmitSaysTheJobGoesOn(t *testing.T) {
	h := newHarness(t, nil)
	gone := record.NewFault(record.FaultCredentials, "credentials", "token in /creds: no such file; mount the right Secret")
	h.fake.StatusFaults = []error{gone}
	iv := h.invoker(h.spec(`{"run":"10s"}`))
	err := iv.Run(context.Background())
	var sf *runner.SubmittedFault
	require.ErrorAs(t, err, &sf, "%v", err)
	assert.Equal(t, "fake-1", sf.ID)
	assert.Equal(t, record.FaultCredentials, record.FaultClass(err), "the fault's class still names what to mend")
	assert.Contains(t, err.Error(), "job fake-1 was submitted before this and goes on")
	d := h.record()
	assert.Equal(t, "fake-1", d[record.KeyID], "the id stays for the retry to re-attach")
	assert.Contains(t, d[record.KeyMessage], "goes on")

	h = newHarness(t, nil)
	h.fake.SubmitFaults = []error{gone}
	err = h.invoker(h.spec(`{"run":"10s"}`)).Run(context.Background())
	require.ErrorIs(t, err, backends.ErrInvalid)
	assert.False(t, errors.As(err, &sf), "refused before the submit: nothing was submitted (%v)", err)
	assert.Empty(t, h.record()[record.KeyID], "no job recorded")
}
