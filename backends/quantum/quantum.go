// Package quantum runs primitive jobs (sampler, estimator) on the IBM Quantum
// Compute service (formerly IBM Quantum Platform) on IBM Cloud, through its
// Qiskit Runtime REST API (the current API; IBM's Bridge Operator used the
// retired "programs" API).
//
// resourceURL is the service base URL, default https://quantum.cloud.ibm.com/api/v1
// (eu-de: https://eu-de.quantum.cloud.ibm.com/api/v1). Each request has a
// per-request timeout (RequestTimeout).
//
// # Authentication
//
// The Secret holds the instance's CRN (key crn, serviceCRN, service-crn or,
// as in the Bridge Operator's Secrets, username) and an IBM Cloud API key
// (apikey, api-key or, as in the Bridge Operator, password); both are re-read
// on every request. An IAM token is made from the API key with POST
// <IAM URL> (grant_type=urn:ibm:params:oauth:grant-type:apikey), kept, and
// made again before it expires (from the answer's expiration, else
// expires_in), when the API key in the Secret changes, and when the service
// answers 401 (the request is then sent once more; a second 401 is
// backends.ErrAuth). The IAM URL is jobproperties' iam_url, else the
// Secret's iam_url, else https://iam.cloud.ibm.com/identity/token; since
// cleanup does not read jobproperties, put a non-default IAM URL in the
// Secret too. Every service request carries Authorization: Bearer,
// Service-CRN and IBM-API-Version (jobproperties' api_version, default
// DefaultAPIVersion, 2026-04-15). A pinned version whose sunset is past or
// within SunsetWarning (see apiSunsets: 2025-05-01 sunsets 2027-01-01), or
// an older one IBM no longer listed, is sent as asked but warned about: a
// log line at submit and a note in every status message.
//
// # Jobs
//
// jobproperties (validated strictly; aliases in brackets):
//
//	program_id      "sampler" or "estimator" (program, programId); may instead be the
//	                remote script name (scriptLocation remote, jobScript sampler|estimator)
//	backend         the QPU, e.g. ibm_torino (required) (backend_name)
//	iam_url         the IAM token endpoint (iamURL, iam_endpoint)
//	api_version     IBM-API-Version, YYYY-MM-DD (apiVersion)
//	log_level, cost (max execution seconds, 1-10800), session_id, private,
//	calibration_id  passed through
//	tags            extra job tags (strings)
//	shots           shots of the PUB built from an inline circuit
//
// params is jobdata.jobParameters (a JSON object; the Bridge Operator's
// {"params":{...}} wrapper is unwrapped). An inline script is an OpenQASM 3
// circuit: when params has no pubs, the sampler gets
// {"pubs":[[circuit]]} (or [[circuit,[],shots]]) with "version":2.
// The idempotency key is the first of the job's tags. FindByKey asks
// GET /jobs?tags=<key> and keeps only jobs whose tags really contain the key
// (so a server that ignored the filter cannot make it adopt a stranger).
//
// Status is GET /jobs/{id}?exclude_params=true; state.status (the legacy
// top-level status when state is absent) maps Queued to PENDING, Running to
// RUNNING, Completed to DONE, Failed to FAILED, and Cancelled to KILLED,
// except reason code 1305 ("Ran too long": the maximum execution time was
// hit) and the legacy "Cancelled - Ran too long", which are FAILED. The
// reason code is Status.Reason, the reason and its solution the message. At a
// final state, GET /jobs/{id}/metrics fills in the start and end times.
// StatusMany (backends.StatusBatcher) reads many jobs' states from GET /jobs,
// which cannot be filtered by id: newest first, pending=true (Queued and
// Running) and then, for the ids not seen, pending=false (the ended ones),
// each at most 2 pages of limit=50 (offset for the second), stopping once
// every id is found or the list ends. So one call is 1 request when every
// asked job is active, at most 4; a job older than the pages read, unknown
// or in an unknown state is left out (Status reads it). States are mapped as
// above; the times are not read (they need each job's metrics).
//
// ProbeLoad (backends.LoadProber) is one GET /backends/{name}/status:
// state (operational) and status decide whether the job fits, length_queue
// is its PendingJobs (load.go).
//
// Cancel is POST /jobs/{id}/cancel (204); a refused cancel of a job that has
// ended is not an error. FetchOutput serves "results" (the PrimitiveResult
// JSON, stored opaquely), "logs" and "metrics" (see Outputs).
//
// Errors: the {"errors":[{code,message,solution,more_info}],"trace"} body is
// reported by message, code (a number or a string) and trace. 429 (the run
// endpoint allows 5 jobs a minute) is a *RateLimitError carrying Retry-After,
// wrapped as backends.ErrTransient, as are 5xx and transport failures; 400,
// 404 and 422 on submit are backends.ErrInvalid naming jobproperties (or
// jobdata.jobParameters when the message is about params or PUBs); 409 on
// submit ("Usage exceeds instance limit") is a plain error; 403 is ErrAuth;
// 404 on a job is backends.ErrNotFound.
//
// # Unverified
//
// IBM Quantum cannot be reached from here: this backend is tested against a
// fake (internal/fakequantum) that follows the reference's description. Not confirmed:
// the tags filter of GET /jobs and the shape of its answer ({"jobs":[…],
// "count"} as qiskit-ibm-runtime reads it, or a bare array, both read); its
// pending, limit and offset parameters (as qiskit-ibm-runtime sends them;
// the largest limit accepted is not documented, 50 is asked) and that it
// lists the newest jobs first by default; the primitives' option keys and
// PUB layout; how a cancel of a finished job is refused; that a wrong
// Service-CRN is 401 or 403; that metrics' timestamps are named
// created/running/finished; the error codes other than 1291 and 1305; the
// words of a backend status' status other than "active" (paused,
// maintenance and offline are read as stopped).
package quantum

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
const Name = "quantum"

