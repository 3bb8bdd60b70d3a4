package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/fake"
	"github.com/bridge-runner/bridge-runner/record"
)

// moveCrash is a record left by an invoke SIGKILLed during a move, with
// the two fake clusters it names: the job waits on a, b starts it now.
type moveCrash struct {
	t     *testing.T
	a, b  *fake.Backend
	iv    *Invoker
	store record.Store
	rec   *record.Record
	oldID string
}

func newMoveCrash(t *testing.T) *moveCrash {
	m := &moveCrash{t: t, a: fake.New(), b: fake.New(), store: record.NewFileStore(t.TempDir(), "job")}
	m.b.SetLoad(&backends.Load{FreeCPUs: 4, TotalCPUs: 4, JobCPUs: 1, PendingCPUs: -1, RunningJobs: -1}, nil)
	reg, creds := backends.NewRegistry(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(creds, "b"), 0o700))
	must(t, reg.Register("fakea", m.a.Factory()))
	must(t, reg.Register("fakeb", m.b.Factory()))
	spec := record.Spec{Placement: record.PolicyOrdered, ResourceURL: "https://a.example.org:6820", JobScript: "#!/bin/sh\ntrue\n",
		UpdateInterval: "0.2", ReplaceAfter: "1",
		Targets: `[{"name":"a","backend":"fakea","resourceURL":"https://a.example.org:6820","jobproperties":{"pending":"1h"}},` +
			`{"name":"b","backend":"fakeb","resourceURL":"https://b.example.org:6820","credentials":"b","jobproperties":{"run":"50ms"}}]`}
	m.iv = &Invoker{JobName: "job", Store: m.store, Registry: reg, Spec: &spec, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MinPoll: 20 * time.Millisecond, SubmitLease: 2 * time.Second, RetryBudget: 3 * time.Second, CancelWait: 2 * time.Second, Grace: 2 * time.Second}
	m.iv.Backend.Credentials = DirCredentials{Dir: creds, Secrets: &Secrets{}}
	rec, err := EnsureRecord(context.Background(), m.store, spec, time.Second)
	must(t, err)
	m.rec = rec
	// The first invoke placed the job on a and submitted it there.
	m.oldID, err = m.a.Submit(context.Background(), backends.Job{Key: jobKey(rec.UID, rec.Data), Properties: json.RawMessage(`{"pending":"1h"}`)})
	must(t, err)
	m.write(func(d map[string]string) {
		d[record.KeyPlacement] = `{"target":"a","backend":"fakea","policy":"ordered","at":"2026-01-01T00:00:00Z","probes":[]}`
		d[record.KeyID], d[record.KeyIDFingerprint], d[record.KeyKey] = m.oldID, idFingerprint(rec.UID, m.oldID), jobKey(rec.UID, rec.Data)
	})
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (m *moveCrash) write(f func(d map[string]string)) {
	cur, err := m.store.Get(context.Background())
	must(m.t, err)
	f(cur.Data)
	m.rec, err = m.store.Update(context.Background(), cur)
	must(m.t, err)
}

// intent is the move intent the killed invoke wrote (after-move-intent).
func (m *moveCrash) intent() {
	mv := record.Move{From: "a", FromID: m.oldID, N: 1, At: time.Now().UTC(),
		To: record.Placed{Target: "b", Backend: "fakeb", Policy: record.PolicyOrdered, At: time.Now().UTC()}}
	b, _ := json.Marshal(mv)
	m.write(func(d map[string]string) { d[record.KeyMove] = string(b) })
}

// restartRunsOnce: the restart ends DONE on b, with one job on each cluster: a's
// cancelled while it waited, b's the one that ran.
func (m *moveCrash) restartRunsOnce() {
	t := m.t
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a ceiling: a move not resumed waits an hour
	defer cancel()
	must(t, m.iv.Run(ctx))
	if res := m.iv.Result(); res.Status != "DONE" || res.Target != "b" {
		t.Fatalf("after the restart: %+v", res)
	}
	aj, bj := m.a.Jobs(), m.b.Jobs()
	if len(aj) != 1 || len(bj) != 1 || aj[0].Cancelled == nil || !aj[0].Cancelled.Before(aj[0].Submitted.Add(aj[0].Pending)) {
		t.Fatalf("want a's one job cancelled while it waited and b's one job: a %+v, b %+v", aj, bj)
	}
	d, err := m.store.Get(context.Background())
	must(t, err)
	moves, _ := record.ParseMoves(d.Data[record.KeyMoves])
	if len(moves) != 1 || moves[0].ID != m.oldID || d.Data[record.KeyID] != bj[0].ID || d.Data[record.KeyMove] != "" {
		t.Fatalf("the record: id %q, moves %+v, move %q", d.Data[record.KeyID], moves, d.Data[record.KeyMove])
	}
}

// TestMoveResumesAfterEachCrash: invoke killed at each step of a move
// (the record and the clusters as the kill left them), restarted.
func TestMoveResumesAfterEachCrash(t *testing.T) {
	t.Run("after-move-intent", func(t *testing.T) {
		m := newMoveCrash(t)
		m.intent()
		m.restartRunsOnce()
	})
	t.Run("after-move-cancel", func(t *testing.T) {
		m := newMoveCrash(t)
		m.intent()
		if pc, err := m.a.CancelIfPending(context.Background(), m.oldID); err != nil || !pc.Cancelled {
			t.Fatalf("%+v %v", pc, err)
		}
		m.restartRunsOnce()
	})
	t.Run("after-commit", func(t *testing.T) {
		m := newMoveCrash(t)
		m.intent()
		_, _ = m.a.CancelIfPending(context.Background(), m.oldID)
		r := &run{Invoker: m.iv.withDefaults(), rec: m.rec}
		must(t, r.commitMove(context.Background(), mustMove(t, m.rec.Data[record.KeyMove]), "test"))
		m.restartRunsOnce()
	})
	t.Run("after-submit", func(t *testing.T) {
		m := newMoveCrash(t)
		m.intent()
		_, _ = m.a.CancelIfPending(context.Background(), m.oldID)
		r := &run{Invoker: m.iv.withDefaults(), rec: m.rec}
		must(t, r.commitMove(context.Background(), mustMove(t, m.rec.Data[record.KeyMove]), "test"))
		m.rec = r.rec
		host, _ := os.Hostname()
		key := jobKey(m.rec.UID, m.rec.Data)
		m.write(func(d map[string]string) { // submitted at b, killed before the id was written
			d[record.KeyIntent] = intent{holder: fmt.Sprintf("%s/%d/1", host, 1<<22+7), at: time.Now()}.String()
			d[record.KeyKey] = key
		})
		_, err := m.b.Submit(context.Background(), backends.Job{Key: key, Properties: json.RawMessage(`{"run":"50ms"}`)})
		must(t, err)
		m.restartRunsOnce()
	})
}

func mustMove(t *testing.T, v string) record.Move {
	mv, err := record.ParseMove(v)
	if err != nil || mv == nil {
		t.Fatalf("no move in the record: %v", err)
	}
	return *mv
}
