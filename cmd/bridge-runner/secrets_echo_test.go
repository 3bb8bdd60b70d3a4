package main

// Hostile echoing servers: each answers in its backend's own format (JSON
// for slurmrestd, IBM Quantum and Ray, XML for LSF Application Center) and
// puts the whole request into its error: headers and body, JSON-escaped,
// XML-escaped, URL-encoded and in base64. The secrets hold every character
// that some encoding changes. No form of them may reach anything invoke
// leaves where people can read it.

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
)

const (
	echoSecret = `SEC<r&e>t"q\u/o+t%e=d 9f8e`
	// echoBearer is what the fake IAM hands out for echoSecret.
	echoBearer = `BEAR<e&r>"x\y/z+%= 7c6b`
)

// echoDump is the request as the hostile server quotes it, in every
// encoding it fancies.
func echoDump(r *http.Request) string {
	body, _ := io.ReadAll(r.Body)
	raw := fmt.Sprintf("%s %s?%s\n%v\n%s", r.Method, r.URL.Path, r.URL.RawQuery, r.Header, body)
	js, _ := json.Marshal(raw)
	var x strings.Builder
	_ = xml.EscapeText(&x, []byte(raw))
	return fmt.Sprintf("request=%s xml=%s url=%s path=%s b64=%s b64url=%s html=%s upper=%s lower=%s reversed=%s words=%s",
		js, x.String(), url.QueryEscape(raw), url.PathEscape(raw), base64.StdEncoding.EncodeToString([]byte(raw)),
		base64.URLEncoding.EncodeToString([]byte(raw)), html.EscapeString(raw), strings.ToUpper(raw), strings.ToLower(raw),
		reversed(raw), strings.Join(strings.Fields(raw), "', '"))
}

func reversed(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// echoForms: every form of secret that must not be found.
func echoForms(secret string) map[string]string {
	js, _ := json.Marshal(secret)
	var x strings.Builder
	_ = xml.EscapeText(&x, []byte(secret))
	forms := map[string]string{
		"literal": secret, "json": strings.Trim(string(js), `"`), "xml": x.String(), "html": html.EscapeString(secret),
		"query": url.QueryEscape(secret), "path": url.PathEscape(secret),
	}
	for pad := 0; pad < 3; pad++ {
		for name, enc := range map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding} {
			e := enc.EncodeToString(append(make([]byte, pad), secret...))
			forms[fmt.Sprintf("base64 %s +%d", name, pad)] = e[4 : len(e)-4] // the characters made of secret bytes only
		}
	}
	return forms
}

func assertNoForm(t *testing.T, text string, secrets ...string) {
	t.Helper()
	lower := strings.ToLower(text)
	for _, s := range secrets {
		for name, f := range echoForms(s) {
			if i := strings.Index(text, f); i >= 0 {
				lo, hi := max(i-150, 0), min(i+len(f)+80, len(text))
				t.Errorf("the %s form %q of a secret leaked: ...%s...", name, f, text[lo:hi])
			}
		}
		// In any case, reversed, and word by word (words of 4 letters
		// or more, see runner.Secrets.Add).
		forms := []string{s}
		if words := strings.Fields(s); len(words) > 1 {
			for _, w := range words {
				forms = append(forms, strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }))
			}
		}
		for _, f := range forms {
			for _, v := range []string{strings.ToLower(f), strings.ToLower(reversed(f))} {
				if len([]rune(v)) >= 4 && strings.Contains(lower, v) {
					i := strings.Index(lower, v)
					t.Errorf("%q of a secret leaked, re-cased or reversed: ...%s...", v, text[max(i-150, 0):min(i+len(v)+80, len(text))])
				}
			}
		}
	}
}

