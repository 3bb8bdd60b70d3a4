package slurm

import (
	"bytes"
	"context"
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestSSHEndMarker: the wrapper leaves the script's exit status in the end
// marker, owner-only, for a job that succeeds, fails and is cancelled;
// WaitEnd sees it (also from a backend that only re-attached), and Forget
// removes it once the job ended.
func TestSSHEndMarker(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, 2*time.Minute)
	for _, c := range []struct {
		name, script, want string
		cancel             bool
		state              backends.State
	}{
		{"done", "#!/bin/sh\necho hi\n", "0", false, backends.Done},
		{"failed", "#!/bin/bash\nexit 3\n", "3", false, backends.Failed},
		{"cancelled", "#!/bin/sh\ntouch started\nsleep 300\n", "143", true, backends.Killed},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := b.Submit(ctx, backends.Job{Name: "end-" + c.name, Key: sshKey(t), Script: c.script})
			if err != nil {
				t.Fatal(err)
			}
			if c.cancel {
				sshFollow(t, b, id, backends.Running)
				// Slurm says RUNNING before slurmd has started the batch
				// script (under load, seconds before): a cancel then ends the
				// job with no wrapper to leave a marker.
				sshAwaitFile(t, b, path.Join(path.Dir(b.files[id].end), "started"))
				if err := b.Cancel(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.WaitEnd(ctx, id); err != nil {
				t.Fatalf("WaitEnd: %v", err)
			}
			if st := sshFollow(t, b, id, c.state); st.State != c.state {
				t.Fatalf("want %s, got %+v", c.state, st)
			}
			end := b.files[id].end
			if got := markerText(t, b, end); got != c.want+"\n" {
				t.Errorf("the marker says %q, want %q", got, c.want+"\n")
			}
			res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"stat", "-c", "%a", end}})
			if err != nil || strings.TrimSpace(string(res.Stdout)) != "600" {
				t.Errorf("the marker's mode: %q %v, want 600", res.Stdout, err)
			}
			again := sshBackend(t) // a re-attach: only the job id is known
			if _, err := again.Status(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := again.WaitEnd(testssh.Ctx(t, 30*time.Second), id); err != nil {
				t.Fatalf("WaitEnd after a re-attach: %v", err)
			}
			if err := again.Forget(ctx, id); err != nil {
				t.Fatalf("Forget: %v", err)
			}
			if res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"test", "-e", end}}); err != nil || res.ExitCode != 1 {
				t.Errorf("the marker stays after Forget (%v, exit %d)", err, res.ExitCode)
			}
		})
	}
}

// TestSSHEndMarkerNotForSIGKILL: a wrapper killed with SIGKILL leaves no
// marker; WaitEnd keeps waiting (until its ctx), and the job's end is
// the polls' to find. An array's end is not watched at all.
func TestSSHEndMarkerNotForSIGKILL(t *testing.T) {
	b := sshBackend(t)
	ctx := testssh.Ctx(t, 2*time.Minute)
	id, err := b.Submit(ctx, backends.Job{Name: "end-sigkill", Key: sshKey(t), Script: "#!/bin/sh\nkill -9 $PPID\nsleep 2\n"})
	if err != nil {
		t.Fatal(err)
	}
	if st := sshFollow(t, b, id, backends.Done); !st.State.Final() {
		t.Fatalf("not final: %+v", st)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := b.WaitEnd(wctx, id); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitEnd without a marker: %v, want the ctx's deadline", err)
	}
	arr, err := b.SubmitArray(ctx, backends.Job{Name: "end-array", Key: sshKey(t), Script: "#!/bin/sh\ntrue\n"}, mustArray(t, "0-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitEnd(ctx, arr); err == nil || ctx.Err() != nil {
		t.Fatalf("WaitEnd of an array: %v, want an error at once", err)
	}
}

// sshAwaitFile waits until file exists on the cluster (the job wrote it).
func sshAwaitFile(t *testing.T, b *SSHBackend, file string) {
	t.Helper()
	ctx := testssh.Ctx(t, 2*time.Minute)
	back := record.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Factor: 2, Jitter: 0.2}
	for {
		res, err := b.ssh.Run(ctx, sshexec.Cmd{Args: []string{"test", "-e", file}})
		if err == nil && res.ExitCode == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never appeared: %v", file, err)
		}
		record.SleepCtx(ctx, back.Next())
	}
}

func markerText(t *testing.T, b *SSHBackend, end string) string {
	t.Helper()
	if end == "" {
		t.Fatal("the backend knows no end marker for the job")
	}
	var out bytes.Buffer
	if _, err := b.ssh.ReadFrom(testssh.Ctx(t, 30*time.Second), end, 0, &out); err != nil {
		t.Fatalf("reading the marker: %v", err)
	}
	return out.String()
}

func mustArray(t *testing.T, s string) backends.Array {
	t.Helper()
	a, err := backends.ParseArray(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
