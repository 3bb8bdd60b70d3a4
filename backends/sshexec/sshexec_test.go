package sshexec_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
	"github.com/bridge-runner/bridge-runner/internal/testssh"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// hostile are arguments that would run code, split, or vanish if any
// layer parsed them as shell.
var hostile = []string{
	"plain", "", " ", "two words", "'", `"`, `'\''`, `\`, `\\'`, "$HOME", "${HOME}", "$(touch /tmp/pwned-sshexec)",
	"`touch /tmp/pwned-sshexec`", "a;touch /tmp/pwned-sshexec", "a && false", "a|cat", "*", "?", "[a]", "~", "~root",
	"!", "!!", "#comment", "new\nline", "tab\there", "-n", "--", "-e", "a=b", "%s", "ünïcødé ✓", "\x01\x7f",
	"end with newline\n", strings.Repeat("'\"$`\\", 50),
}

// TestQuoteLocalShell: Quote gives back every hostile argument unchanged
// through a real POSIX shell (no server needed).
func TestQuoteLocalShell(t *testing.T) {
	for _, sh := range []string{"/bin/sh", "/bin/bash", "/bin/dash"} {
		if _, err := exec.LookPath(sh); err != nil {
			continue
		}
		line, err := sshexec.Join(append([]string{"printf", `%s\0`}, hostile...)...)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(sh, "-c", line).Output()
		if err != nil {
			t.Fatalf("%s -c %q: %v", sh, line, err)
		}
		checkEcho(t, sh, out, hostile)
	}
	if _, err := sshexec.Join("a\x00b"); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("a NUL byte: want ErrInvalid, got %v", err)
	}
}

func checkEcho(t *testing.T, where string, out []byte, want []string) {
	t.Helper()
	got := strings.Split(string(out), "\x00")
	got = got[:len(got)-1]
	if len(got) != len(want) {
		t.Fatalf("%s: %d arguments came back, want %d: %q", where, len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: argument %d came back as %q, want %q", where, i, got[i], want[i])
		}
	}
}

func FuzzQuote(f *testing.F) {
	for _, h := range hostile {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return
		}
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+sshexec.Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh failed on %q: %v", sshexec.Quote(s), err)
		}
		if string(out) != s {
			t.Fatalf("%q came back as %q", s, out)
		}
	})
}

