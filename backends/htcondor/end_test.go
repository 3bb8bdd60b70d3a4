package htcondor_test

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/htcondor"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
)

// TestEndFromTheEventLog: WaitEnd returns once the job's event log holds
// its end, with the job's exit code there, for a job that succeeds, fails
// (exit 3) and is removed; also for a backend that only re-attached; and
// not before (a running job keeps it waiting). An array is not watched.
func TestEndFromTheEventLog(t *testing.T) { testssh.EachCondor(t, endFromTheEventLog) }

func endFromTheEventLog(t *testing.T, srv testssh.Server) {
	b := newBackend(t, srv)
	ctx := testssh.Ctx(t, 3*time.Minute)
	for _, c := range []struct {
		name, script, says string
		remove             bool
		state              backends.State
	}{
		{"done", "#!/bin/sh\ntrue\n", `\(return value 0\)`, false, backends.Done},
		{"failed", "#!/bin/sh\nexit 3\n", `\(return value 3\)`, false, backends.Failed},
		{"removed", "#!/bin/sh\nsleep 300\n", `(?m)^009 .*Job was aborted`, true, backends.Killed},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := b.Submit(ctx, job(t, c.script, nil))
			if err != nil {
				t.Fatal(err)
			}
			if c.remove {
				follow(t, b, id, backends.Running)
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := b.WaitEnd(wctx, id)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("WaitEnd of a running job: %v, want the ctx's deadline", err)
				}
				if err := b.Cancel(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.WaitEnd(ctx, id); err != nil {
				t.Fatalf("WaitEnd: %v", err)
			}
			var log bytes.Buffer
			if err := b.FetchOutput(ctx, id, "job.log", &log); err != nil || !regexp.MustCompile(c.says).Match(log.Bytes()) {
				t.Errorf("the event log (%v) does not say %s:\n%s", err, c.says, log.String())
			}
			again := newBackend(t, srv) // a re-attach: only the job id is known
			if st := follow(t, again, id, c.state); st.State != c.state {
				t.Fatalf("want %s, got %+v", c.state, st)
			}
			if err := again.WaitEnd(ctx, id); err != nil {
				t.Fatalf("WaitEnd after a re-attach: %v", err)
			}
		})
	}
	arr, err := b.SubmitArray(ctx, job(t, "#!/bin/sh\ntrue\n", nil), mustArray(t, "0-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitEnd(ctx, arr); err == nil || ctx.Err() != nil {
		t.Fatalf("WaitEnd of an array: %v, want an error at once", err)
	}
	_ = b.Cancel(ctx, arr)
}

// TestEndEventPattern: the pattern matches the job's own end events
// (numbers zero-padded to three digits, or longer) and no other job's.
func TestEndEventPattern(t *testing.T) {
	re := regexp.MustCompile(htcondor.EndEvent("12.0"))
	for line, want := range map[string]bool{
		"005 (012.000.000) 2026-11-29 06:00:00 Job terminated.":  true,
		"009 (012.000.000) 2026-11-29 06:00:00 Job was aborted.": true,
		"012 (012.000.000) 2026-11-29 06:00:00 Job was held.":    true,
		"001 (012.000.000) 2026-11-29 06:00:00 Job executing":    false,
		"005 (112.000.000) 2026-11-29 06:00:00 Job terminated.":  false,
		"005 (012.001.000) 2026-11-29 06:00:00 Job terminated.":  false,
		"005 (1012.000.000) 2026-11-29 06:00:00 Job terminated.": false,
	} {
		if re.MatchString(line) != want {
			t.Errorf("%q: match %v, want %v", line, !want, want)
		}
	}
	if !regexp.MustCompile(htcondor.EndEvent("1234.10")).MatchString("005 (1234.010.000) x") {
		t.Error("a cluster id of four digits")
	}
}

func mustArray(t *testing.T, s string) backends.Array {
	t.Helper()
	a, err := backends.ParseArray(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
