// Package testssh connects tests to the real OpenSSH servers that
// hack/sshd-up.sh runs on 127.0.0.1 (the plain one, whose user runs the
// host's Slurm commands, and the ones in HTCondor's roots that
// hack/htcondor-up.sh and hack/htcondor25-up.sh start).
//
//	bash hack/sshd-up.sh && source /tmp/bridge-runner-sshd/env
//
// When a variable is missing, tests that need the server are skipped on a
// developer machine but FAIL when CI is set.
package testssh

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// Server is one test sshd as its env file describes it.
type Server struct {
	URL        string // ssh://user@127.0.0.1:port
	Addr       string // 127.0.0.1:port
	User       string
	CredsDir   string // ssh-privatekey, known_hosts
	CertDir    string // ssh-privatekey, ssh-certificate, known_hosts
	SSHDConfig string // the server's config file (host path)
	Root       string // its chroot, if any
}

// Env returns the server whose variables start with prefix (BRIDGE_TEST_SSH
// for hack/sshd-up.sh's default). It skips the test when they are unset, or
// fails it under CI.
func Env(t testing.TB, prefix, hint string) Server {
	t.Helper()
	get := func(name string) string {
		v := os.Getenv(prefix + "_" + name)
		if v == "" {
			msg := "testssh: " + prefix + "_" + name + " is not set: this test needs a real sshd; " + hint
			if os.Getenv("CI") != "" {
				t.Fatalf("%s (failing instead of skipping because CI is set)", msg)
			}
			t.Skip(msg)
		}
		return v
	}
	return Server{URL: get("URL"), Addr: get("ADDR"), User: get("USER"), CredsDir: get("CREDS"),
		CertDir: get("CERT_CREDS"), SSHDConfig: get("SSHD_CONFIG"), Root: os.Getenv(prefix + "_ROOT")}
}

// Default is the server of hack/sshd-up.sh.
func Default(t testing.TB) Server {
	return Env(t, "BRIDGE_TEST_SSH", "start it with `bash hack/sshd-up.sh` and `source /tmp/bridge-runner-sshd/env`")
}

// Creds reads a credentials directory into in-memory credentials that a
// test may change.
func Creds(t testing.TB, dir string) *testutil.Creds {
	t.Helper()
	kv := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		kv[e.Name()] = string(b)
	}
	return testutil.NewCreds(kv)
}

var _ backends.Credentials = (*testutil.Creds)(nil)

// SSHD is a private sshd a test starts from a shared server's config, on a
// port of its own, so that it can stop and restart it without disturbing
// the tests that share the server.
type SSHD struct {
	t    testing.TB
	conf string
	Port int
	cmd  *exec.Cmd
	// KnownHosts is the known_hosts line of a server with a host key of
	// its own (StartCustom with NewHostKey), else "".
	KnownHosts string
	log        io.Writer
}

// StartSSHD starts a private sshd with srv's config on a free port. It is
// stopped, with its sessions, at cleanup.
func StartSSHD(t testing.TB, srv Server) *SSHD {
	t.Helper()
	if srv.Root != "" {
		t.Fatal("testssh: StartSSHD needs a server outside a chroot")
	}
	d := &SSHD{t: t, conf: srv.SSHDConfig, Port: freePort(t)}
	d.Start()
	t.Cleanup(d.Stop)
	return d
}

// Config is how a private server differs from the shared one it copies.
type Config struct {
	// NewHostKey gives the server a host key of its own, so that it is
	// another host to known_hosts (a jump host, say).
	NewHostKey bool
	// Set replaces (or adds) sshd_config options, e.g.
	// {"AllowTcpForwarding": "yes"}; "" removes one.
	Set map[string]string
	// Log receives the server's log (sshd -e).
	Log io.Writer
}

