// Package sshexec is the SSH transport of the backends that drive a job
// system by its commands on a login node (Slurm's sbatch, HTCondor's
// condor_submit). It is not a backend: a backend holds one Client for the
// whole invoke and runs every command over its one connection.
//
// What it guarantees:
//
//   - Authentication by key, or by a user certificate for that key, from the
//     credentials (ssh-privatekey, optional ssh-passphrase and
//     ssh-certificate), re-read at each connection so a rotated Secret is
//     used. A refused key is backends.ErrAuth.
//   - The server's host key is checked against known_hosts from the
//     credentials. A key that does not match (or a host known_hosts does not
//     list) is backends.ErrInvalid, exit 2, never retried. Trusting the first
//     key seen happens only when resourceURL asks for it
//     (?hostkey=trust-first-use) and known_hosts is absent.
//   - Jump hosts (?proxyjump=, OpenSSH's ProxyJump): each hop is a login of
//     its own through a TCP connection the hop before forwards, with its
//     own host key check (jumpN-known_hosts, else its line in known_hosts;
//     never trust-first-use) and its own key if the credentials have one
//     (jumpN-ssh-privatekey, jumpN-ssh-certificate, jumpN-ssh-passphrase,
//     jumpN-username), else the login node's. The chain is one connection.
//   - An SSH agent (?agent=PATH, else SSH_AUTH_SOCK) offers its keys to
//     every hop after the credentials' key; it is never forwarded.
//   - A host that wants keyboard-interactive or a password, instead of the
//     key or after it (MFA), is ErrInvalid naming what works unattended: a
//     certificate, or an agent that holds one.
//   - Keepalives (keepalive@openssh.com) find a dead connection; a dropped
//     connection is closed and the next command dials again. Dial failures
//     and drops are backends.ErrTransient: the runner's retries apply. A
//     running command's connection is asked too (probe), so that a
//     partition under it is found within ProbeAfter + ReplyTimeout.
//   - A command that was never started (the connection was found dead when
//     opening its session) is retried once on a new connection; a command
//     cut off mid-way is not re-run here, since only its caller knows whether
//     running it twice is safe.
//   - Arguments are quoted for the login shell one by one (see Quote), or
//     passed on stdin or by file: no user value is ever parsed as shell.
//   - Every command has a time limit; one that hangs is signalled, its
//     session closed, and a transient error returned.
package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Options tune a Client; zero values take the defaults.
type Options struct {
	DialTimeout    time.Duration // TCP connect and SSH handshake (15 s)
	CommandTimeout time.Duration // a command without its own limit (2 min)
	KeepAlive      time.Duration // interval of keepalive requests (15 s)
	KeepAliveMax   int           // unanswered keepalives before a drop (3)
	// ReplyTimeout bounds every wait for the server's answer: opening a
	// session or SFTP, starting a command, and each SFTP exchange (an
	// upload or download must make progress this often) (20 s).
	ReplyTimeout time.Duration
	// ProbeAfter is how long a running command waits before its
	// connection is asked for a keepalive reply, and again as long as it
	// runs: one that does not answer within ReplyTimeout is silent (5 s).
	ProbeAfter time.Duration
	// Counts counts each command by kind (backends.CommandKind) once its
	// outcome is known, and those without one as backends.KindError; SFTP
	// reads as backends.KindLog, writes as backends.KindStage. May be nil.
	Counts *backends.CommandCounts
}

func (o Options) withDefaults() Options {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 15 * time.Second
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 2 * time.Minute
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.KeepAliveMax <= 0 {
		o.KeepAliveMax = 3
	}
	if o.ReplyTimeout <= 0 {
		o.ReplyTimeout = 20 * time.Second
	}
	if o.ProbeAfter <= 0 {
		o.ProbeAfter = 5 * time.Second
	}
	return o
}

// Client is one SSH connection to a login node, dialled on first use and
// again after a drop. It is safe for concurrent use. Its lock guards only
// its fields: no network call is made while it is held, so a connection
// that stopped answering never blocks the goroutine that drops it.
type Client struct {
	target Target
	creds  backends.Credentials
	log    *slog.Logger
	opts   Options
	hops   []*hop // the jump hosts in order, then the login node
	// envAgent is SSH_AUTH_SOCK when the client was made.
	envAgent string

	mu      sync.Mutex
	conn    *ssh.Client
	sftp    *sftp.Client
	dialing chan struct{} // closed when the dial under way ends
	closed  bool
	dials   int // connections made, for tests and logs
	runs    int // commands started, for tests (a batch query's cost)

	waiters chan struct{} // a slot per WaitFor under way (MaxWaiters)
}

