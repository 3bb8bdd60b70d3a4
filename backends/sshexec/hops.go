package sshexec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/bridge-runner/bridge-runner/backends"
)

// dial makes one connection to the login node: through each jump host in
// turn (OpenSSH's ProxyJump: a TCP connection forwarded by the hop before,
// then a handshake of its own, with its own host key check and login), and
// returns the login node's client. The jump hosts' connections live as
// long as it does.
func (c *Client) dial(ctx context.Context) (*ssh.Client, error) {
	ag, err := c.openAgent()
	if err != nil {
		return nil, err
	}
	defer ag.Close()
	var via *ssh.Client
	var jumps []*ssh.Client
	var prev *hop
	for _, h := range c.route() {
		conn, err := c.dialHop(ctx, via, prev, h, ag)
		if err != nil {
			closeJumps(jumps)
			return nil, err
		}
		if h.n > 0 {
			jumps = append(jumps, conn)
		}
		via, prev = conn, h
	}
	if len(jumps) > 0 {
		// Closing the login node's connection (a drop, Close) closes the
		// hops, and a hop that dies ends the forwarded connection, which
		// the login node's watcher sees.
		go func() {
			_ = via.Wait()
			closeJumps(jumps)
		}()
	}
	return via, nil
}

func closeJumps(jumps []*ssh.Client) {
	for i := len(jumps) - 1; i >= 0; i-- {
		_ = jumps[i].Close()
	}
}

// login is one hop's handshake as it went: what the host key check and
// the server's list of methods said.
type login struct {
	hostKeyErr error
	refusal    error    // the server wants what no unattended run can give
	allowed    []string // the methods the server last offered
}

// dialHop connects to h (through via, the connection to the hop prev, or
// directly for the first hop) and logs in, within DialTimeout; ctx ends it
// early (SIGTERM).
func (c *Client) dialHop(ctx context.Context, via *ssh.Client, prev, h *hop, ag *agentConn) (*ssh.Client, error) {
	cfg, lg, err := c.hopConfig(h, ag)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	raw, err := dialVia(dctx, via, h.addr())
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, connectError(prev, h, err)
	}
	if deadline, ok := dctx.Deadline(); ok {
		_ = raw.SetDeadline(deadline) // a forwarded connection has none; the AfterFunc bounds it
	}
	stop := context.AfterFunc(dctx, func() { raw.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(raw, h.addr(), cfg)
	if !stop() || err != nil {
		raw.Close()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case dctx.Err() != nil && lg.hostKeyErr == nil && lg.refusal == nil:
			return nil, backends.Transient(fmt.Errorf("ssh: handshake with %s: no answer for %s", h.name(), c.opts.DialTimeout))
		}
		return nil, c.handshakeError(h, cfg.User, ag, lg, err)
	}
	_ = raw.SetDeadline(time.Time{})
	c.log.Debug("ssh connected", "addr", h.addr(), "hop", h.n, "user", cfg.User, "server", string(sc.ServerVersion()))
	return ssh.NewClient(sc, chans, reqs), nil
}

// hopConfig is the client configuration for h: its user, its keys (its
// own jumpN- key or the login node's, then the agent's), its host key
// check, and a watch on the methods the server offers.
func (c *Client) hopConfig(h *hop, ag *agentConn) (*ssh.ClientConfig, *login, error) {
	user, err := c.userFor(h)
	if err != nil {
		return nil, nil, err
	}
	prefix := keyPrefix(c.creds, h.n)
	s, err := signer(c.creds, prefix, ag.usable())
	if err != nil {
		if _, kerr := c.creds.Get(prefixed(prefix, keyNames)...); kerr != nil && ag != nil {
			return nil, nil, noKey(err, ag.err, prefix)
		}
		return nil, nil, err
	}
	signers := ag.keys()
	if s != nil {
		signers = append([]ssh.Signer{s}, signers...)
	}
	if len(signers) == 0 {
		return nil, nil, fmt.Errorf("%w: the SSH agent holds no key and the Secret has no %sssh-privatekey, so nothing can log in to %s; add a key to the agent (ssh-add) or to the Secret",
			backends.ErrAuth, prefix, h.name())
	}
	check, algos, err := h.callback(c.creds)
	if err != nil {
		return nil, nil, err
	}
	lg := &login{}
	cfg := &ssh.ClientConfig{
		User: user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signers...)},
		HostKeyCallback: func(host string, remote net.Addr, key ssh.PublicKey) error {
			lg.hostKeyErr = check(host, remote, key)
			return lg.hostKeyErr
		},
		AuthCallback: func(a *ssh.ClientAuthContext) (ssh.AuthMethod, error) {
			lg.allowed = a.AllowedMethods
			lg.refusal = interactiveOnly(h, a)
			return nil, lg.refusal
		},
		HostKeyAlgorithms: algos,
		Timeout:           c.opts.DialTimeout,
		ClientVersion:     "SSH-2.0-bridge-runner",
	}
	return cfg, lg, nil
}

