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
// SSH_AUTH_SOCK (read when the client was made), "" for none. A socket
// that is named but absent is an error naming where it was named: a
// mount that is missing will not appear by retrying.
func (c *Client) agentPath() (string, error) {
	path, field := c.target.Agent, "resourceURL"
	if path == "" {
		path, field = c.envAgent, "SSH_AUTH_SOCK"
	}
	if path == "" {
		return "", nil
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return "", backends.Invalid(field, "the SSH agent socket %s cannot be used (%v); mount the agent's socket there (it must live as long as the run) or correct the path", path, unwrapPathError(err))
	case fi.Mode()&os.ModeSocket == 0:
		return "", backends.Invalid(field, "%s is not a socket; give the SSH agent's socket (what ssh-agent prints as SSH_AUTH_SOCK)", path)
	}
	return path, nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// agentConn is one connection to the SSH agent for one dial: its keys
// sign during authentication, so it stays open until every hop has
// logged in, and is closed then (no agent forwarding: nothing on the
// login node can use it).
type agentConn struct {
	conn    net.Conn
	signers []ssh.Signer
}

// openAgent connects to the agent, if there is one, and lists its keys.
// An agent that does not answer is transient (a sidecar restarting).
func (c *Client) openAgent() (*agentConn, error) {
	path, err := c.agentPath()
	if err != nil || path == "" {
		return nil, err
	}
	conn, err := net.DialTimeout("unix", path, c.opts.ReplyTimeout)
	if err != nil {
		return nil, backends.Transient(fmt.Errorf("ssh: connecting to the SSH agent at %s: %w", path, unwrapNetError(err)))
	}
	_ = conn.SetDeadline(time.Now().Add(c.opts.ReplyTimeout))
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		conn.Close()
		return nil, backends.Transient(fmt.Errorf("ssh: listing the keys of the SSH agent at %s: %w", path, err))
	}
	// Signing happens during the handshakes, bounded by DialTimeout each.
	_ = conn.SetDeadline(time.Time{})
	return &agentConn{conn: conn, signers: signers}, nil
}

func (a *agentConn) keys() []ssh.Signer {
	if a == nil {
		return nil
	}
	return a.signers
}

func (a *agentConn) Close() {
	if a != nil {
		a.conn.Close()
	}
}

func unwrapNetError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}
