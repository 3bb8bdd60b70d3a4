package sshexec_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

func clientFor(t *testing.T, url string, creds backends.Credentials) *sshexec.Client {
	t.Helper()
	target, err := sshexec.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := sshexec.New(target, creds, nil, sshexec.Options{})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTwoJumpHosts: a job's commands reach the login node through two
// real sshd jump hosts, each with a host key of its own checked against
// its own known_hosts entry (jump1-known_hosts, and a line of the shared
// known_hosts), and each logged in to with its own credentials: jump host
// 1 takes certificates only, so the login node's plain key is refused
// there, naming the hop, and jump1-ssh-privatekey with
// jump1-ssh-certificate gets in.
func TestTwoJumpHosts(t *testing.T) {
	srv := testssh.Default(t)
	var log1, log2 testutil.SyncBuffer
	b1 := testssh.StartBastion(t, srv, &log1, map[string]string{"AuthorizedKeysFile": "none"})
	b2 := testssh.StartBastion(t, srv, &log2, nil)
	creds := testssh.Creds(t, srv.CredsDir)
	kh, _ := creds.Get("known_hosts")
	creds.Set("known_hosts", kh+"\n"+b2.KnownHosts)
	creds.Set("jump1-known_hosts", b1.KnownHosts)
	url := fmt.Sprintf("%s?proxyjump=%s@%s,%s", srv.URL, srv.User, b1.Addr(), b2.Addr())
	ctx := testssh.Ctx(t, time.Minute)

	_, err := clientFor(t, url, creds).Run(ctx, sshexec.Cmd{Args: []string{"true"}})
	if !errors.Is(err, backends.ErrAuth) || !strings.Contains(err.Error(), "jump host 1") {
		t.Fatalf("the plain key at the certificate-only jump host: want ErrAuth naming jump host 1, got %v", err)
	}

	cert := testssh.Creds(t, srv.CertDir)
	for _, k := range []string{"ssh-privatekey", "ssh-certificate"} {
		v, _ := cert.Get(k)
		creds.Set("jump1-"+k, v)
	}
	c := clientFor(t, url, creds)
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"id", "-un"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != srv.User {
		t.Fatalf("through two jump hosts: %v, %q", err, res.Stdout)
	}
	for i := 0; i < 10; i++ {
		if res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"echo", fmt.Sprint(i)}}); err != nil || strings.TrimSpace(string(res.Stdout)) != fmt.Sprint(i) {
			t.Fatalf("command %d: %v %q", i, err, res.Stdout)
		}
	}
	if d := c.Dials(); d != 1 {
		t.Fatalf("%d connections for 11 commands, want 1", d)
	}
	// Each jump host forwarded to the next hop: 1 to 2, 2 to the login node.
	_, srvPort, _ := strings.Cut(srv.Addr, ":")
	testssh.WaitLog(t, "jump host 1", &log1, "Accepted publickey for "+srv.User, "direct-tcpip", fmt.Sprintf("port %d", b2.Port))
	testssh.WaitLog(t, "jump host 2", &log2, "Accepted publickey for "+srv.User, "direct-tcpip", "port "+srvPort)
	// Closing the client closes the jump hosts' connections too: each
	// jump host's sshd ends its session.
	var before1, before2 testutil.SyncBuffer
	before1.Write([]byte(log1.String()))
	before2.Write([]byte(log2.String()))
	c.Close()
	for name, logs := range map[string][2]*testutil.SyncBuffer{"jump host 1": {&log1, &before1}, "jump host 2": {&log2, &before2}} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if sessionEnded(strings.TrimPrefix(logs[0].String(), logs[1].String())) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: its session did not end after Close:\n%s", name, logs[0].String())
			}
		}
	}
}