func TestParseURL(t *testing.T) {
	for raw, want := range map[string]sshexec.Target{
		"ssh://alice@login.example:2222":                      {User: "alice", Host: "login.example", Port: 2222},
		"ssh://login.example":                                 {Host: "login.example", Port: 22},
		"SSH://bob@[::1]:22/work/dir":                         {User: "bob", Host: "::1", Port: 22, Dir: "work/dir"},
		"ssh://bob@h//scratch/bob":                            {User: "bob", Host: "h", Port: 22, Dir: "/scratch/bob"},
		"ssh://h?hostkey=trust-first-use":                     {Host: "h", Port: 22, TrustFirstUse: true},
		" ssh://carol@127.0.0.1:40000/ \n":                    {User: "carol", Host: "127.0.0.1", Port: 40000},
		"ssh://dave@host.example:22/?hostkey=trust-first-use": {User: "dave", Host: "host.example", Port: 22, TrustFirstUse: true},
		"ssh://erin@login.internal/w?proxyjump=bob@bastion.example:2222,gw.internal&agent=/run/agent.sock": {
			User: "erin", Host: "login.internal", Port: 22, Dir: "w", Agent: "/run/agent.sock",
			Jump: []sshexec.Hop{{User: "bob", Host: "bastion.example", Port: 2222}, {Host: "gw.internal", Port: 22}}},
		"ssh://h?proxyjump=[::1]:2200": {Host: "h", Port: 22, Jump: []sshexec.Hop{{Host: "::1", Port: 2200}}},
	} {
		got, err := sshexec.ParseURL(raw)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
	for _, bad := range []string{"http://h", "ssh://", "ssh://u:hunter2pw@h", "ssh://h:0", "ssh://h:99999", "ssh://h?insecure=1", "ssh://h?hostkey=yes",
		"ssh://h?proxyjump=", "ssh://h?proxyjump=a,,b", "ssh://h?proxyjump=b:0", "ssh://h?proxyjump=@b", "ssh://h?proxyjump=u:hunter2pw@b",
		"ssh://h?proxyjump=[::1]", "ssh://h?proxyjump=a&proxyjump=b", "ssh://h?agent=relative/sock", "ssh://h?proxyjump=a,b,c,d,e,f,g,h,i"} {
		_, err := sshexec.ParseURL(bad)
		testutil.RequireFieldError(t, err, "resourceURL")
		if strings.Contains(err.Error(), "hunter2pw") {
			t.Errorf("the error repeats the password: %v", err)
		}
	}
}

func newClient(t *testing.T, srv testssh.Server, creds backends.Credentials, opts sshexec.Options) *sshexec.Client {
	t.Helper()
	target, err := sshexec.ParseURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := sshexec.New(target, creds, nil, opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestHostileArgumentsOverSSH(t *testing.T) {
	srv := testssh.Default(t)
	c := newClient(t, srv, testssh.Creds(t, srv.CredsDir), sshexec.Options{})
	res, err := c.Run(testssh.Ctx(t, 30*time.Second), sshexec.Cmd{Args: append([]string{"printf", `%s\0`}, hostile...)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %d, stderr %s", err, res.ExitCode, res.Stderr)
	}
	checkEcho(t, "over ssh", res.Stdout, hostile)
	res, err = c.Run(testssh.Ctx(t, 30*time.Second), sshexec.Cmd{Args: []string{"test", "-e", "/tmp/pwned-sshexec"}})
	if err != nil || res.ExitCode != 1 {
		t.Fatalf("an argument ran as shell: /tmp/pwned-sshexec exists (%v, exit %d)", err, res.ExitCode)
	}
}

func TestRunStdinExitCodeAndOneConnection(t *testing.T) {
	srv := testssh.Default(t)
	c := newClient(t, srv, testssh.Creds(t, srv.CredsDir), sshexec.Options{})
	ctx := testssh.Ctx(t, time.Minute)
	payload := bytes.Repeat([]byte("line of input 'with' $quotes\n"), 20000)
	res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"cat"}, Stdin: bytes.NewReader(payload)})
	if err != nil || !bytes.Equal(res.Stdout, payload) {
		t.Fatalf("cat: %v; %d bytes back, want %d", err, len(res.Stdout), len(payload))
	}
	res, err = c.Run(ctx, sshexec.Cmd{Args: []string{"sh", "-c", "echo oops >&2; exit 7"}})
	if err != nil || res.ExitCode != 7 || strings.TrimSpace(string(res.Stderr)) != "oops" {
		t.Fatalf("exit 7: got %v, exit %d, stderr %q", err, res.ExitCode, res.Stderr)
	}
	res, err = c.Run(ctx, sshexec.Cmd{Args: []string{"no-such-command-here"}})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("a missing command: %v, exit %d", err, res.ExitCode)
	}
	for i := 0; i < 20; i++ {
		if _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	if d := c.Dials(); d != 1 {
		t.Fatalf("%d connections for 23 commands, want 1", d)
	}
}

func TestCertificateAuth(t *testing.T) {
	srv := testssh.Default(t)
	c := newClient(t, srv, testssh.Creds(t, srv.CertDir), sshexec.Options{})
	res, err := c.Run(testssh.Ctx(t, 30*time.Second), sshexec.Cmd{Args: []string{"id", "-un"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != srv.User {
		t.Fatalf("login by certificate: %v, %q", err, res.Stdout)
	}
}

func TestWrongHostKeyIsInvalid(t *testing.T) {
	srv := testssh.Default(t)
	creds := testssh.Creds(t, srv.CredsDir)
	kh, _ := creds.Get("known_hosts")
	host := strings.Fields(kh)[0]
	other := publicKeyLine(t)
	for name, known := range map[string]string{
		"mismatch":     host + " " + other,
		"unknown host": "[127.0.0.1]:1 " + strings.Join(strings.Fields(kh)[1:], " "),
		"revoked":      "@revoked " + kh + "\n" + kh,
	} {
		creds.Set("known_hosts", known)
		c := newClient(t, srv, creds, sshexec.Options{})
		_, err := c.Run(testssh.Ctx(t, 30*time.Second), sshexec.Cmd{Args: []string{"true"}})
		testutil.RequireFieldError(t, err, "credentials")
		if errors.Is(err, backends.ErrTransient) || !strings.Contains(err.Error(), "SHA256:") {
			t.Errorf("%s: want a final refusal that shows the fingerprint, got %v", name, err)
		}
		if c.Dials() != 0 {
			t.Errorf("%s: a connection was kept", name)
		}
	}
	creds.Delete("known_hosts")
	c := newClient(t, srv, creds, sshexec.Options{})
	_, err := c.Run(testssh.Ctx(t, 30*time.Second), sshexec.Cmd{Args: []string{"true"}})
	testutil.RequireFieldError(t, err, "credentials")
	if !strings.Contains(err.Error(), "known_hosts") {
		t.Errorf("missing known_hosts: the error does not say what to add: %v", err)
	}
}

func TestTrustFirstUseOnlyWhenAsked(t *testing.T) {
	srv := testssh.Default(t)
	creds := testssh.Creds(t, srv.CredsDir)
	creds.Delete("known_hosts")
	target, _ := sshexec.ParseURL(srv.URL + "?hostkey=trust-first-use")
	c := sshexec.New(target, creds, nil, sshexec.Options{})
	defer c.Close()
	if _, err := c.Run(testssh.Ctx(t, 30*time.Second), sshexec.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatalf("trust-first-use: %v", err)
	}
}

func TestWrongKeyIsAuthError(t *testing.T) {
	srv := testssh.Default(t)
	creds := testssh.Creds(t, srv.CredsDir)
	creds.Set("ssh-privatekey", privateKeyPEM(t))
	c := newClient(t, srv, creds, sshexec.Options{})
	_, err := c.Run(testssh.Ctx(t, 30*time.Second), sshexec.Cmd{Args: []string{"true"}})
	if !errors.Is(err, backends.ErrAuth) || errors.Is(err, backends.ErrTransient) {
		t.Fatalf("a key the server does not know: want ErrAuth, got %v", err)
	}
	creds.Set("ssh-privatekey", "not a key")
	_, err = c.Run(testssh.Ctx(t, 30*time.Second), sshexec.Cmd{Args: []string{"true"}})
	testutil.RequireFieldError(t, err, "credentials")
}

func TestHangingCommandTimesOut(t *testing.T) {
	srv := testssh.Default(t)
	c := newClient(t, srv, testssh.Creds(t, srv.CredsDir), sshexec.Options{})
	ctx := testssh.Ctx(t, time.Minute)
	mark := fmt.Sprintf("sleep 3%d", time.Now().UnixNano()%1000+1000)
	start := time.Now()
	_, err := c.Run(ctx, sshexec.Cmd{Args: []string{"sh", "-c", mark}, Timeout: time.Second})
	if !errors.Is(err, backends.ErrTransient) || time.Since(start) > 15*time.Second {
		t.Fatalf("a hanging command: want a transient error soon, got %v after %s", err, time.Since(start))
	}
	if _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatalf("the connection is not usable after a timeout: %v", err)
	}
	// The server was told to kill it: it does not linger on the login node.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"pgrep", "-f", "^" + mark}})
		if err == nil && res.ExitCode == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the timed-out command still runs: %v %s", err, res.Stdout)
		}
	}
}

func TestReconnectAfterSSHDRestart(t *testing.T) {
	srv := testssh.Default(t)
	d := testssh.StartSSHD(t, srv)
	creds := testssh.Creds(t, srv.CredsDir)
	kh, _ := creds.Get("known_hosts")
	creds.Set("known_hosts", strings.Replace(kh, "["+strings.Replace(srv.Addr, ":", "]:", 1), "[127.0.0.1]:"+fmt.Sprint(d.Port), 1))
	target, _ := sshexec.ParseURL(fmt.Sprintf("ssh://%s@%s", srv.User, d.Addr()))
	c := sshexec.New(target, creds, nil, sshexec.Options{KeepAlive: 200 * time.Millisecond})
	defer c.Close()
	ctx := testssh.Ctx(t, time.Minute)
	if _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	// Mid-command: the server and its sessions die while a command runs.
	errc := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, sshexec.Cmd{Args: []string{"sleep", "30"}})
		errc <- err
	}()
	time.Sleep(500 * time.Millisecond)
	d.Stop()
	if err := <-errc; !errors.Is(err, backends.ErrTransient) {
		t.Fatalf("a command cut off by the restart: want a transient error, got %v", err)
	}
	if _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); !errors.Is(err, backends.ErrTransient) {
		t.Fatalf("while the server is down: want a transient error, got %v", err)
	}
	d.Start()
	res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"echo", "back"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "back" {
		t.Fatalf("after the restart: %v %q", err, res.Stdout)
	}
	if c.Dials() != 2 {
		t.Fatalf("%d connections, want 2 (one before, one after the restart)", c.Dials())
	}
}

