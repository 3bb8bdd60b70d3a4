package local

// Fuzz targets for the local backend's records read back from disk —
// job.json and state.json, which a crash, a full disk or a person may have
// left in any shape — and for its jobproperties. Invariants: Status of a
// corrupt record errors or gives one of backends.States; DONE only for exit
// code 0 of a job that was neither cancelled nor signalled; KILLED only for a
// cancel or a terminating signal; an end time only at a final state; a job
// whose supervisor is gone without an end is UNKNOWN, never RUNNING; nothing
// is launched or signalled.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
)

var fzStateSeeds = []string{
	`{"supervisorPid":123,"pid":124,"started":"2025-01-01T00:00:00Z","ended":"2025-01-01T00:00:05Z","exitCode":0}`,
	`{"supervisorPid":123,"pid":124,"started":"2025-01-01T00:00:00Z","ended":"2025-01-01T00:00:05Z","exitCode":3}`,
	`{"supervisorPid":123,"pid":124,"started":"2025-01-01T00:00:00Z","ended":"2025-01-01T00:00:05Z","signal":"killed"}`,
	`{"supervisorPid":123,"pid":124,"started":"2025-01-01T00:00:00Z","ended":"2025-01-01T00:00:05Z","signal":"segmentation fault"}`,
	`{"supervisorPid":123,"started":"2025-01-01T00:00:00Z","ended":"2025-01-01T00:00:05Z","cancelled":true}`,
	`{"supervisorPid":123,"started":"2025-01-01T00:00:00Z","ended":"2025-01-01T00:00:05Z","error":"exec: no such file"}`,
	`{"supervisorPid":123,"pid":124,"started":"2025-01-01T00:00:00Z"}`,
	`{"supervisorPid":-1,"pid":0,"started":"not a time"}`,
	`{"ended":null,"exitCode":null}`,
	`{}`, `null`, `[]`, ``,
}

var fzSpecSeeds = []string{
	`{"key":"k","name":"n","created":"2025-01-01T00:00:00Z","command":["./script"],"workdir":"","env":["BRIDGE_JOB_NAME=n"]}`,
	`{"key":"k","command":[]}`,
	`{"created":"yesterday"}`,
	`{}`, `null`, ``,
}

// FuzzLocalRecords writes job.json and state.json and reads the job back.
func FuzzLocalRecords(f *testing.F) {
	for _, sp := range fzSpecSeeds {
		for _, st := range fzStateSeeds {
			f.Add([]byte(sp), []byte(st))
		}
	}
	f.Fuzz(func(t *testing.T, jobJSON, stateJSON []byte) {
		b := fzRecord(t, jobJSON, stateJSON)
		ctx := context.Background()
		out, err := b.Status(ctx, "k")
		var sp spec
		specOK := json.Unmarshal(jobJSON, &sp) == nil
		var st *state
		if json.Unmarshal(stateJSON, &st) != nil {
			st = nil
		}
		switch {
		case !specOK:
			if err == nil {
				t.Fatal("a corrupt job.json read as a status")
			}
			return
		case st == nil:
			// null or corrupt state.json
			if err == nil && out.State != backends.Pending && out.State != backends.Unknown {
				t.Fatalf("a null or corrupt state.json gave %s", out.State)
			}
			if err != nil {
				return
			}
		case err != nil:
			t.Fatalf("a readable record gave an error: %v", err)
		}
		if !out.State.Valid() {
			t.Fatalf("state %q", out.State)
		}
		if !out.EndTime.IsZero() && !out.State.Final() {
			t.Fatalf("an end time at %s", out.State)
		}
		if st != nil {
			fzCheckState(t, out.State, st, stateJSON)
		}
		if id, _ := b.FindByKey(ctx, "k"); id != "k" {
			t.Fatalf("FindByKey does not find a job with a job.json: %q", id)
		}
		_ = b.FetchOutput(ctx, "k", "output.log", io.Discard)
		if _, err := b.ReadLogs(ctx, "k", 0, io.Discard); err != nil {
			t.Fatalf("ReadLogs: %v", err)
		}
	})
}

// FuzzLocalJobProperties: jobproperties through Validate; what it accepts
// decodes to the documented fields only.
func FuzzLocalJobProperties(f *testing.F) {
	for _, p := range []string{`{"workdir":"/tmp","env":{"A":"1"},"args":["x","y"]}`, `{"workdir":"/nonexistent"}`, `{"env":{"A":1}}`,
		`{"partition":"x"}`, `{"args":"x"}`, `{}`, `null`, `[]`, `{"env":`, ``, `{"workdir":"/tmp"} trailing`} {
		f.Add([]byte(p), "k")
	}
	f.Add([]byte(`{}`), "../x")
	f.Add([]byte(`{}`), "")
	f.Fuzz(func(t *testing.T, props []byte, key string) {
		b := &Backend{root: t.TempDir(), exe: "/bin/true"}
		job := backends.Job{Name: "n", Key: key, Properties: props, Script: "true"}
		err := b.Validate(job)
		if err != nil {
			var fe *backends.FieldError
			if !errors.Is(err, backends.ErrInvalid) || !errors.As(err, &fe) ||
				(fe.Field != "jobproperties" && fe.Field != "idempotency key" && fe.Field != "jobdata.jobScript") {
				t.Fatalf("refusal %v", err)
			}
			return
		}
		if !validKey(key) {
			t.Fatalf("key %q accepted", key)
		}
		p, err := parseProperties(props)
		if err != nil {
			t.Fatalf("Validate accepted properties that do not parse: %v", err)
		}
		if p.Workdir != "" {
			if fi, err := os.Stat(p.Workdir); err != nil || !fi.IsDir() {
				t.Fatalf("workdir %q accepted", p.Workdir)
			}
		}
	})
}

// fzRecord is a backend with job "k" recorded as jobJSON and stateJSON.
func fzRecord(t *testing.T, jobJSON, stateJSON []byte) *Backend {
	// /bin/true as the supervisor: a record without state.json must not
	// start anything real (and, being fresh, is not relaunched anyway).
	b := &Backend{root: t.TempDir(), exe: "/bin/true"}
	dir := b.dir("k")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "job.json"), jobJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), stateJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// fzCheckState: the state read agrees with the recorded state.
func fzCheckState(t *testing.T, got backends.State, st *state, stateJSON []byte) {
	switch got {
	case backends.Done:
		if st.Cancelled || st.Signal != "" || st.Error != "" || st.ExitCode == nil || *st.ExitCode != 0 {
			t.Fatalf("DONE from %s", stateJSON)
		}
	case backends.Killed:
		if !st.Cancelled && st.Signal == "" {
			t.Fatalf("KILLED from %s", stateJSON)
		}
	case backends.Running:
		t.Fatalf("RUNNING without a live supervisor, from %s", stateJSON)
	}
	if st.Ended == nil && got != backends.Unknown {
		t.Fatalf("no end and no supervisor gave %s, want UNKNOWN", got)
	}
}