// interactiveOnly is the refusal of a server that wants, instead of a key
// or after it, a method that asks a person (a one-time code, a password):
// an unattended run cannot answer, and retrying will not change that, so
// it is exit 2 naming what works unattended. nil lets the login go on.
func interactiveOnly(h *hop, a *ssh.ClientAuthContext) error {
	keyOK := slices.Contains(a.PartialSuccessMethods, "publickey")
	if slices.Contains(a.AllowedMethods, "publickey") && !keyOK {
		return nil
	}
	if !slices.Contains(a.AllowedMethods, "keyboard-interactive") && !slices.Contains(a.AllowedMethods, "password") {
		return nil
	}
	const what = "bridge-runner logs in unattended and cannot answer prompts: use a credential the site accepts without a second factor, an SSH certificate (e.g. one its MFA portal issues, as ssh-certificate beside its key) or a long-lived SSH agent that holds one (agent= in resourceURL, or SSH_AUTH_SOCK)"
	if keyOK {
		return backends.Invalid("credentials", "%s accepted the key but then asks for %s (a second factor, MFA); %s", h.name(), strings.Join(a.AllowedMethods, " or "), what)
	}
	return backends.Invalid("credentials", "%s accepts no SSH key, only %s (a password or one-time code typed by a person); %s", h.name(), strings.Join(a.AllowedMethods, " or "), what)
}

// userFor is the user to log in to h as: the one the URL or proxyjump
// names, else the credentials' (jumpN-username for jump host N), else,
// for a jump host, the login node's.
func (c *Client) userFor(h *hop) (string, error) {
	if h.user != "" {
		return h.user, nil
	}
	if h.n > 0 {
		if u := optionalValue(c.creds, prefixed(jumpPrefix(h.n), userNames)...); u != "" {
			return u, nil
		}
		return c.userFor(c.hops[len(c.hops)-1])
	}
	if u := optionalValue(c.creds, userNames...); u != "" {
		return u, nil
	}
	return "", backends.Invalid("resourceURL", "names no user; use ssh://USER@%s or add username to the credentials", h.addr())
}

// dialVia opens a TCP connection to addr: directly for the first hop, else
// forwarded by the hop before (a direct-tcpip channel), ended by ctx.
func dialVia(ctx context.Context, via *ssh.Client, addr string) (net.Conn, error) {
	if via == nil {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		conn, err := via.Dial("tcp", addr)
		done <- result{conn, err}
	}()
	select {
	case r := <-done:
		return r.conn, r.err
	case <-ctx.Done():
		// Dial has no context: closing the hop ends it (the hop is of
		// no use to a dial that was given up anyway).
		_ = via.Close()
		if r := <-done; r.conn != nil {
			r.conn.Close()
		}
		return nil, ctx.Err()
	}
}

// connectError classifies a failed connection to h, made through the
// jump host prev (nil: directly). A jump host that refuses to forward (its
// sshd forbids it) is configuration, exit 2; one that cannot reach the
// next host, or no route to the first, is transient. Only the RFC 4254
// reason code is used, not the server's text.
func connectError(prev, h *hop, err error) error {
	var oc *ssh.OpenChannelError
	switch {
	case prev == nil:
		return backends.Transient(fmt.Errorf("ssh: connecting to %s: %w", h.name(), quiet(err)))
	case errors.As(err, &oc) && oc.Reason == ssh.Prohibited:
		return backends.Invalid("resourceURL", "%s may not forward connections to %s (administratively prohibited: its sshd has AllowTcpForwarding no, or a PermitOpen that leaves it out); ask the site which jump host leads to it", prev.name(), h.name())
	case errors.As(err, &oc):
		return backends.Transient(fmt.Errorf("ssh: %s could not connect to %s (%s)", prev.name(), h.name(), rejection(oc.Reason)))
	}
	return backends.Transient(fmt.Errorf("ssh: connecting to %s through %s: %w", h.name(), prev.name(), quiet(err)))
}

// handshakeError classifies a failed handshake: a refused host key or an
// interactive-only server is invalid configuration, a refused key is
// ErrAuth, the rest transient.
func (c *Client) handshakeError(h *hop, user string, ag *agentConn, lg *login, err error) error {
	switch {
	case lg.hostKeyErr != nil:
		return lg.hostKeyErr
	case lg.refusal != nil:
		return lg.refusal
	case isAuthFailure(err) && !slices.Contains(lg.allowed, "publickey") && len(lg.allowed) > 0:
		return backends.Invalid("credentials", "%s accepts no SSH key for %s (it offers only %s); ask the site for key or certificate logins", h.name(), user, knownMethods(lg.allowed))
	case isAuthFailure(err):
		where := "the login node"
		if h.n > 0 {
			where = h.name()
		}
		return fmt.Errorf("%w: %s@%s refused %s (%v); check that its public key is in the user's authorized_keys on %s",
			backends.ErrAuth, user, h.addr(), c.offered(h, ag), quiet(err), where)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return backends.Transient(fmt.Errorf("ssh: handshake with %s: no answer for %s", h.name(), c.opts.DialTimeout))
	}
	return backends.Transient(fmt.Errorf("ssh: handshake with %s: %w", h.name(), quiet(err)))
}

// offered says which keys were offered to h, for a refusal.
func (c *Client) offered(h *hop, ag *agentConn) string {
	prefix := keyPrefix(c.creds, h.n)
	var parts []string
	if _, err := c.creds.Get(prefixed(prefix, keyNames)...); err == nil {
		k := "the key in " + prefix + "ssh-privatekey"
		if optionalValue(c.creds, prefixed(prefix, certNames)...) != "" {
			k += " and its " + prefix + "ssh-certificate"
		}
		parts = append(parts, k)
	}
	if n := len(ag.keys()); n > 0 {
		parts = append(parts, fmt.Sprintf("the %d key(s) of the SSH agent", n))
	}
	return strings.Join(parts, " and ")
}
