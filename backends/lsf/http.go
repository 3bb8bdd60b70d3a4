package lsf

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// request is one call to Application Center. body is a factory so the call
// can be sent again after a new logon.
type request struct {
	method, path string
	query        url.Values
	contentType  string
	accept       string
	body         func() (io.Reader, error)
}

func (r request) String() string { return r.method + " " + r.path }

// statusError is a non-2xx answer.
type statusError struct {
	req        string
	status     int
	msg        string
	retryAfter string        // as the server wrote it
	wait       time.Duration // retryAfter read (httpx.RetryAfter)
}

func (e *statusError) Error() string {
	s := e.req + ": " + httpx.Failure(e.status, "Application Center", e.msg, "")
	if e.retryAfter != "" {
		s += " (Retry-After: " + e.retryAfter + ")"
	}
	return s
}

func asStatus(err error) *statusError {
	var se *statusError
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// roundTrip sends r once with the given cookie.
func (b *Backend) roundTrip(ctx context.Context, r request, cookie string) (*http.Response, error) {
	u := b.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	req := httpx.Request{Method: r.method, URL: u, Body: r.body, Timeout: b.requestTimeout, Header: http.Header{"Accept": {r.accept}},
		Server: "Application Center"}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if cookie != "" {
		req.Header.Set("Cookie", "platform_token="+cookie)
	}
	return httpx.Open(ctx, b.client, req)
}

// readError reads a non-2xx answer into a statusError.
func readError(r request, resp *http.Response) *statusError {
	buf := httpx.ReadError(resp)
	return &statusError{req: r.String(), status: resp.StatusCode, msg: errorMessage(buf), retryAfter: resp.Header.Get("Retry-After"),
		wait: httpx.RetryAfter(resp.Header, time.Now())}
}

// refused reports whether an answer means the session token was refused.
func refused(se *statusError) bool {
	if se.status == http.StatusUnauthorized || se.status == http.StatusForbidden {
		return true
	}
	m := strings.ToLower(se.msg)
	// A 5xx is the server's trouble, whatever its message says.
	return se.status >= 400 && se.status < 500 && se.status != http.StatusTooManyRequests &&
		(strings.Contains(m, "token") || strings.Contains(m, "logon") || strings.Contains(m, "log on") ||
			strings.Contains(m, "login") || strings.Contains(m, "not logged"))
}

// open sends r with the session token. A refusal drops the token, logs on
// again and sends r once more; a second refusal is ErrAuth. A 2xx answer is
// returned open; any other status is a *statusError.
func (b *Backend) open(ctx context.Context, r request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		tok, err := b.session(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := b.roundTrip(ctx, r, tok)
		if err != nil {
			return nil, err
		}
		var se *statusError
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			// A login page instead of data: the session is gone.
			if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/html" {
				return resp, nil
			}
			resp.Body.Close()
			se = &statusError{req: r.String(), status: resp.StatusCode, msg: "an HTML page (a login page?) instead of data"}
		default:
			se = readError(r, resp)
			if !refused(se) {
				return nil, se
			}
		}
		b.dropSession(tok)
		if attempt == 2 {
			return nil, httpx.AuthError(r.String(), se.status, "Application Center refused a fresh logon token (may the user use web services? RBAC)", "username", "password")
		}
		b.log.Debug("Application Center refused the session token; logging on again", "request", r.String(), "status", se.status)
	}
}

// do is open followed by reading the whole answer.
func (b *Backend) do(ctx context.Context, r request) ([]byte, error) {
	resp, err := b.open(ctx, r)
	if err != nil {
		return nil, err
	}
	return httpx.ReadAll(ctx, r.String(), resp, httpx.MaxBody)
}

// transientOr classifies a status error: 429, 5xx (and 409 at logon) are
// transient; everything else stays as it is.
func transientOr(err error) error {
	se := asStatus(err)
	if se == nil {
		return err
	}
	if se.status == http.StatusTooManyRequests || se.status >= 500 || se.status == http.StatusRequestTimeout {
		return httpx.WithRetryAfter(backends.Transient(err), se.wait)
	}
	return err
}

// session returns the session token (as sent in the cookie), logging on
// when there is none or it is about to expire.
func (b *Backend) session(ctx context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.token != "" && b.now().Before(b.tokenRenew) {
		return b.token, nil
	}
	tok, renew, err := b.logon(ctx)
	if err != nil {
		return "", err
	}
	b.token, b.tokenRenew = tok, renew
	return tok, nil
}