// New returns a client for target; it connects on first use.
func New(target Target, creds backends.Credentials, log *slog.Logger, opts Options) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{target: target, creds: creds, log: log, opts: opts.withDefaults(), envAgent: os.Getenv("SSH_AUTH_SOCK"),
		waiters: make(chan struct{}, MaxWaiters)}
	for i, j := range target.Jump {
		c.hops = append(c.hops, &hop{user: j.User, host: j.Host, port: j.Port, n: i + 1})
	}
	c.hops = append(c.hops, &hop{user: target.User, host: target.Host, port: target.Port, tofu: target.TrustFirstUse})
	return c
}

// route is every hop of the connection: the jump hosts, then the login node.
func (c *Client) route() []*hop { return c.hops }

// Target is where the client logs in.
func (c *Client) Target() Target { return c.target }

// Dials is the number of connections made so far.
func (c *Client) Dials() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dials
}

// Commands is the number of commands Run has started so far.
func (c *Client) Commands() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs
}

// Close closes the connection; the client is not usable afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conn, sc := c.detachLocked(c.conn)
	c.mu.Unlock()
	return closeConn(conn, sc)
}

// connect returns the open connection, dialling one if there is none. One
// dial runs at a time, outside the lock; others wait for it or their ctx.
func (c *Client) connect(ctx context.Context) (*ssh.Client, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, errors.New("ssh: client closed")
		case c.conn != nil:
			conn := c.conn
			c.mu.Unlock()
			return conn, nil
		case c.dialing != nil:
			wait := c.dialing
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.dialing = done
		c.mu.Unlock()
		conn, err := c.dial(ctx)
		c.mu.Lock()
		c.dialing = nil
		close(done)
		if err == nil && c.closed {
			_ = conn.Close()
			conn, err = nil, errors.New("ssh: client closed")
		}
		if err == nil {
			c.conn = conn
			c.dials++
			go c.watch(conn)
		}
		c.mu.Unlock()
		return conn, err
	}
}

// isAuthFailure: x/crypto reports a refused key only in words.
func isAuthFailure(err error) bool {
	return err != nil && containsAny(err.Error(), "unable to authenticate", "no supported methods remain")
}

// watch sends keepalives on conn and drops it when it dies or stops
// answering, so that the next command dials again instead of hanging, and
// every call waiting on it ends.
func (c *Client) watch(conn *ssh.Client) {
	done := make(chan struct{})
	go func() {
		_ = conn.Wait()
		close(done)
	}()
	t := time.NewTicker(c.opts.KeepAlive)
	defer t.Stop()
	var silentSince time.Time
	for {
		select {
		case <-done:
			c.drop(conn, "connection closed")
			return
		case <-t.C:
		}
		reply := askAlive(conn)
		select {
		case err := <-reply:
			if err != nil {
				c.drop(conn, "keepalive failed: "+errorKind(err))
				return
			}
			silentSince = time.Time{}
		case <-time.After(c.opts.KeepAlive):
			if silentSince.IsZero() {
				silentSince = time.Now().Add(-c.opts.KeepAlive)
			}
			if silent := time.Since(silentSince); silent >= time.Duration(c.opts.KeepAliveMax)*c.opts.KeepAlive {
				c.silent(conn, silent)
				return
			}
		case <-done:
			c.drop(conn, "connection closed")
			return
		}
	}
}

// askAlive sends conn a keepalive request that wants a reply, aside (a
// silent peer never answers): the channel gets the outcome.
func askAlive(conn *ssh.Client) <-chan error {
	reply := make(chan error, 1)
	go func() {
		_, _, err := conn.SendRequest("keepalive@openssh.com", true, nil)
		reply <- err
	}()
	return reply
}

// silent drops conn after it stopped answering for d (a network partition
// looks like this: the connection open, no traffic) and says so.
func (c *Client) silent(conn *ssh.Client, d time.Duration) {
	if c.detach(conn) {
		c.log.Warn(fmt.Sprintf("ssh: no answer from %s for %s, reconnecting", c.target.Addr(), d.Round(time.Second)))
	}
}

// drop closes conn if it is still the current connection.
func (c *Client) drop(conn *ssh.Client, why string) {
	if c.detach(conn) {
		c.log.Info("ssh connection dropped; the next command reconnects", "addr", c.target.Addr(), "why", why)
	}
}

