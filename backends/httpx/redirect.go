package httpx

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// MaxRedirects bounds the redirects one request follows: a slash added or
// a path moved takes one or two; more is a loop or a misconfiguration.
const MaxRedirects = 5

// The redirect policy of every HTTP client the product builds: a redirect
// is followed only within the origin (scheme, host and port) the request was
// made for, at most MaxRedirects times. A credential is given for one
// origin, and Go's client keeps custom headers (X-SLURM-USER-TOKEN,
// Service-CRN, Cookie) on a redirect to another port of the same host,
// keeps Authorization there too, and sends a 307/308's body (a logon
// password, an API key) again to wherever it points. Refusing every other
// origin is the only rule that covers them all; the user fixes it by giving
// the final address.

// CheckRedirect is the policy as an http.Client's CheckRedirect. Open
// applies it to every request it sends, whoever built the client.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	return checkRedirect(via[0].URL, req.URL, len(via))
}

// CheckRedirectURL applies the policy to a redirect from orig (the URL the
// request was made for) to next, the hops-th redirect; for clients that
// follow redirects themselves (a WebSocket dialer). ws and wss count as
// http and https.
func CheckRedirectURL(orig, next *url.URL, hops int) error {
	return checkRedirect(orig, next, hops)
}

func checkRedirect(orig, next *url.URL, hops int) error {
	o, n := origin(orig), origin(next)
	switch {
	case o.scheme == "https" && n.scheme == "http":
		return &redirectRefusal{to: n, why: "from https down to http"}
	case o != n:
		return &redirectRefusal{to: n, why: "to another origin"}
	case hops > MaxRedirects:
		return &redirectRefusal{to: n, why: fmt.Sprintf("more than %d times (a redirect loop?)", MaxRedirects), loop: true}
	}
	return nil
}

type originKey struct{ scheme, host, port string }

func origin(u *url.URL) originKey {
	s := strings.ToLower(u.Scheme)
	switch s {
	case "ws":
		s = "http"
	case "wss":
		s = "https"
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[s]
	}
	return originKey{scheme: s, host: strings.ToLower(u.Hostname()), port: port}
}

// String shows the origin when it looks like one: the address the user
// needs for resourceURL. A host that is not a plausible DNS name or IP
// address is not shown; the server wrote it, and it could carry anything.
func (k originKey) String() string {
	plausible := len(k.host) > 0 && len(k.host) <= 100 && !strings.ContainsFunc(k.host, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == ':')
	})
	if !plausible || (k.scheme != "http" && k.scheme != "https") {
		return "an address not shown"
	}
	return k.scheme + "://" + net.JoinHostPort(k.host, k.port)
}

// redirectRefusal is what CheckRedirect returns; Open turns it into the
// error the user sees.
type redirectRefusal struct {
	to   originKey
	why  string
	loop bool
}

func (e *redirectRefusal) Error() string { return "redirect refused: " + e.why }

// RedirectError words a refused redirect of the request op to server (named
// as the user knows it, "slurmrestd") as an ErrInvalid naming field (the
// URL setting to correct). It is nil when err is no refused redirect.
func RedirectError(err error, server, op, field string) error {
	var rr *redirectRefusal
	if !errors.As(err, &rr) {
		return nil
	}
	if rr.loop {
		return backends.Invalid(field, "%s redirected %s %s (last to %s); refused: set %s to the final address",
			server, op, rr.why, rr.to, field)
	}
	return backends.Invalid(field, "%s redirected %s %s (%s); refused: credentials are never sent to another origin; set %s to the final address",
		server, op, rr.why, rr.to, field)
}

// unfollowed words a 3xx answer that reached the caller: a redirect the
// client could not follow (a streamed body cannot be sent twice, or no
// Location), which is as wrong an address as one refused.
func unfollowed(resp *http.Response, server, op, field string) error {
	to := "no Location"
	if loc, err := resp.Location(); err == nil {
		to = origin(loc).String()
	}
	return backends.Invalid(field, "%s redirected %s with HTTP %d (%s), which was not followed; set %s to the final address",
		server, op, resp.StatusCode, to, field)
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}