func (b *Backend) dropSession(tok string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.token == tok {
		b.token = ""
	}
}

type logonUser struct {
	XMLName xml.Name `xml:"User"`
	Name    string   `xml:"name"`
	Pass    string   `xml:"pass"`
}

// tokenLifetime is used when the token's embedded time is not an expiry.
const tokenLifetime = 55 * time.Minute

// logon gets a new token: POST ws/logon with <User><name/><pass/></User>.
func (b *Backend) logon(ctx context.Context) (cookie string, renew time.Time, err error) {
	user, pass, err := b.credentials()
	if err != nil {
		return "", time.Time{}, err
	}
	body, err := xml.Marshal(logonUser{Name: user, Pass: pass})
	if err != nil {
		return "", time.Time{}, err
	}
	r := request{method: http.MethodPost, path: "/ws/logon", contentType: "application/xml", accept: "application/json",
		body: func() (io.Reader, error) { return bytes.NewReader(body), nil }}
	resp, err := b.roundTrip(ctx, r, "")
	if err != nil {
		return "", time.Time{}, err
	}
	if resp.StatusCode != http.StatusOK {
		se := readError(r, resp)
		switch se.status {
		case http.StatusBadRequest:
			return "", time.Time{}, backends.Invalid("credentials", "Application Center refused the logon of user %q: %s", user, orText(httpx.Reason(se.msg), "bad request (an empty user name?)"))
		case http.StatusUnauthorized, http.StatusForbidden:
			// Never the server's words: an echo of the logon would carry
			// the password (see httpx.AuthError).
			return "", time.Time{}, httpx.AuthError(r.String(), se.status,
				fmt.Sprintf("Application Center refused the logon of user %q (is the user allowed to use web services?)", user), "username", "password")
		case http.StatusConflict:
			return "", time.Time{}, backends.Transient(fmt.Errorf("%v (the user is already logged on; retrying)", se))
		}
		return "", time.Time{}, transientOr(se)
	}
	buf, err := httpx.ReadAll(ctx, r.String(), resp, httpx.MaxErrorBody)
	if err != nil {
		return "", time.Time{}, err
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%s: cannot read the logon answer: %w", r, err)
	}
	raw := str(get(doc, "token"))
	if raw == "" {
		if u := firstMap(get(doc, "User", "user")); u != nil {
			raw = str(get(u, "token"))
		}
	}
	if raw == "" {
		return "", time.Time{}, fmt.Errorf("%s: HTTP 200 without a token: %s", r, orText(httpx.Reason(errorMessage(buf)), httpx.NotShown))
	}
	now := b.now()
	renew = now.Add(tokenLifetime)
	if exp, ok := tokenTime(raw); ok && exp.After(now) {
		renew = exp.Add(-min(time.Minute, exp.Sub(now)/2))
	}
	sent := strings.ReplaceAll(raw, `"`, "#quote#")
	backends.AddSecret(b.secrets, raw)
	backends.AddSecret(b.secrets, sent)
	b.log.Debug("logged on to Application Center", "user", user, "renew_at", renew.UTC().Format(time.RFC3339))
	return sent, renew, nil
}

// tokenTime reads the time between the token's first two quotes.
func tokenTime(raw string) (time.Time, bool) {
	parts := strings.SplitN(raw, `"`, 3)
	if len(parts) < 3 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, parts[1])
	return t, err == nil
}

func (b *Backend) credentials() (user, pass string, err error) {
	if b.creds == nil {
		return "", "", backends.Invalid("credentials", "the lsf backend needs a Secret with username and password (an Application Center account)")
	}
	user, err = b.creds.Get("username", "user")
	if err != nil {
		return "", "", err
	}
	pass, err = b.creds.Get("password", "pass")
	if err != nil {
		return "", "", err
	}
	if user == "" || pass == "" {
		return "", "", backends.Invalid("credentials", "username and password must not be empty")
	}
	return user, pass, nil
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// parseInt reads an integer from a JSON number or a string.
func parseInt(v any) (int, bool) {
	s := str(v)
	if s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int(f)) {
			return 0, false
		}
		n = int(f)
	}
	return n, true
}
