// Package testssh connects tests to the real OpenSSH servers that
// hack/sshd-up.sh runs on 127.0.0.1 (the plain one, whose user runs the
// host's Slurm commands, and the one in HTCondor's chroot that
// hack/htcondor-up.sh starts).
//
//	bash hack/sshd-up.sh && source /tmp/bridge-runner-sshd/env
//
// When a variable is missing, tests that need the server are skipped on a
// developer machine but FAIL when CI is set.
package testssh

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
}

// StartSSHD starts a private sshd with srv's config on a free port. It is
// stopped, with its sessions, at cleanup.
func StartSSHD(t testing.TB, srv Server) *SSHD {
	t.Helper()
	if srv.Root != "" {
		t.Fatal("testssh: StartSSHD needs a server outside a chroot")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	d := &SSHD{t: t, conf: srv.SSHDConfig, Port: port}
	d.Start()
	t.Cleanup(d.Stop)
	return d
}

// Addr is 127.0.0.1:port.
func (d *SSHD) Addr() string { return "127.0.0.1:" + strconv.Itoa(d.Port) }

// Start starts the server (again) and waits until it accepts connections.
func (d *SSHD) Start() {
	d.t.Helper()
	d.cmd = exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", d.conf, "-o", "Port="+strconv.Itoa(d.Port), "-o", "PidFile=none")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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

// Condor is the login node of hack/htcondor-up.sh's pool.
func Condor(t testing.TB) Server {
	return Env(t, "BRIDGE_TEST_CONDOR_SSH", "start it with `bash hack/htcondor-up.sh` and `source /tmp/bridge-runner-htcondor/env`")
}