// TestJumpHostKeyIsChecked: a jump host whose key known_hosts does not
// hold, or holds otherwise, is refused before any login there, exit 2,
// never retried; trust-first-use never covers a jump host.
func TestJumpHostKeyIsChecked(t *testing.T) {
	srv := testssh.Default(t)
	var log testutil.SyncBuffer
	url, creds, b := testssh.ViaBastion(t, srv, srv, &log)
	ctx := testssh.Ctx(t, time.Minute)
	hostPort := strings.Fields(b.KnownHosts)[0]
	for name, set := range map[string]func(){
		"another key":          func() { creds.Set("jump1-known_hosts", hostPort+" "+publicKeyLine(t)) },
		"no line for the host": func() { creds.Delete("jump1-known_hosts") },
	} {
		set()
		c := clientFor(t, url, creds)
		_, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}})
		testutil.RequireFieldError(t, err, "credentials")
		if errors.Is(err, backends.ErrTransient) || !strings.Contains(err.Error(), "SHA256:") || !strings.Contains(err.Error(), fmt.Sprintf("]:%d", b.Port)) && !strings.Contains(err.Error(), b.Addr()) {
			t.Errorf("%s: want a final refusal naming the jump host and the key's fingerprint, got %v", name, err)
		}
		if name == "no line for the host" && !strings.Contains(err.Error(), "jump1-known_hosts") {
			t.Errorf("%s: the refusal does not say where the line may go: %v", name, err)
		}
		if c.Dials() != 0 {
			t.Errorf("%s: a connection was kept", name)
		}
	}
	if strings.Contains(log.String(), "Accepted publickey") {
		t.Errorf("a login happened at a jump host whose key was refused:\n%s", log.String())
	}
	// The jump host has no line of its own either: which case ran last
	// above is up to the map's order.
	creds.Delete("known_hosts")
	creds.Delete("jump1-known_hosts")
	c := clientFor(t, url+"&hostkey=trust-first-use", creds)
	err := c.Check()
	testutil.RequireFieldError(t, err, "credentials")
	if !strings.Contains(err.Error(), "jump host 1") {
		t.Errorf("trust-first-use with a jump host: want known_hosts required for it, got %v", err)
	}
}

// TestAgentOnlyKey: with no key in the Secret, a real ssh-agent's key
// logs in to the jump host and the login node, found by SSH_AUTH_SOCK or
// by the URL's agent=. An agent with no key, or a socket that is not
// there, is said as such.
func TestAgentOnlyKey(t *testing.T) {
	srv := testssh.Default(t)
	sock := testssh.Agent(t, filepath.Join(srv.CredsDir, "ssh-privatekey"))
	url, creds, _ := testssh.ViaBastion(t, srv, srv, nil)
	creds.Delete("ssh-privatekey")
	creds.Delete("jump1-ssh-privatekey")
	ctx := testssh.Ctx(t, time.Minute)

	t.Setenv("SSH_AUTH_SOCK", sock)
	c := clientFor(t, url, creds)
	if err := c.Check(); err != nil {
		t.Fatalf("Check with an agent and no key in the Secret: %v", err)
	}
	if res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"id", "-un"}}); err != nil || strings.TrimSpace(string(res.Stdout)) != srv.User {
		t.Fatalf("agent from SSH_AUTH_SOCK: %v %q", err, res.Stdout)
	}

	t.Setenv("SSH_AUTH_SOCK", "")
	if err := clientFor(t, url, creds).Check(); err == nil {
		t.Fatal("no key and no agent: Check passed")
	}
	if res, err := clientFor(t, url+"&agent="+sock, creds).Run(ctx, sshexec.Cmd{Args: []string{"id", "-un"}}); err != nil || strings.TrimSpace(string(res.Stdout)) != srv.User {
		t.Fatalf("agent from the URL: %v %q", err, res.Stdout)
	}
	_, err := clientFor(t, url+"&agent="+testssh.Agent(t), creds).Run(ctx, sshexec.Cmd{Args: []string{"true"}})
	if !errors.Is(err, backends.ErrAuth) || !strings.Contains(err.Error(), "ssh-add") {
		t.Fatalf("an agent with no key: want ErrAuth saying to ssh-add one, got %v", err)
	}
	err = clientFor(t, url+"&agent="+sock+".missing", creds).Check()
	testutil.RequireFieldError(t, err, "resourceURL")

	// A stale SSH_AUTH_SOCK is passed over, as ssh passes it over, while
	// the Secret has a key; without one, it is what the refusal names.
	t.Setenv("SSH_AUTH_SOCK", sock+".gone")
	err = clientFor(t, url, creds).Check()
	testutil.RequireFieldError(t, err, "SSH_AUTH_SOCK")
	key, _ := testssh.Creds(t, srv.CredsDir).Get("ssh-privatekey")
	creds.Set("ssh-privatekey", key)
	creds.Set("jump1-ssh-privatekey", key)
	if _, err := clientFor(t, url, creds).Run(ctx, sshexec.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatalf("a stale SSH_AUTH_SOCK and a key in the Secret: %v", err)
	}
}