// StartCustom starts a private sshd from a copy of srv's config changed
// as cfg says, on a free port; it is stopped at cleanup.
func StartCustom(t testing.TB, srv Server, cfg Config) *SSHD {
	t.Helper()
	if srv.Root != "" {
		t.Fatal("testssh: StartCustom needs a server outside a chroot")
	}
	dir := t.TempDir()
	set := map[string]string{}
	for k, v := range cfg.Set {
		set[strings.ToLower(k)] = k + " " + v
		if v == "" {
			set[strings.ToLower(k)] = ""
		}
	}
	var known string
	if cfg.NewHostKey {
		key := filepath.Join(dir, "ssh_host_ed25519_key")
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bridge-runner test host "+t.Name(), "-f", key).CombinedOutput(); err != nil {
			t.Fatalf("testssh: ssh-keygen: %v: %s", err, out)
		}
		pub, err := os.ReadFile(key + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		set["hostkey"] = "HostKey " + key
		known = strings.Join(strings.Fields(string(pub))[:2], " ")
	}
	conf := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(conf, []byte(customConfig(t, srv.SSHDConfig, set)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/usr/sbin/sshd", "-t", "-f", conf).CombinedOutput(); err != nil {
		t.Fatalf("testssh: sshd refused the config %v: %v: %s", cfg.Set, err, out)
	}
	d := &SSHD{t: t, conf: conf, Port: freePort(t), log: cfg.Log}
	if known != "" {
		d.KnownHosts = fmt.Sprintf("[127.0.0.1]:%d %s", d.Port, known)
	}
	d.Start()
	t.Cleanup(d.Stop)
	return d
}

// customConfig is the config at path with the options in set replaced
// (keys lower-case, values whole lines, "" to drop) and Port dropped (the
// command line gives it).
func customConfig(t testing.TB, path string, set map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			if _, replaced := set[strings.ToLower(f[0])]; replaced || strings.EqualFold(f[0], "Port") {
				continue
			}
		}
		out = append(out, line)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if set[k] != "" {
			out = append(out, set[k])
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// StartBastion starts a jump host: a private sshd from srv's config with
// a host key of its own that forwards TCP connections (ProxyJump), logging
// each forwarding to log (LogLevel DEBUG1 says "direct-tcpip").
func StartBastion(t testing.TB, srv Server, log io.Writer, set map[string]string) *SSHD {
	t.Helper()
	all := map[string]string{"AllowTcpForwarding": "yes", "LogLevel": "DEBUG1"}
	maps.Copy(all, set)
	return StartCustom(t, srv, Config{NewHostKey: true, Set: all, Log: log})
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Agent starts a real ssh-agent holding the keys in keyFiles (OpenSSH
// private keys, as the credentials directories hold them) and returns its
// socket; it is stopped at cleanup.
func Agent(t testing.TB, keyFiles ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agent") // short: a socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	cmd := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := cmd.Start(); err != nil {
		t.Fatalf("testssh: ssh-agent: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Wait for a connection, not for the file: ssh-agent binds (the file
	// appears) before it listens, and a connect in between is refused
	// (CI saw that as "connection refused" from the client under test).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("testssh: ssh-agent accepted no connection in 10s")
		}
	}
	for _, k := range keyFiles {
		add := exec.Command("ssh-add", k)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("testssh: ssh-add %s: %v: %s", k, err, out)
		}
	}
	return sock
}

// Addr is 127.0.0.1:port.
func (d *SSHD) Addr() string { return "127.0.0.1:" + strconv.Itoa(d.Port) }

// Start starts the server (again) and waits until it accepts connections.
func (d *SSHD) Start() {
	d.t.Helper()
	d.cmd = exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", d.conf, "-o", "Port="+strconv.Itoa(d.Port), "-o", "PidFile=none")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("testssh: starting sshd: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", d.Addr(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("testssh: sshd on %s not up after 10s: %v", d.Addr(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server and every session it serves (its children), as a
// crash or reboot of the login node would.
func (d *SSHD) Stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	// Each session is a tree (privileged monitor, the user's process that
	// holds the socket, the command): take every descendant.
	var tree []int
	for next := []int{d.cmd.Process.Pid}; len(next) > 0; {
		p := next[0]
		next = append(next[1:], children(p)...)
		tree = append(tree, p)
	}
	for _, p := range tree {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	_ = d.cmd.Wait()
	d.cmd = nil
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, st := range dirs {
		f, err := os.Open(st)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PPid:"); ok {
				if p, _ := strconv.Atoi(strings.TrimSpace(v)); p == pid {
					n, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
					out = append(out, n)
				}
				break
			}
		}
		f.Close()
	}
	return out
}

// Ctx is a context for one test step.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Condor is the login node of hack/htcondor-up.sh's pool (HTCondor 23.9).
func Condor(t testing.TB) Server { return CondorPools[0].Server(t) }

// CondorPool is one of the suite's real HTCondor pools, by the release
// line it runs and the prefix of its env variables.
type CondorPool struct {
	Version, Prefix, Hint string
}

// CondorPools are the suite's HTCondor pools, oldest first: Debian 13's
// 23.9 and Debian unstable's 25, each in a root of its own with a login
// node (hack/htcondor-up.sh, hack/htcondor25-up.sh).
var CondorPools = []CondorPool{
	{"23.9", "BRIDGE_TEST_CONDOR_SSH", "start it with `bash hack/htcondor-up.sh` and `source /tmp/bridge-runner-htcondor/env`"},
	{"25", "BRIDGE_TEST_CONDOR25_SSH", "start it with `bash hack/htcondor25-up.sh` and `source /tmp/bridge-runner-htcondor25/env`"},
}

// EachCondorB runs bench once per pool, as the sub-benchmark
// "htcondor-VERSION", one after the other (figures side by side, not
// disturbing each other); a pool whose env is missing skips its part, or
// fails it under CI.
func EachCondorB(b *testing.B, bench func(b *testing.B, srv Server)) {
	b.Helper()
	for _, p := range CondorPools {
		b.Run("htcondor-"+p.Version, func(b *testing.B) { bench(b, p.Server(b)) })
	}
}

// Server is the pool's login node (skipped without its env, failed under CI).
func (p CondorPool) Server(t testing.TB) Server { return Env(t, p.Prefix, p.Hint) }

// EachCondor runs test once per pool, as the subtest "htcondor-VERSION",
// the pools at once (each is its own machine); a pool whose env is missing
// skips its subtest, or fails it under CI. ("-", not "=": tests put their
// names in job keys, which take letters, digits, ".", "_" and "-".)
func EachCondor(t *testing.T, test func(t *testing.T, srv Server)) {
	t.Helper()
	for _, p := range CondorPools {
		t.Run("htcondor-"+p.Version, func(t *testing.T) {
			t.Parallel()
			test(t, p.Server(t))
		})
	}
}

// ViaBastion starts a jump host from jump's config (jump's user and key
// log in there) and returns a resourceURL and credentials that reach
// target through it: target's own key and known_hosts, and the jump
// host's as jump1-ssh-privatekey and jump1-known_hosts. log receives the
// jump host's log.
func ViaBastion(t testing.TB, target, jump Server, log io.Writer) (string, *testutil.Creds, *SSHD) {
	t.Helper()
	b := StartBastion(t, jump, log, nil)
	creds := Creds(t, target.CredsDir)
	jumpKey, err := Creds(t, jump.CredsDir).Get("ssh-privatekey")
	if err != nil {
		t.Fatal(err)
	}
	creds.Set("jump1-ssh-privatekey", jumpKey)
	creds.Set("jump1-known_hosts", b.KnownHosts)
	sep := "?"
	if strings.Contains(target.URL, "?") {
		sep = "&"
	}
	return target.URL + sep + "proxyjump=" + jump.User + "@" + b.Addr(), creds, b
}

// WaitLog waits until a server's log holds every one of words (sshd
// writes its log as things happen, a little after the client saw them),
// and fails the test after 10 s.
func WaitLog(t testing.TB, what string, log *testutil.SyncBuffer, words ...string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		missing := ""
		for _, w := range words {
			if !strings.Contains(log.String(), w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: its log never says %q:\n%s", what, missing, log.String())
		}
	}
}
