package sshexec

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Target is where to log in, read from a resourceURL of the form
// ssh://user@host[:port][/directory][?option=value&...] with the options
// hostkey=trust-first-use, proxyjump=HOP[,HOP...] and agent=PATH.
type Target struct {
	User string // may be empty: then the credentials' username is used
	Host string // host name or address, without brackets
	Port int
	// Dir is the URL's path: a directory on the login node for the
	// backend's files, relative to the user's home ("" for the home
	// itself); ssh://host//abs/dir gives the absolute /abs/dir.
	Dir string
	// TrustFirstUse accepts the host key the server shows on the first
	// connection (and only that key afterwards) when known_hosts does not
	// know the host. Only on the user's explicit request: it is open to a
	// man in the middle on that first connection.
	TrustFirstUse bool
	// Jump are the jump hosts (OpenSSH's ProxyJump), in the order the
	// connection passes them: the first is dialled from here, each next
	// one through the one before, the login node through the last.
	Jump []Hop
	// Agent is the socket of an SSH agent whose keys are offered after
	// the credentials' key ("" means SSH_AUTH_SOCK's, if set).
	Agent string
}

// Hop is one jump host: [user@]host[:port].
type Hop struct {
	User string // "" means jumpN-username from the credentials, else the login node's user
	Host string
	Port int
}

// Addr is host:port.
func (h Hop) Addr() string { return net.JoinHostPort(h.Host, strconv.Itoa(h.Port)) }

// maxJumps bounds the route; sites use one or two.
const maxJumps = 8

// IsSSH reports whether resourceURL asks for the SSH transport.
func IsSSH(resourceURL string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(resourceURL)), "ssh://")
}

// ParseURL reads an ssh:// resourceURL. Errors name resourceURL and say how
// to fix it.
func ParseURL(raw string) (Target, error) {
	const form = "use ssh://USER@HOST[:PORT][/DIRECTORY][?proxyjump=USER@JUMPHOST[:PORT]]"
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return Target{}, backends.Invalid("resourceURL", "%q is not a URL (%v); %s", raw, err, form)
	}
	if !strings.EqualFold(u.Scheme, "ssh") {
		return Target{}, backends.Invalid("resourceURL", "scheme %q is not ssh; %s", u.Scheme, form)
	}
	if u.Hostname() == "" {
		return Target{}, backends.Invalid("resourceURL", "%q names no host; %s", raw, form)
	}
	t := Target{Host: u.Hostname(), Port: 22, Dir: strings.TrimPrefix(u.Path, "/")}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return Target{}, backends.Invalid("resourceURL", "holds a password; put no secret in the URL: log in with a key from the credentials (ssh-privatekey)")
		}
		t.User = u.User.Username()
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Target{}, backends.Invalid("resourceURL", "port %q is not a number from 1 to 65535", p)
		}
		t.Port = n
	}
	for k, v := range u.Query() {
		if err := t.option(k, v); err != nil {
			return Target{}, err
		}
	}
	return t, nil
}

// Addr is host:port.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// option applies one ?key=value of the URL.
func (t *Target) option(k string, v []string) error {
	const options = "the options are hostkey=trust-first-use, proxyjump=USER@HOST[:PORT][,USER@HOST[:PORT]...] and agent=SOCKET-PATH"
	if len(v) != 1 {
		return backends.Invalid("resourceURL", "option %s is given %d times; give it once (%s)", k, len(v), options)
	}
	switch {
	case k == "hostkey" && v[0] == "trust-first-use":
		t.TrustFirstUse = true
	case k == "proxyjump":
		hops, err := parseJumps(v[0])
		if err != nil {
			return err
		}
		t.Jump = hops
	case k == "agent" && strings.HasPrefix(v[0], "/"):
		t.Agent = v[0]
	case k == "agent":
		return backends.Invalid("resourceURL", "agent=%q is not an absolute path; give the agent's socket, e.g. agent=/run/ssh-agent/socket", v[0])
	default:
		return backends.Invalid("resourceURL", "unknown option %s=%s; %s (prefer a known_hosts file in the credentials to trust-first-use)", k, v[0], options)
	}
	return nil
}

// parseJumps reads proxyjump's comma-separated [user@]host[:port] list,
// as OpenSSH's -J takes it.
func parseJumps(list string) ([]Hop, error) {
	const form = "give proxyjump=USER@HOST[:PORT][,USER@HOST[:PORT]...], the first hop first, as ssh -J takes it"
	parts := strings.Split(list, ",")
	if len(parts) > maxJumps {
		return nil, backends.Invalid("resourceURL", "proxyjump lists %d jump hosts; at most %d are supported", len(parts), maxJumps)
	}
	hops := make([]Hop, 0, len(parts))
	for i, p := range parts {
		h := Hop{Port: 22}
		hostport := strings.TrimSpace(p)
		u, rest, hasUser := strings.Cut(hostport, "@")
		if hasUser {
			h.User, hostport = u, rest
		}
		if strings.Contains(h.User, ":") {
			return nil, backends.Invalid("resourceURL", "proxyjump hop %d holds a password; put no secret in the URL: log in with a key from the credentials (ssh-privatekey or jump%d-ssh-privatekey)", i+1, i+1)
		}
		h.Host = hostport
		if host, port, err := net.SplitHostPort(hostport); err == nil {
			n, err := strconv.Atoi(port)
			if err != nil || n < 1 || n > 65535 {
				return nil, backends.Invalid("resourceURL", "proxyjump hop %d: port %q is not a number from 1 to 65535", i+1, port)
			}
			h.Host, h.Port = host, n
		}
		if h.Host == "" || strings.ContainsAny(h.Host, "@/[]?#% \t") || (hasUser && h.User == "") {
			return nil, backends.Invalid("resourceURL", "proxyjump hop %d (%q) is not [USER@]HOST[:PORT] (an IPv6 address goes in brackets with its port, [::1]:22); %s", i+1, p, form)
		}
		hops = append(hops, h)
	}
	return hops, nil
}
