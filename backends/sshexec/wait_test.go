package sshexec_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestWaitForReturnsWhenTheFileAppears: WaitFor returns nil once the
// condition holds on the login node, with one remote command.
func TestWaitForReturnsWhenTheFileAppears(t *testing.T) {
	srv := testssh.Default(t)
	c := newClient(t, srv, testssh.Creds(t, srv.CredsDir), sshexec.Options{})
	ctx := testssh.Ctx(t, time.Minute)
	marker := fmt.Sprintf("/tmp/bridge-waitfor-%d", time.Now().UnixNano())
	t.Cleanup(func() { _, _ = c.Run(context.Background(), sshexec.Cmd{Args: []string{"rm", "-f", marker}}) })
	done := make(chan error, 1)
	go func() { done <- c.WaitFor(ctx, "test", "-e", marker) }()
	select {
	case err := <-done:
		t.Fatalf("WaitFor returned before the file existed: %v", err)
	case <-time.After(time.Second):
	}
	if _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"touch", marker}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitFor: %v", err)
	}
	if n := c.Commands(); n != 2 {
		t.Errorf("%d remote commands, want 2 (the wait and the touch)", n)
	}
}

// TestWaitForLeavesNothingRunning: once ctx ends, the remote loop is gone
// from the login node's process list (its channel closed; its heartbeat
// write fails), within a generous ceiling.
func TestWaitForLeavesNothingRunning(t *testing.T) {
	for _, srv := range []testssh.Server{testssh.Default(t), testssh.Condor(t)} {
		t.Run(srv.Addr, func(t *testing.T) {
			c := newClient(t, srv, testssh.Creds(t, srv.CredsDir), sshexec.Options{})
			marker := fmt.Sprintf("/tmp/bridge-waitfor-never-%d", time.Now().UnixNano())
			wctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.WaitFor(wctx, "test", "-e", marker) }()
			ctx := testssh.Ctx(t, time.Minute)
			waitProcess(t, ctx, c, marker, true)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("WaitFor after ctx ended: %v, want context.Canceled", err)
			}
			waitProcess(t, ctx, c, marker, false)
		})
	}
}

// waitProcess waits, within 15 s, until a process whose command line
// names marker is (running) or is not on the login node.
func waitProcess(t *testing.T, ctx context.Context, c *sshexec.Client, marker string, running bool) {
	t.Helper()
	b := record.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	end := time.Now().Add(15 * time.Second)
	for {
		res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"ps", "-eo", "args"}})
		if err != nil {
			t.Fatal(err)
		}
		if found := strings.Contains(string(res.Stdout), marker); found == running {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the remote wait command running=%v after 15 s, want %v", !running, running)
		}
		record.SleepCtx(ctx, b.Next())
	}
}