func TestKeepaliveFindsASilentDrop(t *testing.T) {
	c, p := proxiedClient(t, sshexec.Options{KeepAlive: 100 * time.Millisecond})
	defer c.Close()
	ctx := testssh.Ctx(t, time.Minute)
	if _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	p.Restore(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The first command may still meet the dead connection (transient);
		// then the client dials again.
		if _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); err == nil {
			break
		} else if !errors.Is(err, backends.ErrTransient) || time.Now().After(deadline) {
			t.Fatalf("after a drop: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c.Dials() != 2 {
		t.Fatalf("%d connections, want 2", c.Dials())
	}
}

func TestSFTPReadWrite(t *testing.T) {
	srv := testssh.Default(t)
	c := newClient(t, srv, testssh.Creds(t, srv.CredsDir), sshexec.Options{})
	ctx := testssh.Ctx(t, time.Minute)
	dir := fmt.Sprintf("sshexec-test-%d", time.Now().UnixNano())
	defer c.Run(ctx, sshexec.Cmd{Args: []string{"rm", "-rf", dir}})
	name := dir + "/sub dir/it's a file"
	if err := c.WriteFile(ctx, name, strings.NewReader("hello, world\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	next, err := c.ReadFrom(ctx, name, 7, &buf)
	if err != nil || buf.String() != "world\n" || next != 13 {
		t.Fatalf("read from 7: %v %q next=%d", err, buf.String(), next)
	}
	res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"stat", "-c", "%a", name}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "640" {
		t.Fatalf("mode: %v %q %s", err, res.Stdout, res.Stderr)
	}
	// The directories WriteFile made are the user's only, from before the
	// file was in them: another user of the node cannot list or enter them.
	res, err = c.Run(ctx, sshexec.Cmd{Args: []string{"stat", "-c", "%a", dir, dir + "/sub dir"}})
	if err != nil || strings.Fields(string(res.Stdout))[0] != "700" || strings.Fields(string(res.Stdout))[1] != "700" {
		t.Fatalf("the directories WriteFile made: %v %q %s, want 700 700", err, res.Stdout, res.Stderr)
	}
	if _, err := c.ReadFrom(ctx, dir+"/missing", 0, &buf); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("a missing file: want ErrNotFound, got %v", err)
	}
}

// privateKeyPEM is a fresh key no server knows.
func privateKeyPEM(t *testing.T) string {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ssh.MarshalPrivateKey(k, "")
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(b))
}

