package slurm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// Slurm error numbers this package tells apart (slurm/slurm_errno.h).
const (
	errUnspecified  = -1   // SLURM_ERROR: slurmrestd lost the real errno
	errProtocolAuth = 1007 // SLURM_PROTOCOL_AUTHENTICATION_ERROR
	errInvalidJobID = 2017 // ESLURM_INVALID_JOB_ID
	errAlreadyDone  = 2021 // ESLURM_ALREADY_DONE
	errInvalidArray = 2081 // ESLURM_INVALID_ARRAY: an index ≥ MaxArraySize, or too many tasks
	errZeroBytes    = 5005 // SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT: slurmctld hung up (22.05: refused token)
	errRestAuthFail = 9008 // ESLURM_REST_AUTH_FAIL
	probeJobID      = "67108864"
)

// probeJobID is 1<<26: federation cluster 1, local id 0. Slurm never assigns
// local id 0, so no job can have it; cancelling it is a harmless way to ask
// slurmctld whether it accepts our credentials (see authProbe).

// slurmError is one entry of a response's "errors" (or "warnings") list.
// v0.0.38 uses error_code in some entries and error_number in others.
type slurmError struct {
	Description string `json:"description"`
	ErrorNumber *int   `json:"error_number"`
	ErrorCode   *int   `json:"error_code"`
	Error       string `json:"error"`
	Source      string `json:"source"`
}

func (e slurmError) number() int {
	switch {
	case e.ErrorNumber != nil:
		return *e.ErrorNumber
	case e.ErrorCode != nil:
		return *e.ErrorCode
	}
	return 0
}