// TestKeyboardInteractiveIsExit2: a login node that asks, after the key
// or instead of it, for keyboard-interactive (a one-time code) is refused
// as configuration (exit 2) naming what works unattended: a certificate
// or a long-lived agent.
func TestKeyboardInteractiveIsExit2(t *testing.T) {
	srv := testssh.Default(t)
	for name, methods := range map[string]string{"second factor": "publickey,keyboard-interactive", "no key at all": "keyboard-interactive"} {
		d := testssh.StartCustom(t, srv, testssh.Config{Set: map[string]string{"AuthenticationMethods": methods, "KbdInteractiveAuthentication": "yes"}})
		creds := testssh.Creds(t, srv.CredsDir)
		kh, _ := creds.Get("known_hosts")
		_, port, _ := strings.Cut(srv.Addr, ":")
		creds.Set("known_hosts", strings.Replace(kh, "]:"+port+" ", fmt.Sprintf("]:%d ", d.Port), 1))
		c := clientFor(t, fmt.Sprintf("ssh://%s@%s", srv.User, d.Addr()), creds)
		_, err := c.Run(testssh.Ctx(t, time.Minute), sshexec.Cmd{Args: []string{"true"}})
		testutil.RequireFieldError(t, err, "credentials")
		if !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), "agent") || !strings.Contains(err.Error(), "keyboard-interactive") {
			t.Errorf("%s: the refusal does not say what to do: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestJumpHostThatCannotForward: a jump host whose sshd forbids forwarding
// is configuration (exit 2 naming resourceURL and the hop); one that
// cannot reach the next host (nothing listens there) is transient.
func TestJumpHostThatCannotForward(t *testing.T) {
	srv := testssh.Default(t)
	ctx := testssh.Ctx(t, time.Minute)
	b := testssh.StartBastion(t, srv, nil, map[string]string{"AllowTcpForwarding": "no"})
	creds := testssh.Creds(t, srv.CredsDir)
	creds.Set("jump1-known_hosts", b.KnownHosts)
	_, err := clientFor(t, fmt.Sprintf("%s?proxyjump=%s@%s", srv.URL, srv.User, b.Addr()), creds).Run(ctx, sshexec.Cmd{Args: []string{"true"}})
	testutil.RequireFieldError(t, err, "resourceURL")
	if !strings.Contains(err.Error(), "jump host 1") || !strings.Contains(err.Error(), "AllowTcpForwarding") {
		t.Errorf("a jump host that may not forward: %v", err)
	}

	url, creds, _ := testssh.ViaBastion(t, srv, srv, nil)
	closed := testssh.StartSSHD(t, srv)
	closed.Stop() // a port where nothing listens any more
	url = strings.Replace(url, srv.Addr, closed.Addr(), 1)
	_, err = clientFor(t, url, creds).Run(ctx, sshexec.Cmd{Args: []string{"true"}})
	if !errors.Is(err, backends.ErrTransient) || !strings.Contains(err.Error(), closed.Addr()) {
		t.Fatalf("a jump host that cannot reach the login node: want a transient error naming it, got %v", err)
	}
	t.Logf("%v", err)
}

// TestJumpHostRestartRedialsTheChain: when the jump host goes down (its
// sessions with it), the login node's connection through it ends, the
// next command is a transient error or dials the whole chain again, and
// once the jump host is back the commands run through a new chain.
func TestJumpHostRestartRedialsTheChain(t *testing.T) {
	srv := testssh.Default(t)
	url, creds, b := testssh.ViaBastion(t, srv, srv, nil)
	target, err := sshexec.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := sshexec.New(target, creds, nil, sshexec.Options{KeepAlive: 200 * time.Millisecond, KeepAliveMax: 2})
	t.Cleanup(func() { c.Close() })
	ctx := testssh.Ctx(t, time.Minute)
	if _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	if _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); !errors.Is(err, backends.ErrTransient) {
		t.Fatalf("with the jump host down: want a transient error, got %v", err)
	}
	b.Start()
	if res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"echo", "back"}}); err != nil || strings.TrimSpace(string(res.Stdout)) != "back" {
		t.Fatalf("with the jump host back: %v %q", err, res.Stdout)
	}
	if d := c.Dials(); d != 2 {
		t.Errorf("%d chains dialled, want 2 (one before the restart, one after)", d)
	}
}

// sessionEnded: sshd's log says a client's connection ended. A client that
// closes with data in flight resets the connection, and sshd then logs a
// read error instead of "Closing connection".
func sessionEnded(log string) bool {
	for _, end := range []string{"Closing connection to 127.0.0.1", "Read error from remote host 127.0.0.1", "Connection reset by 127.0.0.1"} {
		if strings.Contains(log, end) {
			return true
		}
	}
	return false
}
