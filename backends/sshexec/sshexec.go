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
//   - Keepalives (keepalive@openssh.com) find a dead connection; a dropped
//     connection is closed and the next command dials again. Dial failures
//     and drops are backends.ErrTransient: the runner's retries apply.
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
	"net"
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
	return o
}

// Client is one SSH connection to a login node, dialled on first use and
// again after a drop. It is safe for concurrent use.
type Client struct {
	target Target
	creds  backends.Credentials
	log    *slog.Logger
	opts   Options
	keys   hostKeys

	mu     sync.Mutex
	conn   *ssh.Client
	sftp   *sftp.Client
	closed bool
	dials  int // connections made, for tests and logs
}

// New returns a client for target; it connects on first use.
func New(target Target, creds backends.Credentials, log *slog.Logger, opts Options) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{target: target, creds: creds, log: log, opts: opts.withDefaults(), keys: hostKeys{target: target}}
}

// Target is where the client logs in.
func (c *Client) Target() Target { return c.target }

// Dials is the number of connections made so far.
func (c *Client) Dials() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dials
}

// Close closes the connection; the client is not usable afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return c.dropLocked(c.conn)
}

// connect returns the open connection, dialling one if there is none.
func (c *Client) connect(ctx context.Context) (*ssh.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("ssh: client closed")
	}
	if c.conn != nil {
		return c.conn, nil
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	c.dials++
	go c.watch(conn)
	return conn, nil
}

// dial makes one connection: TCP, handshake with host key check, and
// authentication.
func (c *Client) dial(ctx context.Context) (*ssh.Client, error) {
	user := c.target.User
	if user == "" {
		user = optional(c.creds, userNames...)
	}
	if user == "" {
		return nil, backends.Invalid("resourceURL", "names no user; use ssh://USER@%s or add username to the credentials", c.target.Addr())
	}
	s, err := signer(c.creds)
	if err != nil {
		return nil, err
	}
	check, algos, err := c.keys.callback(c.creds)
	if err != nil {
		return nil, err
	}
	var hostKeyErr error
	cfg := &ssh.ClientConfig{
		User: user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(s)},
		HostKeyCallback: func(host string, remote net.Addr, key ssh.PublicKey) error {
			hostKeyErr = check(host, remote, key)
			return hostKeyErr
		},
		HostKeyAlgorithms: algos,
		Timeout:           c.opts.DialTimeout,
		ClientVersion:     "SSH-2.0-bridge-runner",
	}
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(dctx, "tcp", c.target.Addr())
	if err != nil {
		return nil, backends.Transient(fmt.Errorf("ssh: connecting to %s: %w", c.target.Addr(), err))
	}
	deadline, _ := dctx.Deadline()
	_ = raw.SetDeadline(deadline)
	sc, chans, reqs, err := ssh.NewClientConn(raw, c.target.Addr(), cfg)
	if err != nil {
		raw.Close()
		return nil, c.handshakeError(user, hostKeyErr, err)
	}
	_ = raw.SetDeadline(time.Time{})
	c.log.Debug("ssh connected", "addr", c.target.Addr(), "user", user, "server", string(sc.ServerVersion()))
	return ssh.NewClient(sc, chans, reqs), nil
}

// handshakeError classifies a failed handshake: a refused host key is
// invalid configuration, a refused key is ErrAuth, the rest transient.
func (c *Client) handshakeError(user string, hostKeyErr, err error) error {
	switch {
	case hostKeyErr != nil:
		return hostKeyErr
	case isAuthFailure(err):
		return fmt.Errorf("%w: %s@%s refused the key in ssh-privatekey%s (%v); check that its public key is in the user's authorized_keys on the login node",
			backends.ErrAuth, user, c.target.Addr(), certNote(c.creds), err)
	}
	return backends.Transient(fmt.Errorf("ssh: handshake with %s: %w", c.target.Addr(), err))
}

func certNote(creds backends.Credentials) string {
	if optional(creds, certNames...) != "" {
		return " and its ssh-certificate"
	}
	return ""
}

// isAuthFailure: x/crypto reports a refused key only in words.
func isAuthFailure(err error) bool {
	return err != nil && containsAny(err.Error(), "unable to authenticate", "no supported methods remain")
}