// detach makes conn no longer the current connection and closes it; false
// if it was not current (someone else dropped it first).
func (c *Client) detach(conn *ssh.Client) bool {
	c.mu.Lock()
	cur, sc := c.detachLocked(conn)
	c.mu.Unlock()
	if cur == nil {
		return false
	}
	_ = closeConn(cur, sc)
	return true
}

func (c *Client) detachLocked(conn *ssh.Client) (*ssh.Client, *sftp.Client) {
	if conn == nil || c.conn != conn {
		return nil, nil
	}
	sc := c.sftp
	c.conn, c.sftp = nil, nil
	return conn, sc
}

// closeConn closes the connection first, which never blocks and ends every
// call waiting on it, SFTP's reader among them. SFTP's Close waits for that
// reader (and so, on a silent connection, for the connection to go), so it
// comes second and in the background.
func closeConn(conn *ssh.Client, sc *sftp.Client) error {
	if conn == nil {
		return nil
	}
	err := conn.Close()
	if sc != nil {
		go sc.Close()
	}
	return err
}

// await runs op, a request to the server on conn that waits for its
// answer, for at most ReplyTimeout: past that the connection is taken for
// silent and dropped (which ends op) and a transient error returned. When
// ctx ends first, ctx's error is returned at once. If op's outcome comes
// after await returned, undo releases it.
func (c *Client) await(ctx context.Context, conn *ssh.Client, what string, op func() error, undo func()) error {
	done := make(chan error, 1)
	since := time.Now()
	go func() { done <- op() }()
	t := time.NewTimer(c.opts.ReplyTimeout)
	defer t.Stop()
	var err error
	select {
	case err := <-done:
		return err
	case <-t.C:
		c.silent(conn, c.opts.ReplyTimeout)
		err = backends.Transient(fmt.Errorf("ssh: %s: no answer from %s for %s", what, c.target.Addr(), c.opts.ReplyTimeout))
	case <-ctx.Done():
		err = c.ended(ctx, what, since)
	}
	if undo != nil {
		go func() {
			if <-done == nil {
				undo()
			}
		}()
	}
	return err
}

// ended is the error of a wait for the server (for what, since since)
// that ctx ended. A deadline names the server that did not answer, for
// how long: a command started just before a partition waits for its
// answer until the keepalives find the connection silent (45 s), and a
// shorter retry budget ended first without a word of the server (a CI
// run, 2026-11-30). It still is the deadline (errors.Is); a cancel is only
// the cancel.
func (c *Client) ended(ctx context.Context, what string, since time.Time) error {
	err := ctx.Err()
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("ssh: no answer from %s to %s for %s: %w", c.target.Addr(), what, time.Since(since).Round(100*time.Millisecond), quiet(err))
}

// probe asks conn for a keepalive reply while a command runs on it (until
// ended), first after ProbeAfter and then ProbeAfter after each reply, and
// drops it when a reply does not come within ReplyTimeout: the command's
// wait then ends as a lost connection (transient). The connection's own
// keepalives give up only after KeepAlive × KeepAliveMax (45 s), longer
// than a retry budget of 30 s: a command started just before a partition
// ran out its caller's budget waiting (a CI run, 2026-11-30), where its
// retry, on a new connection, could have gone on.
func (c *Client) probe(conn *ssh.Client, ended <-chan struct{}) {
	next := time.NewTimer(c.opts.ProbeAfter)
	defer next.Stop()
	for {
		select {
		case <-ended:
			return
		case <-next.C:
		}
		reply := askAlive(conn)
		wait := time.NewTimer(c.opts.ReplyTimeout)
		select {
		case <-ended:
			wait.Stop()
			return
		case err := <-reply:
			wait.Stop()
			if err != nil {
				return // the connection is gone: the command's wait says so
			}
		case <-wait.C:
			c.silent(conn, c.opts.ReplyTimeout)
			return
		}
		next.Reset(c.opts.ProbeAfter)
	}
}

// Cmd is one remote command.
type Cmd struct {
	Args    []string      // argv; each argument is quoted (see Join)
	Stdin   io.Reader     // nil: empty
	Stdout  io.Writer     // nil: captured into Result.Stdout
	Timeout time.Duration // 0: the client's CommandTimeout
}

// Result is how a command ended. A non-zero exit code is not an error.
type Result struct {
	Stdout   []byte // when Cmd.Stdout was nil (at most maxCapture bytes)
	Stderr   []byte // at most maxCapture bytes
	ExitCode int
}

// maxCapture bounds captured output: the commands this package runs print
// little, and a runaway one must not exhaust memory.
const maxCapture = 8 << 20

