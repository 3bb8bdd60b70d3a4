package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sshCounter counts the remote commands and SFTP sessions the invokes of
// one run started on a login node. Its sshd (hack/sshd-up.sh) logs at
// VERBOSE, one "Starting session: ... from 127.0.0.1 port P" line per
// session, naming the client's port but not the command; the invokes'
// own ports are read from /proc while they run, so that whoever else
// uses the same sshd meanwhile (other tests) is not counted. A command's
// kind (submit, batched query, one job's query) is not in the log, but
// the watcher queries with a backend of its own (runner.startLeading),
// hence a connection of its own: a connection an invoke opened after its
// first is counted as the watcher's (a reconnect would be too; the
// invokes' logs say when one happened).
type sshCounter struct {
	log    string // the sshd's log
	port   int    // the sshd's port
	offset int64  // the log's size before the run

	mu    sync.Mutex
	ports map[int]sshConn // the invokes' client ports to the sshd
	tick  int
	stop  chan struct{}
	done  chan struct{}
}

// newSSHCounter finds the sshd's log next to its credentials directory
// (hack/sshd-up.sh's state dir) and its port in the target URL.
func newSSHCounter(b *testing.B, target, creds string) *sshCounter {
	u, err := url.Parse(target)
	if err != nil {
		b.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		b.Fatalf("%s: no port: %v", target, err)
	}
	c := &sshCounter{log: filepath.Join(filepath.Dir(filepath.Clean(creds)), "sshd.log"), port: port, ports: map[int]sshConn{}}
	fi, err := os.Stat(c.log)
	if err != nil {
		b.Fatalf("the login node's sshd log, to count its sessions: %v", err)
	}
	c.offset = fi.Size()
	return c
}

// follow reads the invokes' connections to the sshd every 100 ms until
// figures is called (each keeps its connection for its whole run).
func (c *sshCounter) follow(cmds []*exec.Cmd) {
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			c.sample(cmds)
			select {
			case <-t.C:
			case <-c.stop:
				return
			}
		}
	}()
}

// sshConn is an invoke's connection to the sshd: whose, and the sample
// that first saw it.
type sshConn struct{ invoke, tick int }

// sample adds the local ports of the processes' TCP sockets to the sshd.
func (c *sshCounter) sample(cmds []*exec.Cmd) {
	c.mu.Lock()
	c.tick++
	tick := c.tick
	c.mu.Unlock()
	inodes := map[string]int{} // socket inode: the invoke's index
	for i, cmd := range cmds {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", cmd.Process.Pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = i
			}
		}
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 {
				continue
			}
			i, ok := inodes[f[9]]
			if !ok || hexPort(f[2]) != c.port {
				continue
			}
			c.mu.Lock()
			if _, seen := c.ports[hexPort(f[1])]; !seen {
				c.ports[hexPort(f[1])] = sshConn{invoke: i, tick: tick}
			}
			c.mu.Unlock()
		}
	}
}

// hexPort is the port of /proc/net/tcp's ADDR:PORT (hexadecimal).
func hexPort(addr string) int {
	_, p, _ := strings.Cut(addr, ":")
	n, err := strconv.ParseInt(p, 16, 32)
	if err != nil {
		return -1
	}
	return int(n)
}

var sessionRE = regexp.MustCompile(`Starting session: (.*) for \S+ from \S+ port (\d+) `)

// figures stops following and counts the run's sessions of the invokes'
// ports in the log.
func (c *sshCounter) figures(b *testing.B, f *watchFigures) string {
	close(c.stop)
	<-c.done
	f.ssh = true
	file, err := os.Open(c.log)
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	if _, err := file.Seek(c.offset, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	watcherConn := c.watcherConns()
	others := 0
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		m := sessionRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		p, _ := strconv.Atoi(m[2])
		_, ours := c.ports[p]
		switch {
		case !ours:
			others++
		case strings.Contains(m[1], "sftp"):
			f.sftp++
		case watcherConn[p]:
			f.sshCmds++
			f.sshWatcherCmds++
		default:
			f.sshCmds++
		}
	}
	return fmt.Sprintf("ssh commands %d (%d on the watchers' %d connections) and SFTP sessions %d on %d connections (%d sessions of others)",
		f.sshCmds, f.sshWatcherCmds, len(watcherConn), f.sftp, len(c.ports), others)
}

// watcherConns are the ports of the connections each invoke opened after
// its first.
func (c *sshCounter) watcherConns() map[int]bool {
	first := map[int]int{} // invoke: the sample that saw its first connection
	for _, cn := range c.ports {
		if t, ok := first[cn.invoke]; !ok || cn.tick < t {
			first[cn.invoke] = cn.tick
		}
	}
	out := map[int]bool{}
	for p, cn := range c.ports {
		if cn.tick > first[cn.invoke] {
			out[p] = true
		}
	}
	return out
}