// publicKeyLine is "type base64" of a fresh key.
func publicKeyLine(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// viaProxy is a client that reaches srv through p, with known_hosts naming
// the proxy's port.
func viaProxy(t *testing.T, srv testssh.Server, p *testutil.Proxy, log *slog.Logger, opts sshexec.Options) *sshexec.Client {
	t.Helper()
	creds := testssh.Creds(t, srv.CredsDir)
	kh, _ := creds.Get("known_hosts")
	_, port, _ := strings.Cut(p.Addr, ":")
	creds.Set("known_hosts", strings.Replace(kh, "["+strings.Replace(srv.Addr, ":", "]:", 1), "[127.0.0.1]:"+port, 1))
	target, _ := sshexec.ParseURL(fmt.Sprintf("ssh://%s@%s", srv.User, p.Addr))
	c := sshexec.New(target, creds, log, opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPartitionIsBoundedAndLogged: the network between client and server
// goes silent in both directions, the connection left open (a partition),
// while a command runs and SFTP is open. Every call returns a transient
// error within its bound and the log says why; a cancelled context ends a
// call at once. Before, the keepalive watcher hung closing SFTP while
// holding the client's lock, and every later call hung behind it.
func TestPartitionIsBoundedAndLogged(t *testing.T) {
	srv := testssh.Default(t)
	p := testutil.NewProxy(t, srv.Addr)
	var logs testutil.SyncBuffer
	opts := sshexec.Options{DialTimeout: 2 * time.Second, KeepAlive: 300 * time.Millisecond, KeepAliveMax: 3, ReplyTimeout: 2 * time.Second}
	c := viaProxy(t, srv, p, slog.New(slog.NewTextHandler(&logs, nil)), opts)
	ctx := testssh.Ctx(t, 2*time.Minute)
	dir := fmt.Sprintf("sshexec-partition-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		newClient(t, srv, testssh.Creds(t, srv.CredsDir), sshexec.Options{}).Run(ctx, sshexec.Cmd{Args: []string{"rm", "-rf", dir}})
	})
	if err := c.WriteFile(ctx, dir+"/f", strings.NewReader("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, sshexec.Cmd{Args: []string{"sleep", "60"}})
		errc <- err
	}()
	time.Sleep(500 * time.Millisecond)
	p.Set(t, testutil.Blackhole)
	defer p.Set(t, testutil.Pass)
	start := time.Now()
	// within: the call ends with a transient error within limit.
	within := func(what string, limit time.Duration, call func() error) {
		t.Helper()
		t0 := time.Now()
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if !errors.Is(err, backends.ErrTransient) {
				t.Fatalf("%s in a partition: want a transient error, got %v", what, err)
			}
			t.Logf("%s in a partition: %v after %s", what, err, time.Since(t0).Round(time.Millisecond))
		case <-time.After(limit):
			t.Fatalf("%s in a partition: no answer after %s (goroutines hang)", what, limit)
		}
	}
	within("a running command", 10*time.Second, func() error { return <-errc })
	t.Logf("partition found after %s", time.Since(start).Round(time.Millisecond))
	within("a new command", 10*time.Second, func() error { _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); return err })
	within("an SFTP read", 10*time.Second, func() error { _, err := c.ReadFrom(ctx, dir+"/f", 0, io.Discard); return err })
	if !strings.Contains(logs.String(), "no answer from "+p.Addr) {
		t.Errorf("the log does not say the server went silent:\n%s", logs.String())
	}
	// SIGTERM: a cancelled context ends a call waiting on a silent server.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(300*time.Millisecond, cancel)
	t0 := time.Now()
	if _, err := c.Run(cctx, sshexec.Cmd{Args: []string{"true"}}); !errors.Is(err, context.Canceled) || time.Since(t0) > time.Second {
		t.Fatalf("a cancelled call in a partition: %v after %s, want context.Canceled at once", err, time.Since(t0))
	}
	p.Set(t, testutil.Pass)
	if res, err := c.Run(ctx, sshexec.Cmd{Args: []string{"echo", "back"}}); err != nil || strings.TrimSpace(string(res.Stdout)) != "back" {
		t.Fatalf("after the partition: %v %q", err, res.Stdout)
	}

	// With keepalives too rare to notice, a session or an SFTP read on the
	// silent connection is bounded by the reply timeout.
	opts.KeepAlive = time.Hour
	for what, call := range map[string]func(*sshexec.Client) error{
		"opening a session": func(c *sshexec.Client) error { _, err := c.Run(ctx, sshexec.Cmd{Args: []string{"true"}}); return err },
		"an SFTP read":      func(c *sshexec.Client) error { _, err := c.ReadFrom(ctx, dir+"/f", 0, io.Discard); return err },
	} {
		logs.Reset()
		c := viaProxy(t, srv, p, slog.New(slog.NewTextHandler(&logs, nil)), opts)
		if err := c.WriteFile(ctx, dir+"/f", strings.NewReader("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		p.Set(t, testutil.Blackhole)
		within(what+" on an open connection", 10*time.Second, func() error { return call(c) })
		p.Set(t, testutil.Pass)
		if !strings.Contains(logs.String(), "no answer from "+p.Addr) {
			t.Errorf("%s: the log does not say the server went silent:\n%s", what, logs.String())
		}
	}
}