// Run runs cmd and waits for it to end.
func (c *Client) Run(ctx context.Context, cmd Cmd) (res Result, err error) {
	line, err := Join(cmd.Args...)
	if err != nil {
		return Result{}, err
	}
	defer func() { c.count(backends.CommandKind(cmd.Args), err) }()
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = c.opts.CommandTimeout
	}
	sess, conn, err := c.session(ctx)
	if err != nil {
		return Result{}, err
	}
	defer sess.Close()
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	var stdout, stderr capture
	sess.Stdin = cmd.Stdin
	sess.Stdout = cmd.Stdout
	if cmd.Stdout == nil {
		sess.Stdout = &stdout
	}
	sess.Stderr = &stderr
	if err := c.await(ctx, conn, "starting "+cmd.Args[0], func() error { return sess.Start(line) }, nil); err != nil {
		if errors.Is(err, backends.ErrTransient) || ctx.Err() != nil {
			return Result{}, err
		}
		c.drop(conn, "starting a command failed")
		return Result{}, backends.Transient(fmt.Errorf("ssh: starting %s on %s: %w", cmd.Args[0], c.target.Addr(), quiet(err)))
	}
	waited := make(chan error, 1)
	started := time.Now()
	go func() { waited <- sess.Wait() }()
	ended := make(chan struct{})
	defer close(ended)
	go c.probe(conn, ended)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err = <-waited:
	case <-t.C:
		c.abandon(sess, conn, waited)
		return Result{}, backends.Transient(fmt.Errorf("ssh: %s on %s did not finish within %s", cmd.Args[0], c.target.Addr(), timeout))
	case <-ctx.Done():
		// The caller's deadline (a retry budget, a grace period) is a
		// ceiling: the session is let go in the background.
		go c.abandon(sess, conn, waited)
		return Result{}, c.ended(ctx, cmd.Args[0], started)
	}
	res = Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exit *ssh.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitStatus() // 128+n for signal n
	default: // ExitMissingError or a broken connection: the outcome is unknown
		c.drop(conn, "a command lost its connection")
		return res, backends.Transient(fmt.Errorf("ssh: %s on %s: connection lost before the command ended: %w", cmd.Args[0], c.target.Addr(), quiet(err)))
	}
	return res, nil
}

// count counts one command or transfer of kind, or an error for one
// without an outcome (a caller's cancel is no request's fault: not counted).
func (c *Client) count(kind string, err error) {
	switch {
	case err == nil:
		c.opts.Counts.Add(kind)
	case !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		c.opts.Counts.Add(backends.KindError)
	}
}

// abandon stops waiting for a command: it asks the server to kill it and
// closes its session. If the session does not end soon, the connection
// itself is taken for stuck and dropped. Signal and Close write to the
// connection, which a silent peer may never drain: they run aside.
func (c *Client) abandon(sess *ssh.Session, conn *ssh.Client, waited <-chan error) {
	go func() {
		_ = sess.Signal(ssh.SIGKILL)
		_ = sess.Close()
	}()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		c.drop(conn, "a timed-out command's session did not close")
	}
}

// session opens a session, dialling first if needed. If the connection
// turns out to be dead, which is found before anything ran, it dials once
// more. A server that does not answer within ReplyTimeout is dead too.
func (c *Client) session(ctx context.Context) (*ssh.Session, *ssh.Client, error) {
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		conn, err := c.connect(ctx)
		if err != nil {
			return nil, nil, err
		}
		var sess *ssh.Session
		err = c.await(ctx, conn, "opening a session", func() (err error) {
			sess, err = conn.NewSession()
			return err
		}, func() { sess.Close() })
		switch {
		case err == nil:
			return sess, conn, nil
		case ctx.Err() != nil:
			return nil, nil, err // ctx's (see ended)
		case errors.Is(err, backends.ErrTransient): // silent: dialling again now would only wait again
			return nil, nil, err
		}
		last = err
		c.drop(conn, "opening a session failed: "+errorKind(err))
	}
	return nil, nil, backends.Transient(fmt.Errorf("ssh: opening a session on %s: %w", c.target.Addr(), quiet(last)))
}

// capture keeps the first maxCapture bytes written to it.
type capture struct {
	mu  sync.Mutex
	buf []byte
}

func (w *capture) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := maxCapture - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (w *capture) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf
}

// FromConfig builds the client a CLI backend reaches its login node with,
// from the backend's configuration (resourceURL, credentials, logger), and
// returns the logger it uses (never nil).
func FromConfig(cfg backends.Config) (*Client, *slog.Logger, error) {
	t, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return New(t, cfg.Credentials, log, Options{Counts: cfg.Commands}), log, nil
}
