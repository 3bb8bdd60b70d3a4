package testutil

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Redirector is a hostile server in front of a backend's fake (or a real
// service): requests that Match picks are answered with a redirect (Code to
// To(r)); the rest pass through to the server behind. Other and OtherTLS
// are other origins (other ports) that record whatever reaches them, where
// a credential that followed a redirect would land.
type Redirector struct {
	Front    *httptest.Server
	Other    *httptest.Server // plain http
	OtherTLS *httptest.Server

	mu       sync.Mutex
	code     int
	to       func(r *http.Request) string
	match    func(r *http.Request) bool
	received []string
	answered int
	answer   func(w http.ResponseWriter, r *http.Request) bool
}

// NewRedirector starts the front (TLS when tls is set) before target.
// Clients made by any httptest TLS server trust all of them.
func NewRedirector(t testing.TB, target string, tls bool) *Redirector {
	t.Helper()
	tu, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rd := &Redirector{}
	proxy := httputil.NewSingleHostReverseProxy(tu)
	proxy.Transport = insecureTransport()
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rd.redirect(w, r) {
			return
		}
		rd.mu.Lock()
		answer := rd.answer
		rd.mu.Unlock()
		if answer != nil && answer(w, r) {
			return
		}
		// A path that the same-origin redirect added a slash to reaches
		// the server behind as it was.
		if strings.HasSuffix(r.URL.Path, "/") && r.URL.Query().Has("moved") {
			q := r.URL.Query()
			q.Del("moved")
			r.URL.RawQuery = q.Encode()
			r.URL.Path = strings.TrimSuffix(r.URL.Path, "/")
			r.URL.RawPath = ""
		}
		proxy.ServeHTTP(w, r)
	})
	if tls {
		rd.Front = httptest.NewTLSServer(front)
	} else {
		rd.Front = httptest.NewServer(front)
	}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, _ := httputil.DumpRequest(r, true)
		rd.mu.Lock()
		rd.received = append(rd.received, string(dump))
		rd.mu.Unlock()
		http.Error(w, "not here", http.StatusNotFound)
	})
	rd.Other = httptest.NewServer(record)
	rd.OtherTLS = httptest.NewTLSServer(record)
	t.Cleanup(func() { rd.Front.Close(); rd.Other.Close(); rd.OtherTLS.Close() })
	return rd
}

func insecureTransport() http.RoundTripper {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a test's own servers
	return tr
}

// Set makes the front answer the requests match picks with code to to(r)
// (nil match: every request).
func (rd *Redirector) Set(code int, match func(r *http.Request) bool, to func(r *http.Request) string) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.code, rd.match, rd.to = code, match, to
}

func (rd *Redirector) redirect(w http.ResponseWriter, r *http.Request) bool {
	rd.mu.Lock()
	code, match, to := rd.code, rd.match, rd.to
	if code != 0 && !r.URL.Query().Has("moved") && (match == nil || match(r)) {
		rd.answered++
	} else {
		code = 0
	}
	rd.mu.Unlock()
	if code == 0 {
		return false
	}
	w.Header().Set("Location", to(r))
	w.WriteHeader(code)
	return true
}

// Answer makes the front answer the requests match picks (nil: every
// request) itself, with status and body of content type ctype; a zero
// status passes everything on again.
func (rd *Redirector) Answer(match func(r *http.Request) bool, status int, ctype, body string) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if status == 0 {
		rd.answer = nil
		return
	}
	rd.answer = func(w http.ResponseWriter, r *http.Request) bool {
		if match != nil && !match(r) {
			return false
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
		return true
	}
}

// Received is every request (headers and body) that reached Other or
// OtherTLS.
func (rd *Redirector) Received() []string {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return append([]string(nil), rd.received...)
}

// Redirected counts the redirects the front answered.
func (rd *Redirector) Redirected() int {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.answered
}

// To is a redirect to the same path (and query) at base, another origin.
func To(base string) func(r *http.Request) string {
	return func(r *http.Request) string { return base + r.URL.RequestURI() }
}

// Loop is a redirect to the request's own URL: a loop.
func Loop(r *http.Request) string { return r.URL.RequestURI() }

// Slash is the redirect a server makes to add a trailing slash: same
// origin, and the front passes the slashed path on as it was.
func Slash(r *http.Request) string {
	q := r.URL.Query()
	q.Set("moved", "1")
	return r.URL.Path + "/?" + q.Encode()
}

// RedirectCodes are the redirects a client follows.
var RedirectCodes = []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
	http.StatusTemporaryRedirect, http.StatusPermanentRedirect}

// RedirectCase is one hostile redirect: from a plain or TLS front to
// another origin, and what the refusal must say of it.
type RedirectCase struct {
	Name string
	TLS  bool // the front speaks https
	// Dest is the other origin the front sends the client to.
	Dest func(rd *Redirector) string
	Why  string
}

// RedirectCases: another port, another https port, and https down to
// http.
var RedirectCases = []RedirectCase{
	{"another port", false, func(rd *Redirector) string { return rd.Other.URL }, "to another origin"},
	{"another https port", true, func(rd *Redirector) string { return rd.OtherTLS.URL }, "to another origin"},
	{"https down to http", true, func(rd *Redirector) string { return rd.Other.URL }, "from https down to http"},
}

// RequireRefusedRedirect fails t unless err is the refusal of c's redirect
// to server's request op (exit 2, naming the redirect, its destination and
// the fix, not a timeout) and nothing reached the other origins.
func RequireRefusedRedirect(t testing.TB, err error, rd *Redirector, c RedirectCase, server, op, field string) {
	t.Helper()
	if got := rd.Received(); len(got) > 0 {
		t.Errorf("the other origin received %d requests: %q", len(got), got)
	}
	RequireFieldError(t, err, field)
	msg := err.Error()
	for _, want := range []string{server + " redirected " + op, c.Why, "(" + c.Dest(rd) + ")", "set " + field + " to the final address"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "deadline") {
		t.Errorf("a refused redirect reads as a timeout: %s", msg)
	}
}
