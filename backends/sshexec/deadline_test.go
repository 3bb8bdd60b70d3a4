package sshexec_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// TestRunEndsWithItsContextOnASilentConnection: issue 37. The caller's
// deadline (a retry budget, a grace period) is a ceiling: a command under
// way when the network goes silent returns when its context ends, not 5 s
// later (the old code waited for the abandoned session to close, which a
// silent peer never lets happen, before returning: a 60 s invoke budget
// over SSH ended after 65-80 s).
func TestRunEndsWithItsContextOnASilentConnection(t *testing.T) {
	c, p := proxiedClient(t, sshexec.Options{})
	defer c.Close()
	if _, err := c.Run(testssh.Ctx(t, time.Minute), sshexec.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	const budget = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, sshexec.Cmd{Args: []string{"sleep", "30"}})
		done <- err
	}()
	time.Sleep(budget / 2) // the command is running when the network goes silent
	p.Set(t, testutil.Blackhole)
	select {
	case err := <-done:
		took := time.Since(start)
		t.Logf("a command on a connection gone silent, context of %s: returned after %s: %v", budget, took.Round(time.Millisecond), err)
		if err == nil {
			t.Fatal("a command cut off by its context reported success")
		}
		// The deadline names the server that did not answer, and is still
		// the deadline: a budget that ends before the keepalives find the
		// connection silent says what was silent (a CI run's invoke said
		// only "context deadline exceeded").
		if want := "ssh: no answer from " + p.Addr + " to sleep for "; !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not contain %q", err, want)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the error %q is not the context's deadline", err)
		}
		if took > budget+time.Second {
			t.Fatalf("returned %s after its context's %s ended", took-budget, budget)
		}
	case <-time.After(budget + 30*time.Second):
		t.Fatal("Run did not return")
	}
}

// A command running when the network to the server goes silent is found
// cut off by its connection's probe (ProbeAfter, then ReplyTimeout), not
// only by the connection's keepalives (45 s by default, here far past the
// caller's deadline) or that deadline: the command ends as a transient
// lost connection, which the runner retries on a new connection within
// its budget. Without the probe it waited out its caller's deadline.
func TestARunningCommandsConnectionIsProbed(t *testing.T) {
	c, p := proxiedClient(t, sshexec.Options{KeepAlive: 10 * time.Minute, ReplyTimeout: 2 * time.Second, ProbeAfter: 500 * time.Millisecond})
	defer c.Close()
	if _, err := c.Run(testssh.Ctx(t, time.Minute), sshexec.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	// A ceiling far past the probe's 2.5 s: the caller's budget.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, sshexec.Cmd{Args: []string{"sleep", "60"}})
		done <- err
	}()
	time.Sleep(time.Second) // the command runs, and its probes are answered
	p.Set(t, testutil.Blackhole)
	err := <-done
	t.Logf("a running command whose network went silent: %v", err)
	if !errors.Is(err, backends.ErrTransient) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the error %q is not a transient lost connection found before the caller's deadline", err)
	}
	if want := p.Addr; !strings.Contains(err.Error(), want) {
		t.Errorf("the error %q does not name the server %s", err, want)
	}
}

// proxiedClient is a client of the test sshd through a proxy of its own
// (whose address the known_hosts entry is rewritten to), for a test to
// break the network in between.
func proxiedClient(t *testing.T, opts sshexec.Options) (*sshexec.Client, *testutil.Proxy) {
	t.Helper()
	srv := testssh.Default(t)
	p := testutil.NewProxy(t, srv.Addr)
	creds := testssh.Creds(t, srv.CredsDir)
	kh, _ := creds.Get("known_hosts")
	_, port, _ := strings.Cut(p.Addr, ":")
	creds.Set("known_hosts", strings.Replace(kh, "["+strings.Replace(srv.Addr, ":", "]:", 1), "[127.0.0.1]:"+port, 1))
	target, _ := sshexec.ParseURL(fmt.Sprintf("ssh://%s@%s", srv.User, p.Addr))
	return sshexec.New(target, creds, nil, opts), p
}