const (
	// DefaultURL is the service base URL used when resourceURL is empty.
	DefaultURL = "https://quantum.cloud.ibm.com/api/v1"
	// DefaultIAMURL is IBM Cloud's IAM token endpoint.
	DefaultIAMURL = "https://iam.cloud.ibm.com/identity/token"
	// RequestTimeout bounds each request.
	RequestTimeout = 60 * time.Second
)

// Outputs are the names FetchOutput serves, for upload after the job.
var Outputs = []string{"results", "logs", "metrics"}

// Backend talks to one Qiskit Runtime service.
type Backend struct {
	base           string
	client         *http.Client
	creds          backends.Credentials
	secrets        backends.Secrets // session tokens are secrets too
	log            *slog.Logger
	requestTimeout time.Duration
	now            func() time.Time

	mu         sync.Mutex
	iamURL     string // from jobproperties, once seen
	apiVersion string
	warned     string // the version warning last logged
	token      string
	tokenFor   string // iamURL + "\x00" + API key the token was made from
	tokenRenew time.Time
}

// New builds the backend from cfg; it sends nothing until first used.
func New(cfg backends.Config) (backends.Backend, error) {
	raw := strings.TrimSpace(cfg.URL)
	if raw == "" {
		raw = DefaultURL
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return nil, backends.Invalid("resourceURL", "%q is not a service URL such as %s", cfg.URL, DefaultURL)
	}
	b := &Backend{base: strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"), client: cfg.HTTPClient, creds: cfg.Credentials, secrets: cfg.Secrets,
		log: cfg.Logger, requestTimeout: RequestTimeout, now: time.Now}
	if b.client == nil {
		b.client = httpx.DefaultClient()
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.Finder        = (*Backend)(nil)
	_ backends.Validator     = (*Backend)(nil)
	_ backends.OutputFetcher = (*Backend)(nil)
)
