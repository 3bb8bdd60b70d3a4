package lsf

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// Name is the backend's registry name.
const Name = "lsf"

// RequestTimeout bounds each request to Application Center.
const RequestTimeout = 60 * time.Second

// maxBufferedSubmit: submits up to this size are sent with a Content-Length;
// larger ones (big input files) are streamed chunked.
const maxBufferedSubmit = 64 << 20

// Backend talks to one Application Center.
type Backend struct {
	base           string // scheme://host:port/platform
	client         *http.Client
	creds          backends.Credentials
	secrets        backends.Secrets // session tokens are secrets too
	log            *slog.Logger
	requestTimeout time.Duration
	now            func() time.Time

	mu          sync.Mutex // guards the session and killVia
	token       string     // as sent in the cookie (quotes replaced)
	tokenRenew  time.Time
	killVia     string              // "", "jobs/kill" or "userCmd": the kill call that works
	outFiles    map[string]string   // job id -> its output file (logs.go)
	outPatterns map[string]jobFiles // array id -> its output and error file patterns and working directory (logs.go)
}

// New builds the backend from cfg; it sends nothing until first used.
func New(cfg backends.Config) (backends.Backend, error) {
	base, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	b := &Backend{base: base, client: cfg.HTTPClient, creds: cfg.Credentials, secrets: cfg.Secrets, log: cfg.Logger,
		requestTimeout: RequestTimeout, now: time.Now}
	if b.client == nil {
		b.client = httpx.DefaultClient()
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

func parseURL(raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", backends.Invalid("resourceURL", "the lsf backend needs Application Center's URL, e.g. https://pac.example.org:8443")
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", backends.Invalid("resourceURL", "%q is not an http(s) URL such as https://pac.example.org:8443", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", backends.Invalid("resourceURL", "%q must not carry a query, fragment or user info", raw)
	}
	p := strings.TrimRight(u.Path, "/")
	if p == "" {
		p = "/platform"
	}
	p = strings.TrimSuffix(p, "/ws")
	return u.Scheme + "://" + u.Host + p, nil
}

// StagesInputs: additionalData files are uploaded with the job.
func (b *Backend) StagesInputs() bool { return true }

var (
	_ backends.Backend        = (*Backend)(nil)
	_ backends.Finder         = (*Backend)(nil)
	_ backends.Validator      = (*Backend)(nil)
	_ backends.InputStager    = (*Backend)(nil)
	_ backends.OutputFetcher  = (*Backend)(nil)
	_ backends.ArraySubmitter = (*Backend)(nil)
)
