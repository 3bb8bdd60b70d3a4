package runner_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// printingBackend is the fake backend plus a job that prints: its output
// grows evenly from nothing at submit to full over run. Each read returns at
// most chunk bytes, so a secret in it is split across reads.
type printingBackend struct {
	*fake.Backend
	full  []byte
	run   time.Duration
	chunk int

	mu        sync.Mutex
	submitted time.Time
	reads     []int   // status calls made before each read
	offsets   []int64 // the offset each read was asked for
}

func (p *printingBackend) Submit(ctx context.Context, job backends.Job) (string, error) {
	p.mu.Lock()
	p.submitted = time.Now()
	p.mu.Unlock()
	return p.Backend.Submit(ctx, job)
}

func (p *printingBackend) ReadLogs(_ context.Context, _ string, offset int64, w io.Writer) (int64, error) {
	p.mu.Lock()
	p.reads = append(p.reads, p.Count("status"))
	p.offsets = append(p.offsets, offset)
	frac := float64(time.Since(p.submitted)) / float64(p.run)
	p.mu.Unlock()
	visible := int64(min(1, frac) * float64(len(p.full)))
	if offset >= visible {
		return offset, nil
	}
	end := min(visible, offset+int64(p.chunk))
	n, err := w.Write(p.full[offset:end])
	return offset + int64(n), err
}

const testSecret = "s3cr3t-T0KEN-value"

func printedOutput(lines int) []byte {
	var b bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&b, "line %03d of the job's output\n", i)
		if i%7 == 3 {
			fmt.Fprintf(&b, "token=%s and again %s\n", testSecret, testSecret)
		}
	}
	return b.Bytes()
}

func runPrinting(t *testing.T, p *printingBackend, store record.Store, prepare func(iv *runner.Invoker)) (*runner.Invoker, string) {
	t.Helper()
	reg := backends.NewRegistry()
	require.NoError(t, reg.Register("fake", func(backends.Config) (backends.Backend, error) { return p, nil }))
	h := newHarness(t, store)
	h.reg = reg
	iv := h.invoker(h.spec(`{"run":"` + p.run.String() + `"}`))
	iv.Spec.UpdateInterval = "30" // polls back off to 30s: reads must not wait for them
	iv.Secrets = &runner.Secrets{}
	iv.Secrets.Add(testSecret)
	out := &syncWriter{w: &bytes.Buffer{}}
	iv.LogOut, iv.LogInterval = out, 50*time.Millisecond
	if prepare != nil {
		prepare(iv)
	}
	require.NoError(t, iv.Run(context.Background()))
	return iv, out.String()
}

func TestJobOutputStreamsScrubbedAndComplete(t *testing.T) {
	p := &printingBackend{Backend: fake.New(), full: printedOutput(60), run: 2500 * time.Millisecond, chunk: 97}
	cs := &countingStore{Store: record.NewFileStore(t.TempDir(), "job")}
	iv, out := runPrinting(t, p, cs, nil)
	assert.Equal(t, "DONE", iv.Result().Status)

	want := strings.ReplaceAll(string(p.full), testSecret, "[redacted]")
	assert.Equal(t, want, out, "the whole output, once, in order, scrubbed (a secret split across reads included)")
	assert.NotContains(t, out, testSecret[:8], "no piece of a secret leaks")

	rec, err := cs.Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(len(p.full)), rec.Data[record.KeyLogOffset], "the record holds the offset of the whole output")

	p.mu.Lock()
	defer p.mu.Unlock()
	between := 0
	for i := 1; i < len(p.reads); i++ {
		if p.reads[i] == p.reads[i-1] {
			between++
		}
	}
	assert.Greater(t, between, 5, "reads run on their own cadence, not only after a poll (status calls before each read: %v)", p.reads)
	assert.Less(t, cs.updates.Load(), int64(len(p.reads))/3, "the offset is not written per read (%d writes, %d reads)", cs.updates.Load(), len(p.reads))
}

func TestJobOutputReattachDoesNotRepeat(t *testing.T) {
	p := &printingBackend{Backend: fake.New(), full: printedOutput(20), run: 600 * time.Millisecond, chunk: 1 << 20}
	store := record.NewFileStore(t.TempDir(), "job")
	const already = 200 // a first invoke copied this much before it died
	_, out := runPrinting(t, p, store, func(iv *runner.Invoker) {
		ctx := context.Background()
		rec, err := runner.EnsureRecord(ctx, store, *iv.Spec, time.Second)
		require.NoError(t, err)
		id, err := p.Submit(ctx, backends.Job{Key: runner.IdempotencyKey(rec.UID), Properties: []byte(`{"run":"600ms"}`)})
		require.NoError(t, err)
		rec.Data[record.KeyID] = id
		rec.Data[record.KeyLogOffset] = strconv.Itoa(already)
		_, err = store.Update(ctx, rec)
		require.NoError(t, err)
	})
	assert.Equal(t, 1, p.Count("submit"), "re-attached, not submitted again")
	want := strings.ReplaceAll(string(p.full[already:]), testSecret, "[redacted]")
	assert.Equal(t, want, out, "only what the first invoke had not copied")
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Equal(t, int64(already), p.offsets[0], "the first read starts at the recorded offset")
}

func TestJobOutputNotFollowedWithoutLogOut(t *testing.T) {
	p := &printingBackend{Backend: fake.New(), full: printedOutput(5), run: 200 * time.Millisecond, chunk: 1 << 20}
	runPrinting(t, p, nil, func(iv *runner.Invoker) { iv.LogOut = nil })
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Empty(t, p.reads, "--follow-logs=false reads nothing")
}

// TestJobOutputBeforeTheFinalStateLine: the output a job printed up to its
// end is in the step's log before the line that says its final state
// (invoke's log and the job's output going to one stream, as in a pod).
// Reads every 5 s and polls every 0.2 s make the final read the one that
// brings most of it. Before, that read came after the state line.
func TestJobOutputBeforeTheFinalStateLine(t *testing.T) {
	p := &printingBackend{Backend: fake.New(), full: printedOutput(20), run: 600 * time.Millisecond, chunk: 1 << 20}
	var stream *syncWriter
	iv, out := runPrinting(t, p, nil, func(iv *runner.Invoker) {
		stream = iv.LogOut.(*syncWriter)
		iv.Log = slog.New(slog.NewTextHandler(stream, nil))
		iv.LogInterval = 5 * time.Second
		iv.Spec.UpdateInterval = "0.2"
	})
	assert.Equal(t, "DONE", iv.Result().Status)
	last := strings.LastIndex(out, "line 019 of the job's output")
	end := strings.LastIndex(out, `msg="job state"`)
	require.Positive(t, last, out)
	require.Positive(t, end, out)
	assert.Contains(t, out[end:], "state=DONE")
	assert.Less(t, last, end, "the job's last line before its final state's:\n%s", out)
}
