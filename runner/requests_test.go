package runner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// httpFake is the fake backend asking an HTTP server once per status poll
// through the client invoke gives backends, as the real backends do.
type httpFake struct {
	*fake.Backend
	c   *http.Client
	url string
}

func (b *httpFake) Status(ctx context.Context, id string) (backends.Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
	if err != nil {
		return backends.Status{}, err
	}
	if resp, err := b.c.Do(req); err == nil {
		resp.Body.Close()
	}
	return b.Backend.Status(ctx, id)
}

// TestBackendRequestsAreCountedInTheRecord: the record holds the backend
// requests by the class of their answer, as many as the server answered,
// and they cost no record write of their own.
func TestBackendRequestsAreCountedInTheRecord(t *testing.T) {
	var hits, failed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1)%3 == 0 {
			failed.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	cs := &countingStore{Store: record.NewFileStore(t.TempDir(), "job")}
	h := newHarness(t, cs)
	hc, err := runner.NewHTTPClient("", false)
	require.NoError(t, err)
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(cfg backends.Config) (backends.Backend, error) {
		return &httpFake{Backend: h.fake, c: cfg.HTTPClient, url: srv.URL}, nil
	}))
	h.reg = reg
	iv := h.invoker(h.spec(`{"pending":"100ms","run":"1s","exitCode":0}`))
	iv.Backend.HTTPClient = hc
	require.NoError(t, iv.Run(context.Background()))
	d := h.record()
	require.Equal(t, "DONE", d[record.KeyJobStatus])
	got := record.ParseRequests(d[record.KeyBackendRequests])
	require.Greater(t, failed.Load(), int64(0), "the job ran long enough for a 503")
	assert.Equal(t, map[string]int64{"2xx": hits.Load() - failed.Load(), "5xx": failed.Load()}, got, "record: %q", d[record.KeyBackendRequests])
	assert.Equal(t, hits.Load(), runner.RequestCount(hc))
	// intent, id, PENDING, RUNNING, DONE, as without the counts.
	assert.LessOrEqual(t, cs.updates.Load(), int64(5), "writes for %d polls", hits.Load())
}

// TestBackendRequestsAddUpAcrossInvokes: an invoke re-attaching to a job
// (its pod evicted, the retry's new process) adds its own requests to
// those the record holds; it does not start them again.
func TestBackendRequestsAddUpAcrossInvokes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	h := newHarness(t, nil)
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(cfg backends.Config) (backends.Backend, error) {
		return &httpFake{Backend: h.fake, c: cfg.HTTPClient, url: srv.URL}, nil
	}))
	h.reg = reg
	spec := h.spec(`{"run":"2s","exitCode":0}`)
	first := h.invoker(spec)
	first.Backend.HTTPClient, _ = runner.NewHTTPClient("", false)
	first.Detach = func(context.Context) (bool, string) { return true, "evicted" }
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	require.Eventually(t, func() bool {
		rec, err := h.store.Get(context.Background())
		return err == nil && rec.Data[record.KeyBackendRequests] != ""
	}, 5*time.Second, 10*time.Millisecond)
	cancel(runner.ErrTerminated)
	require.ErrorIs(t, <-done, backends.ErrTransient, "evicted: the job is left for the retry")
	before := record.ParseRequests(h.record()[record.KeyBackendRequests])["2xx"]
	require.Positive(t, before)

	second := h.invoker(spec)
	second.Backend.HTTPClient, _ = runner.NewHTTPClient("", false)
	require.NoError(t, second.Run(context.Background()))
	d := h.record()
	require.Equal(t, "DONE", d[record.KeyJobStatus])
	own := runner.RequestCount(second.Backend.HTTPClient)
	require.Positive(t, own)
	assert.Equal(t, map[string]int64{"2xx": before + own}, record.ParseRequests(d[record.KeyBackendRequests]),
		"%d in the record before, %d of the second invoke", before, own)
}

func TestRequestCountsRoundTrip(t *testing.T) {
	c := map[string]int64{"2xx": 12, "4xx": 1, "error": 3}
	s := record.FormatRequests(c)
	assert.Equal(t, "2xx=12 4xx=1 error=3", s)
	assert.Equal(t, c, record.ParseRequests(s))
	assert.Empty(t, record.FormatRequests(nil))
	// Hand-edited: unknown classes and bad counts are skipped, not trusted.
	assert.Equal(t, map[string]int64{"5xx": 2}, record.ParseRequests("5xx=2 6xx=1 2xx=-4 4xx=x error"))
	assert.Equal(t, "error", record.RequestClass(0))
	assert.Equal(t, "4xx", record.RequestClass(429))
}

// TestALoneJobCostsACreateAndAWritePerTransition: a step given the job's
// flags creates its record with the submit intent in it (no read that
// finds none first, no update for the intent), and an accounting that
// knows the job's end at once rides on the final write: the id, PENDING,
// RUNNING, DONE are all the writes (before: 6, and a read).
func TestALoneJobCostsACreateAndAWritePerTransition(t *testing.T) {
	cs := &countingStore{Store: record.NewFileStore(t.TempDir(), "job")}
	a := &accountingFake{usage: backends.Usage{Tasks: 1, CPUSeconds: 1, CPUs: 1, CoreSeconds: 1, Elapsed: time.Second, TimeLimit: time.Minute}}
	h := accountingHarness(t, a)
	h.store = cs
	iv := h.invoker(h.spec(`{"pending":"300ms","run":"300ms","exitCode":0}`))
	require.NoError(t, iv.Run(context.Background()))
	d := h.record()
	require.Equal(t, "DONE", d[record.KeyJobStatus])
	assert.Equal(t, int64(1), cs.creates.Load(), "the record's create")
	assert.Equal(t, 1, h.fake.Count("submit"))
	assert.NotEmpty(t, d[record.KeyKey], "the idempotency key, written with the id")
	assert.Empty(t, d[record.KeyIntent], "the intent cleared with the id")
	assert.NotEmpty(t, d[record.KeyEfficiency], "the efficiency, with the final state")
	assert.Equal(t, 1, a.calls, "the accounting asked once")
	// The test's own read of the record above is one.
	assert.Equal(t, int64(1), cs.gets.Load(), "no read before the create")
	assert.LessOrEqual(t, cs.updates.Load(), int64(4), "the id, PENDING, RUNNING, DONE")
}