// watch sends keepalives on conn and drops it when it dies or stops
// answering, so that the next command dials again instead of hanging.
func (c *Client) watch(conn *ssh.Client) {
	done := make(chan struct{})
	go func() {
		_ = conn.Wait()
		close(done)
	}()
	t := time.NewTicker(c.opts.KeepAlive)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-done:
			c.drop(conn, "connection closed")
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			_, _, err := conn.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case err := <-reply:
			if err != nil {
				c.drop(conn, "keepalive failed: "+err.Error())
				return
			}
			missed = 0
		case <-time.After(c.opts.KeepAlive):
			if missed++; missed >= c.opts.KeepAliveMax {
				c.drop(conn, fmt.Sprintf("%d keepalives unanswered", missed))
				return
			}
		case <-done:
			c.drop(conn, "connection closed")
			return
		}
	}
}

// drop closes conn if it is still the current connection.
func (c *Client) drop(conn *ssh.Client, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == conn && conn != nil {
		c.log.Info("ssh connection dropped; the next command reconnects", "addr", c.target.Addr(), "why", why)
		_ = c.dropLocked(conn)
	}
}

func (c *Client) dropLocked(conn *ssh.Client) error {
	if conn == nil || c.conn != conn {
		return nil
	}
	if c.sftp != nil {
		_ = c.sftp.Close()
		c.sftp = nil
	}
	c.conn = nil
	return conn.Close()
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
func (c *Client) Run(ctx context.Context, cmd Cmd) (Result, error) {
	line, err := Join(cmd.Args...)
	if err != nil {
		return Result{}, err
	}
	timeout := cmd.Timeout
	if timeout <= 0 {
		timeout = c.opts.CommandTimeout
	}
	sess, conn, err := c.session(ctx)
	if err != nil {
		return Result{}, err
	}
	defer sess.Close()
	var stdout, stderr capture
	sess.Stdin = cmd.Stdin
	sess.Stdout = cmd.Stdout
	if cmd.Stdout == nil {
		sess.Stdout = &stdout
	}
	sess.Stderr = &stderr
	if err := sess.Start(line); err != nil {
		c.drop(conn, "starting a command failed")
		return Result{}, backends.Transient(fmt.Errorf("ssh: starting %s on %s: %w", cmd.Args[0], c.target.Addr(), err))
	}
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err = <-waited:
	case <-t.C:
		c.abandon(sess, conn, waited)
		return Result{}, backends.Transient(fmt.Errorf("ssh: %s on %s did not finish within %s", cmd.Args[0], c.target.Addr(), timeout))
	case <-ctx.Done():
		c.abandon(sess, conn, waited)
		return Result{}, ctx.Err()
	}
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exit *ssh.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitStatus() // 128+n for signal n
	default: // ExitMissingError or a broken connection: the outcome is unknown
		c.drop(conn, "a command lost its connection")
		return res, backends.Transient(fmt.Errorf("ssh: %s on %s: connection lost before the command ended: %w", cmd.Args[0], c.target.Addr(), err))
	}
	return res, nil
}

// abandon stops waiting for a command: it asks the server to kill it and
// closes its session. If the session does not end soon, the connection
// itself is taken for stuck and dropped.
func (c *Client) abandon(sess *ssh.Session, conn *ssh.Client, waited <-chan error) {
	_ = sess.Signal(ssh.SIGKILL)
	_ = sess.Close()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		c.drop(conn, "a timed-out command's session did not close")
	}
}

// session opens a session, dialling first if needed. If the connection
// turns out to be dead, which is found before anything ran, it dials once
// more.
func (c *Client) session(ctx context.Context) (*ssh.Session, *ssh.Client, error) {
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		conn, err := c.connect(ctx)
		if err != nil {
			return nil, nil, err
		}
		sess, err := conn.NewSession()
		if err == nil {
			return sess, conn, nil
		}
		last = err
		c.drop(conn, "opening a session failed: "+err.Error())
	}
	return nil, nil, backends.Transient(fmt.Errorf("ssh: opening a session on %s: %w", c.target.Addr(), last))
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
	return New(t, cfg.Credentials, log, Options{}), log, nil
}