func echoSlurm(t *testing.T, mode, secret string) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		submit := strings.HasSuffix(r.URL.Path, "/job/submit")
		f.seen(r, submit)
		status, errno := http.StatusUnauthorized, 9008
		if mode == "refuse" && r.Header.Get("X-SLURM-USER-TOKEN") == secret {
			if !submit {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"meta":{},"errors":[],"jobs":[]}`)
				return
			}
			status, errno = http.StatusBadRequest, 2072
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"meta": map[string]any{}, "errors": []any{map[string]any{
			"description": echoDump(r), "error_number": errno, "error": "echo", "source": "hostile"}}})
	})
}

func echoLSF(t *testing.T, mode, secret string) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		submit := strings.HasSuffix(r.URL.Path, "/ws/jobs/submit")
		f.seen(r, submit)
		status := http.StatusForbidden
		if mode == "refuse" {
			switch {
			case strings.HasSuffix(r.URL.Path, "/ws/logon"):
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"token":"u\"2099-01-01T00:00:00Z\"sess9f8e7d6c"}`)
				return
			case r.Method == http.MethodGet:
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"@total":"0"}`)
				return
			}
			status = http.StatusBadRequest
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		var b strings.Builder
		_ = xml.EscapeText(&b, []byte("bad queue; you sent: "+echoDump(r)))
		fmt.Fprintf(w, "<error><message>%s</message></error>", b.String())
	})
}

func echoQuantum(t *testing.T, mode, secret string) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		submit := r.Method == http.MethodPost && r.URL.Path == "/api/v1/jobs"
		f.seen(r, submit)
		status := http.StatusUnauthorized
		if mode == "refuse" {
			switch {
			case r.URL.Path == "/iam/token":
				_ = json.NewEncoder(w).Encode(map[string]any{"access_token": echoBearer, "expires_in": 3600})
				return
			case r.Method == http.MethodGet:
				_ = json.NewEncoder(w).Encode(map[string]any{"jobs": []any{}})
				return
			}
			status = http.StatusBadRequest
		} else if r.URL.Path == "/iam/token" {
			status = http.StatusBadRequest
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []any{map[string]any{"code": 1234, "message": echoDump(r),
			"solution": "stop sending " + r.Header.Get("Authorization")}}, "errorMessage": echoDump(r), "trace": "t"})
	})
}

func echoRay(t *testing.T, mode, secret string) *fakeServer {
	return newFakeServer(t, func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		submit := r.Method == http.MethodPost && r.URL.Path == "/api/jobs/"
		f.seen(r, submit)
		status := http.StatusForbidden
		if mode == "refuse" {
			if r.Method == http.MethodGet {
				w.WriteHeader(http.StatusNotFound)
				_ = json.NewEncoder(w).Encode(map[string]any{"detail": "no such job; " + echoDump(r)})
				return
			}
			status = http.StatusBadRequest
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"detail": echoDump(r)})
	})
}

// TestSecretsEchoedInAnyEncoding runs invoke against each hostile server,
// once refusing the credentials (401/403) and once accepting them but
// refusing the job (400) with the request quoted, re-cased, reversed and
// split into words; with a secret of one word and with a passphrase.
// Before, 4 of the 16 runs leaked (IBM Quantum's and Ray's refusals, with
// either secret: re-cased, reversed or word by word).
func TestSecretsEchoedInAnyEncoding(t *testing.T) {
	clearEnv(t)
	for _, secret := range []string{echoSecret, echoPassphrase} {
		for _, mode := range []string{"auth", "refuse"} {
			secretsEchoed(t, mode, secret)
		}
	}
}

// echoPassphrase is a multi-word secret with characters encodings change.
const echoPassphrase = `Quokka <b&m> "velvet" kettle+drum 100% of`

func secretsEchoed(t *testing.T, mode, secret string) {
	kind := "token"
	if secret == echoPassphrase {
		kind = "passphrase"
	}
	t.Run("slurm "+mode+" "+kind, func(t *testing.T) {
		srv := echoSlurm(t, mode, secret)
		creds := credsDir(t, map[string]string{"username": "bridge", "token": secret})
		r, text := invokeScanned(t, "--backend", "slurm", "--resource-url", srv.URL+"/slurm/v0.0.40", "--credentials-dir", creds,
			"--script", "#!/bin/bash\necho hi\n")
		assert.Equal(t, ExitInvalid, r.code, r.stderr)
		assert.NotEmpty(t, srv.requests)
		assertNoForm(t, text, secret)
		if mode == "auth" {
			assert.Contains(t, text, `check the keys "token" and "username"`)
		}
	})
	t.Run("lsf "+mode+" "+kind, func(t *testing.T) {
		srv := echoLSF(t, mode, secret)
		creds := credsDir(t, map[string]string{"username": "bridge", "password": secret})
		r, text := invokeScanned(t, "--backend", "lsf", "--resource-url", srv.URL, "--credentials-dir", creds, "--script", "#!/bin/sh\necho hi\n")
		assert.NotEqual(t, 0, r.code, r.stderr)
		assert.NotEmpty(t, srv.requests)
		assertNoForm(t, text, secret)
		if mode == "auth" {
			assert.Contains(t, text, `check the keys "username" and "password"`)
		}
	})
	t.Run("quantum "+mode+" "+kind, func(t *testing.T) {
		srv := echoQuantum(t, mode, secret)
		creds := credsDir(t, map[string]string{"crn": "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::",
			"apikey": secret, "iam_url": srv.URL + "/iam/token"})
		r, text := invokeScanned(t, "--backend", "quantum", "--resource-url", srv.URL+"/api/v1", "--credentials-dir", creds,
			"--job-properties", `{"program_id":"sampler","backend":"ibm_torino"}`, "--script", "OPENQASM 3.0; qubit q; bit c; h q; c = measure q;")
		assert.NotEqual(t, 0, r.code, r.stderr)
		assert.NotEmpty(t, srv.requests)
		assertNoForm(t, text, secret, echoBearer)
		if mode == "auth" {
			assert.Contains(t, text, `check the key "apikey"`)
		}
	})
	t.Run("ray "+mode+" "+kind, func(t *testing.T) {
		srv := echoRay(t, mode, secret)
		creds := credsDir(t, map[string]string{"token": secret})
		r, text := invokeScanned(t, "--backend", "ray", "--resource-url", srv.URL, "--credentials-dir", creds, "--script", "print('hi')")
		assert.NotEqual(t, 0, r.code, r.stderr)
		assert.NotEmpty(t, srv.requests)
		assertNoForm(t, text, secret)
		if mode == "auth" {
			assert.Contains(t, text, `check the key "token"`)
		}
	})
}
