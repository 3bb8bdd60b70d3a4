package sshexec

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/bridge-runner/bridge-runner/backends"
)

// agentPath is the SSH agent's socket: the URL's agent= first, then
// SSH_AUTH_SOCK (read when the client was made); "" for none. err says why
// the socket named cannot be used (absent, not a socket): for the URL's,
// which the user asked for, that is fatal; SSH_AUTH_SOCK's is passed over,
// as ssh passes over a stale one, while the Secret has a key to use.
func (c *Client) agentPath() (path string, fromURL bool, err error) {
	path, field := c.target.Agent, "resourceURL"
	if path == "" {
		path, field = c.envAgent, "SSH_AUTH_SOCK"
	}
	if path == "" {
		return "", false, nil
	}
	fi, serr := os.Stat(path)
	switch {
	case serr != nil:
		err = backends.Invalid(field, "the SSH agent socket %s cannot be used (%v); mount the agent's socket there (it must live as long as the run) or correct the path", path, unwrapPathError(serr))
	case fi.Mode()&os.ModeSocket == 0:
		err = backends.Invalid(field, "%s is not a socket; give the SSH agent's socket (what ssh-agent prints as SSH_AUTH_SOCK)", path)
	}
	return path, field == "resourceURL", err
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// agentConn is one connection to the SSH agent for one dial: its keys
// sign during authentication, so it stays open until every hop has logged
// in, and is closed then (no agent forwarding: nothing on the login node
// can use it). err, if set, is why the agent cannot be used this time.
type agentConn struct {
	conn    net.Conn
	signers []ssh.Signer
	err     error
}

// openAgent connects to the agent, if one is named, and lists its keys.
// Only a bad agent= in the URL is an error here; an agent that cannot be
// used otherwise matters only to a hop with no key in the Secret.
func (c *Client) openAgent() (*agentConn, error) {
	path, fromURL, err := c.agentPath()
	switch {
	case path == "":
		return nil, nil
	case err != nil && fromURL:
		return nil, err
	case err != nil:
		return &agentConn{err: err}, nil
	}
	conn, err := net.DialTimeout("unix", path, c.opts.ReplyTimeout)
	if err != nil {
		return &agentConn{err: backends.Transient(fmt.Errorf("ssh: connecting to the SSH agent at %s: %w", path, unwrapNetError(err)))}, nil
	}
	_ = conn.SetDeadline(time.Now().Add(c.opts.ReplyTimeout))
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		conn.Close()
		return &agentConn{err: backends.Transient(fmt.Errorf("ssh: listing the keys of the SSH agent at %s: %w", path, err))}, nil
	}
	// Signing happens during the handshakes, bounded by DialTimeout each.
	_ = conn.SetDeadline(time.Time{})
	return &agentConn{conn: conn, signers: signers}, nil
}

// usable: the agent answered and its keys can be offered.
func (a *agentConn) usable() bool { return a != nil && a.err == nil }

func (a *agentConn) keys() []ssh.Signer {
	if !a.usable() {
		return nil
	}
	return a.signers
}

func (a *agentConn) Close() {
	if a != nil && a.conn != nil {
		a.conn.Close()
	}
}

// noKey explains a hop without a key in the Secret (keyErr) when an agent
// was named but cannot be used (agentErr): the agent's trouble is the news.
func noKey(keyErr, agentErr error, prefix string) error {
	if agentErr == nil {
		return keyErr
	}
	return fmt.Errorf("%w (and the Secret has no %sssh-privatekey to use instead)", agentErr, prefix)
}

func unwrapNetError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}
