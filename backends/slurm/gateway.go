package slurm

import (
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Site gateways. Managed Slurm products and some sites put slurmrestd behind
// their own gateway: another base path (resourceURL's path is kept as a
// prefix, see parseURL) and other header names for the token and the user.
// The header names come from the credentials, beside the token they
// describe, so the job description stays the same from site to site:
//
//	tokenHeader  header that carries the token (default X-SLURM-USER-TOKEN);
//	             "Authorization" sends "Bearer <token>", for gateways that
//	             forward only that header; slurmrestd itself accepts it
//	             from 23.02 on (tested on 24.11), while 22.05 answers a
//	             plain 401, reported as an error that names tokenHeader
//	userHeader   header that carries the user name (default
//	             X-SLURM-USER-NAME); "none" sends no user name (23.02+ take
//	             it from the token)
const (
	defaultTokenHeader = "X-SLURM-USER-TOKEN"
	defaultUserHeader  = "X-SLURM-USER-NAME"
	noHeader           = "none"
)

var headerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$") })

// authHeaders returns the names of the token and user headers to send.
func (b *Backend) authHeaders() (token, user string, err error) {
	token, user = defaultTokenHeader, defaultUserHeader
	if v, gerr := b.creds.Get("tokenHeader"); gerr == nil && v != "" {
		token = v
	}
	if v, gerr := b.creds.Get("userHeader"); gerr == nil && v != "" {
		user = v
	}
	if strings.EqualFold(token, noHeader) || !headerName().MatchString(token) {
		return "", "", backends.Invalid("credentials", "tokenHeader %q is not an HTTP header name; give the header your gateway expects the token in, e.g. Authorization", token)
	}
	if !strings.EqualFold(user, noHeader) && !headerName().MatchString(user) {
		return "", "", backends.Invalid("credentials", "userHeader %q is not an HTTP header name; give the header your gateway expects the user name in, or none", user)
	}
	return token, user, nil
}

// setAuth puts the credentials into h under the configured header names.
func (b *Backend) setAuth(h http.Header, user, token string) error {
	th, uh, err := b.authHeaders()
	if err != nil {
		return err
	}
	if strings.EqualFold(th, "Authorization") {
		h.Set("Authorization", "Bearer "+token)
	} else {
		h.Set(th, token)
	}
	if !strings.EqualFold(uh, noHeader) {
		h.Set(uh, user)
	}
	return nil
}