func (e slurmError) text() string {
	var parts []string
	for _, s := range []string{e.Description, e.Error} {
		s = strings.TrimSpace(s)
		if s != "" && !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	msg := strings.Join(parts, ": ")
	if n := e.number(); n != 0 {
		msg += fmt.Sprintf(" (error %d)", n)
	}
	return msg
}

// envelope is what every slurmrestd JSON response carries.
type envelope struct {
	Meta     meta         `json:"meta"`
	Errors   []slurmError `json:"errors"`
	Warnings []slurmError `json:"warnings"`
}

// meta: v0.0.38/39 say "Slurm", v0.0.40+ say "slurm"; major/minor are ints
// before v0.0.40 and strings after.
type meta struct {
	SlurmOld *slurmMeta `json:"Slurm"`
	SlurmNew *slurmMeta `json:"slurm"`
}

type slurmMeta struct {
	Release string `json:"release"`
	Version struct {
		Major, Minor, Micro json.RawMessage
	} `json:"version"`
}

// release returns the Slurm release the response came from, or "".
func (m meta) release() string {
	s := m.SlurmNew
	if s == nil {
		s = m.SlurmOld
	}
	if s == nil {
		return ""
	}
	if s.Release != "" {
		return s.Release
	}
	v := func(r json.RawMessage) string { return strings.Trim(string(r), `"`) }
	if len(s.Version.Major) == 0 {
		return ""
	}
	return v(s.Version.Major) + "." + v(s.Version.Minor) + "." + v(s.Version.Micro)
}

// response is a finished HTTP exchange with slurmrestd.
type response struct {
	method, path string
	status       int
	body         []byte
	json         bool // the body is a JSON envelope
	env          envelope
	retryAfter   time.Duration
}

// errorText is what a message may say of a failed answer: the status, the
// reason of its first error (error, which slurmrestd fills from Slurm's
// table of error texts, else description: one field, so that a value split
// over two cannot be joined again), made safe by httpx.Reason,
// and every error number; or one of slurmrestd's own plain-text answers.
// Any other body is not shown (httpx.NotShown).
func (r *response) errorText() string {
	reason := ""
	if len(r.env.Errors) > 0 {
		e := r.env.Errors[0]
		reason = cmp.Or(strings.TrimSpace(e.Error), strings.TrimSpace(e.Description))
	} else if !r.json {
		reason = plainAnswer(r.body)
	}
	return httpx.Failure(r.status, "slurmrestd", reason, "") + r.errorNumbers()
}

// plainAnswers are the text/plain bodies slurmrestd itself writes (400,
// 401, 404, 405, 415).
var plainAnswers = []string{"Unable to parse query.", "Authentication failure",
	"Unable find requested URL. Please view /openapi/v3 for API reference.",
	"Requested REST method is not defined at URL", "Unsupported Media Type"}

// plainAnswer is body when it is one of plainAnswers, else "".
func plainAnswer(body []byte) string {
	s := strings.TrimSpace(string(body))
	for _, a := range plainAnswers {
		if s == a || (strings.HasSuffix(a, "URL") && strings.HasPrefix(s, a) && len(s) < len(a)+200) {
			return a
		}
	}
	return ""
}

// errorNumbers names the Slurm error numbers of the answer, " (error
// 1007, 9008)", or "" when it has none: numbers are safe to repeat, the
// descriptions beside them may quote the request.
func (r *response) errorNumbers() string {
	var ns []string
	for _, e := range r.env.Errors {
		if n := e.number(); n != 0 {
			ns = append(ns, fmt.Sprint(n))
		}
	}
	if len(ns) == 0 {
		return ""
	}
	return " (error " + strings.Join(ns, ", ") + ")"
}

func (r *response) hasError(numbers ...int) bool {
	for _, e := range r.env.Errors {
		for _, n := range numbers {
			if e.number() == n {
				return true
			}
		}
	}
	return false
}

// notFound: 22.05 answers an unknown job with 500 and error 2017, later
// releases with 404 and a JSON body. A text/plain 404 is a path slurmrestd
// does not serve, not a missing job.
func (r *response) notFound() bool {
	return r.hasError(errInvalidJobID) || (r.status == http.StatusNotFound && r.json)
}

func (r *response) String() string {
	return fmt.Sprintf("%s %s: %s; slurmctld's log says more", r.method, r.path, r.errorText())
}

// do sends one request and reads the whole response. Errors are transport
// failures only (wrapped as ErrTransient unless the caller's context ended);
// any HTTP status comes back as a response for the caller to judge.
func (b *Backend) do(ctx context.Context, method, path string, body any) (*response, error) {
	resp, err := b.open(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	return readAnswer(ctx, method, path, resp)
}

// open sends one request and returns the answer with its body still open,
// for an answer too large to hold whole (GET /openapi/v3); the caller reads
// it (readAnswer, or a stream of its own) and closes it.
func (b *Backend) open(ctx context.Context, method, path string, body any) (*http.Response, error) {
	user, token, err := b.credentials()
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // send <, > and & as they are
		if err := enc.Encode(body); err != nil {
			return nil, fmt.Errorf("encoding the request: %w", err)
		}
		rd = &buf
	}
	req := httpx.Request{Method: method, URL: b.base + path, Timeout: b.requestTimeout, Header: http.Header{}, Server: "slurmrestd"}
	if rd != nil {
		req.Body = func() (io.Reader, error) { return rd, nil }
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if err := b.setAuth(req.Header, user, token); err != nil {
		return nil, err
	}
	return httpx.Open(ctx, b.client, req)
}

// readAnswer reads the whole of an answer to method and path (see do).
func readAnswer(ctx context.Context, method, path string, resp *http.Response) (*response, error) {
	buf, err := httpx.ReadAll(ctx, method+" "+path, resp, httpx.MaxBody)
	if err != nil {
		return nil, err
	}
	r := &response{method: method, path: path, status: resp.StatusCode, body: buf, retryAfter: httpx.RetryAfter(resp.Header, time.Now())}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" || (mt == "" && len(buf) > 0 && buf[0] == '{') {
		if json.Unmarshal(buf, &r.env) == nil {
			r.json = true
		}
	}
	return r, nil
}

// classify turns a non-200 response into an error the runner understands.
// onInvalid names the input field a 400/422 is blamed on ("" when the request
// carried no user input, so a 400 is this package's bug or an old server).
func (b *Backend) classify(ctx context.Context, r *response, onInvalid string) error {
	switch {
	case r.authFailed():
		return b.authError(r)
	case r.notFound() && onInvalid == "":
		return fmt.Errorf("%v: %w", r, backends.ErrNotFound)
	case r.busy():
		return httpx.WithRetryAfter(backends.Transient(errors.New(r.String())), r.retryAfter)
	case r.status == http.StatusNotFound && b.forgetRecalled():
		return backends.Transient(errors.New(r.String()))
	case r.status == http.StatusNotFound:
		return backends.Invalid("resourceURL", "slurmrestd at %s does not serve %s (%s); check the URL and the API version it names", b.base, r.path, r.errorText())
	case (r.status == http.StatusBadRequest || r.status == http.StatusUnprocessableEntity) && onInvalid != "":
		return backends.Invalid(onInvalid, "slurmrestd refused the job: %s", r.errorText())
	case r.status >= 500 && r.hasTransientError():
		return backends.Transient(errors.New(r.String()))
	case r.status >= 500 && r.hasError(errUnspecified, errZeroBytes):
		// 22.05 reports a refused token this way, and also a slurmctld
		// that is down (for reads). Ask slurmctld which it is.
		return b.authProbe(ctx, r)
	case r.status >= 500 && onInvalid != "" && r.hasSlurmctldRefusal():
		return backends.Invalid(onInvalid, "Slurm refused the job: %s", r.errorText())
	}
	return errors.New(r.String())
}

// busy: slurmrestd, or a gateway before it, asks to be tried again later.
func (r *response) busy() bool {
	switch r.status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// hasTransientError: communication errors between slurmrestd and slurmctld,
// and slurmctld states that pass (standby, busy, queue full).
func (r *response) hasTransientError() bool {
	for _, e := range r.env.Errors {
		n := e.number()
		switch {
		case n >= 1000 && n < 1900 && n != errProtocolAuth:
			return true
		case n == 5003 || n == 5004: // incomplete packet, socket timeout
			return true
		case n == 2007 || n == 2027 || n == 2041 || n == 2105 || n == 2131:
			// max job count reached, standby mode, takeover, submissions
			// disabled, standby use backup
			return true
		}
	}
	return false
}

// authFailed: slurmrestd or slurmctld refused the credentials.
func (r *response) authFailed() bool {
	return httpx.IsAuth(r.status) || r.status == http.StatusNetworkAuthenticationRequired ||
		r.hasError(errProtocolAuth, errRestAuthFail) || r.hasAuthRangeError()
}

func (r *response) hasAuthRangeError() bool {
	for _, e := range r.env.Errors {
		if n := e.number(); n >= 6000 && n < 7000 {
			return true
		}
	}
	return false
}

// hasSlurmctldRefusal: slurmctld's own "no" to a job (bad partition, account,
// QOS, limits, missing environment, ...), errors 2000-2999.
func (r *response) hasSlurmctldRefusal() bool {
	for _, e := range r.env.Errors {
		if n := e.number(); n >= 2000 && n < 3000 {
			return true
		}
	}
	return false
}

// authProbe decides whether an ambiguous failure (22.05: error -1 on reads,
// 5005 on writes) means refused credentials. A token past its exp claim is
// certainly refused. Otherwise it cancels a job id that cannot exist:
// slurmctld answers "invalid job id" when it accepts the credentials, hangs up
// (5005) when it does not, and slurmrestd reports a connect failure when
// slurmctld is down.
func (b *Backend) authProbe(ctx context.Context, orig *response) error {
	_, token, err := b.credentials()
	if err != nil {
		return err
	}
	if c, ok := parseJWT(token); ok && c.Exp > 0 && !time.Unix(c.Exp, 0).After(time.Now()) {
		return httpx.AuthError(orig.method+" "+orig.path, orig.status, "the token expired at "+
			time.Unix(c.Exp, 0).UTC().Format(time.RFC3339)+"; mint a new one (scontrol token username=... lifespan=...)", "token")
	}
	p, err := b.do(ctx, http.MethodDelete, b.apiPath("job/"+probeJobID), nil)
	if err != nil {
		return err
	}
	switch {
	case p.hasError(errZeroBytes, errUnspecified, errProtocolAuth, errRestAuthFail) || p.hasAuthRangeError() || p.status == http.StatusUnauthorized || p.status == 511:
		return b.authError(orig)
	case p.notFound() || p.status == http.StatusOK:
		// Credentials work, so the original failure was something else.
		return backends.Transient(errors.New(orig.String()))
	}
	return backends.Transient(fmt.Errorf("%v (and slurmctld did not answer a check either: %v)", orig, p))
}

func (b *Backend) authError(r *response) error {
	user, token, _ := b.credentials()
	if th, _, _ := b.authHeaders(); strings.EqualFold(th, "Authorization") && r.status == http.StatusUnauthorized && !r.json {
		// slurmrestd (or a gateway) refused the request without asking
		// slurmctld: rest_auth/jwt reads Authorization: Bearer only from
		// Slurm 23.02 on; 22.05 answers a plain 401 for it.
		return httpx.AuthError(r.method+" "+r.path, r.status, "slurmrestd did not accept the token as Authorization: Bearer (Slurm 22.05 and older read it only from X-SLURM-USER-TOKEN; 23.02 and later take either): remove tokenHeader, or have the gateway forward X-SLURM-USER-TOKEN", "tokenHeader")
	}
	hint := "the token is invalid, expired, or was not minted for this user"
	if c, ok := parseJWT(token); ok {
		if c.Exp > 0 && !time.Unix(c.Exp, 0).After(time.Now()) {
			hint = "the token expired at " + time.Unix(c.Exp, 0).UTC().Format(time.RFC3339)
		} else if c.Sun != "" && c.Sun != user {
			hint = fmt.Sprintf("the token was minted for %q but is used as %q (only root and SlurmUser tokens may act for others)", c.Sun, user)
		}
	}
	// Never the server's words: an echo of the request would carry the
	// token (see httpx.AuthError). Slurm's error numbers are safe to name.
	return httpx.AuthError(r.method+" "+r.path, r.status, fmt.Sprintf("slurmctld refused the credentials of user %q%s: %s", user, r.errorNumbers(), hint), "token", "username")
}

// jwtClaims are the claims slurmctld puts into its HS256 tokens.
type jwtClaims struct {
	Exp int64  `json:"exp"`
	Iat int64  `json:"iat"`
	Sun string `json:"sun"` // Slurm user name
}

// parseJWT decodes a JWT's claims without verifying it (only slurmctld can);
// ok is false for anything that is not a JWT.
func parseJWT(token string) (jwtClaims, bool) {
	var c jwtClaims
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return c, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return c, false
	}
	if json.Unmarshal(payload, &c) != nil {
		return c, false
	}
	return c, true
}

// credentials reads the user name and token, re-reading the mounted Secret on
// every call so a rotated token is picked up. The user name may be omitted
// when the token names its user (the "sun" claim).
func (b *Backend) credentials() (user, token string, err error) {
	if b.creds == nil {
		return "", "", backends.Invalid("credentials", "the slurm backend needs credentials: a Secret with username and token (a JWT from `scontrol token`)")
	}
	token, err = b.creds.Get("token", "jwt", "password")
	if err != nil {
		return "", "", err
	}
	if token == "" {
		return "", "", backends.Invalid("credentials", "the token is empty; put a JWT from `scontrol token username=USER lifespan=SECONDS` under the key token (or jwt, or password)")
	}
	user, uerr := b.creds.Get("username", "user")
	if uerr != nil || user == "" {
		if c, ok := parseJWT(token); ok && c.Sun != "" {
			return c.Sun, token, nil
		}
		if uerr == nil {
			uerr = backends.Invalid("credentials", "the user name is empty")
		}
		return "", "", uerr
	}
	return user, token, nil
}
