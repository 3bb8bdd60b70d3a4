package sshexec

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Target is where to log in, read from a resourceURL of the form
// ssh://user@host[:port][/directory][?hostkey=trust-first-use].
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
}

// IsSSH reports whether resourceURL asks for the SSH transport.
func IsSSH(resourceURL string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(resourceURL)), "ssh://")
}

// ParseURL reads an ssh:// resourceURL. Errors name resourceURL and say how
// to fix it.
func ParseURL(raw string) (Target, error) {
	const form = "use ssh://USER@HOST[:PORT][/DIRECTORY]"
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
		switch {
		case k == "hostkey" && len(v) == 1 && v[0] == "trust-first-use":
			t.TrustFirstUse = true
		default:
			return Target{}, backends.Invalid("resourceURL", "unknown option %s=%s; the only option is hostkey=trust-first-use (prefer a known_hosts file in the credentials)", k, strings.Join(v, ","))
		}
	}
	return t, nil
}

// Addr is host:port.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }
