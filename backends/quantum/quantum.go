// Package quantum runs primitive jobs (sampler, estimator) on IBM Quantum
// through the Qiskit Runtime REST API of IBM Quantum Platform on IBM Cloud
// (the current API; IBM's Bridge Operator used the retired "programs" API).
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
// DefaultAPIVersion).
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
// fake (fake_test.go) that follows the reference's description. Not confirmed:
// the tags filter of GET /jobs and the shape of its answer ({"jobs":[…]} or a
// bare array, both read); the primitives' option keys and PUB layout; how a
// cancel of a finished job is refused; that a wrong Service-CRN is 401 or
// 403; that metrics' timestamps are named created/running/finished; the error
// codes other than 1291 and 1305.
package quantum

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
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
	// DefaultAPIVersion is sent as IBM-API-Version (the documentation's samples use it).
	DefaultAPIVersion = "2025-05-01"
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
		b.client = &http.Client{}
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

// Properties are the quantum backend's jobproperties.
type Properties struct {
	ProgramID     string   `json:"program_id"`
	Backend       string   `json:"backend"`
	IAMURL        string   `json:"iam_url"`
	APIVersion    string   `json:"api_version"`
	LogLevel      string   `json:"log_level"`
	Cost          *int     `json:"cost"`
	SessionID     string   `json:"session_id"`
	Private       *bool    `json:"private"`
	CalibrationID string   `json:"calibration_id"`
	Tags          []string `json:"tags"`
	Shots         *int     `json:"shots"`
}

var aliases = map[string]string{
	"program": "program_id", "programId": "program_id", "backend_name": "backend",
	"iamURL": "iam_url", "iam_endpoint": "iam_url", "apiVersion": "api_version",
}

var (
	dateRE    = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	jobIDRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	logLevels = map[string]bool{"DEBUG": true, "INFO": true, "WARNING": true, "ERROR": true, "CRITICAL": true}
)

func parseProperties(raw json.RawMessage) (Properties, error) {
	var p Properties
	if len(bytes.TrimSpace(raw)) == 0 {
		return p, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return p, backends.Invalid("jobproperties", "not a JSON object: %v", err)
	}
	norm := map[string]json.RawMessage{}
	from := map[string]string{}
	for k, v := range m {
		c := k
		if a, ok := aliases[k]; ok {
			c = a
		}
		if prev, dup := from[c]; dup {
			return p, backends.Invalid("jobproperties", "%q and %q set the same thing; keep one", prev, k)
		}
		from[c], norm[c] = k, v
	}
	buf, _ := json.Marshal(norm)
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, backends.Invalid("jobproperties", "%v; the quantum backend takes program_id, backend, iam_url, api_version, log_level, cost, session_id, private, calibration_id, tags and shots", err)
	}
	switch {
	case p.ProgramID != "" && p.ProgramID != "sampler" && p.ProgramID != "estimator":
		return p, backends.Invalid("jobproperties", "program_id must be sampler or estimator (custom programs are no longer supported), not %q", p.ProgramID)
	case p.IAMURL != "" && !httpURL(p.IAMURL):
		return p, backends.Invalid("jobproperties", "iam_url %q is not an http(s) URL such as %s", p.IAMURL, DefaultIAMURL)
	case p.APIVersion != "" && !dateRE.MatchString(p.APIVersion):
		return p, backends.Invalid("jobproperties", "api_version must be a date YYYY-MM-DD such as %s, not %q", DefaultAPIVersion, p.APIVersion)
	case p.LogLevel != "" && !logLevels[p.LogLevel]:
		return p, backends.Invalid("jobproperties", "log_level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, not %q", p.LogLevel)
	case p.Cost != nil && (*p.Cost < 1 || *p.Cost > 10800):
		return p, backends.Invalid("jobproperties", "cost is the maximum execution time in seconds, 1 to 10800, not %d", *p.Cost)
	case p.Shots != nil && *p.Shots < 1:
		return p, backends.Invalid("jobproperties", "shots must be positive")
	case strings.ContainsAny(p.Backend, " \t\r\n/"):
		return p, backends.Invalid("jobproperties", "backend %q is not a backend name such as ibm_torino", p.Backend)
	}
	for _, t := range p.Tags {
		if strings.TrimSpace(t) == "" {
			return p, backends.Invalid("jobproperties", "tags must not be empty strings")
		}
	}
	return p, nil
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// submitBody is POST /jobs.
type submitBody struct {
	ProgramID     string          `json:"program_id"`
	Backend       string          `json:"backend"`
	Params        json.RawMessage `json:"params"`
	Tags          []string        `json:"tags"`
	LogLevel      string          `json:"log_level,omitempty"`
	Cost          *int            `json:"cost,omitempty"`
	SessionID     string          `json:"session_id,omitempty"`
	Private       *bool           `json:"private,omitempty"`
	CalibrationID string          `json:"calibration_id,omitempty"`
}

func buildSubmit(job backends.Job) (*submitBody, Properties, error) {
	p, err := parseProperties(job.Properties)
	if err != nil {
		return nil, p, err
	}
	program := p.ProgramID
	if job.ScriptPath != "" {
		sp := strings.TrimSpace(job.ScriptPath)
		if sp != "sampler" && sp != "estimator" {
			return nil, p, backends.Invalid("jobdata.jobScript", "%q is not a primitive: with scriptLocation remote the script names the program, sampler or estimator (custom programs are no longer supported)", job.ScriptPath)
		}
		if program != "" && program != sp {
			return nil, p, backends.Invalid("jobproperties", "program_id %q contradicts jobdata.jobScript %q", program, sp)
		}
		program = sp
	}
	if program == "" {
		return nil, p, backends.Invalid("jobproperties", "program_id is required: sampler or estimator")
	}
	if p.Backend == "" {
		return nil, p, backends.Invalid("jobproperties", "backend is required: the QPU to run on, e.g. ibm_torino")
	}
	if !validKey(job.Key) {
		return nil, p, backends.Invalid("idempotency key", "%q is not a plain name", job.Key)
	}
	params := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(job.Parameters)) > 0 {
		if err := json.Unmarshal(job.Parameters, &params); err != nil {
			return nil, p, backends.Invalid("jobdata.jobParameters", "must be a JSON object (the primitive's params: pubs, options, version): %v", err)
		}
		if inner, ok := params["params"]; ok && len(params) == 1 {
			params = map[string]json.RawMessage{}
			if err := json.Unmarshal(inner, &params); err != nil {
				return nil, p, backends.Invalid("jobdata.jobParameters", "params must be a JSON object: %v", err)
			}
		}
	}
	_, hasPubs := params["pubs"]
	circuit := strings.TrimSpace(job.Script)
	switch {
	case circuit != "" && hasPubs:
		return nil, p, backends.Invalid("jobdata.jobScript", "give the circuit either as the script or inside jobdata.jobParameters' pubs, not both")
	case circuit != "" && !strings.Contains(circuit, "OPENQASM"):
		return nil, p, backends.Invalid("jobdata.jobScript", "an inline script for the quantum backend is an OpenQASM 3 circuit (it starts with OPENQASM 3.0;)")
	case circuit != "" && program != "sampler":
		return nil, p, backends.Invalid("jobdata.jobParameters", "the estimator needs observables: give pubs in jobdata.jobParameters")
	case circuit != "":
		pub := []any{job.Script}
		if p.Shots != nil {
			pub = append(pub, []any{}, *p.Shots)
		}
		params["pubs"], _ = json.Marshal([]any{pub})
		if _, ok := params["version"]; !ok {
			params["version"] = json.RawMessage("2")
		}
	case !hasPubs:
		return nil, p, backends.Invalid("jobdata.jobParameters", "no pubs: give the primitive's params ({\"pubs\":[...],\"version\":2}) or an OpenQASM 3 circuit as the script")
	case p.Shots != nil:
		return nil, p, backends.Invalid("jobproperties", "shots applies only to a circuit given as the script; put shots in the pubs")
	}
	pbuf, _ := json.Marshal(params)
	tags := []string{job.Key}
	for _, t := range p.Tags {
		if t != job.Key {
			tags = append(tags, t)
		}
	}
	return &submitBody{ProgramID: program, Backend: p.Backend, Params: pbuf, Tags: tags, LogLevel: p.LogLevel, Cost: p.Cost,
		SessionID: p.SessionID, Private: p.Private, CalibrationID: p.CalibrationID}, p, nil
}

func validKey(k string) bool { return jobIDRE.MatchString(k) }

// remember keeps the IAM URL and API version of the job's properties for
// later requests.
func (b *Backend) remember(p Properties) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.IAMURL != "" {
		b.iamURL = p.IAMURL
	}
	if p.APIVersion != "" {
		b.apiVersion = p.APIVersion
	}
}

// Validate checks the job and the credentials' presence without a request.
func (b *Backend) Validate(job backends.Job) error {
	_, p, err := buildSubmit(job)
	if err != nil {
		return err
	}
	b.remember(p)
	_, _, err = b.credentials()
	return err
}

// Submit runs the primitive job and returns its id.
func (b *Backend) Submit(ctx context.Context, job backends.Job) (string, error) {
	body, p, err := buildSubmit(job)
	if err != nil {
		return "", err
	}
	b.remember(p)
	buf, err := b.do(ctx, http.MethodPost, "/jobs", nil, body)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.op == "POST /jobs" && !errors.Is(err, backends.ErrAuth) && !errors.Is(err, backends.ErrTransient) {
			switch ae.status {
			case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity:
				field := "jobproperties"
				if l := strings.ToLower(ae.msg); strings.Contains(l, "param") || strings.Contains(l, "pub") || strings.Contains(l, "circuit") {
					field = "jobdata.jobParameters"
				}
				return "", backends.Invalid(field, "IBM Quantum refused the job: %v", ae)
			case http.StatusConflict:
				return "", fmt.Errorf("IBM Quantum refused the job (the instance's usage limit?): %w", ae)
			}
		}
		return "", err
	}
	var r struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(buf, &r); err != nil {
		return "", fmt.Errorf("POST /jobs: cannot read the answer: %w", err)
	}
	if !jobIDRE.MatchString(r.ID) {
		return "", fmt.Errorf("POST /jobs: HTTP 200 without a job id: %.200s", string(buf))
	}
	return r.ID, nil
}

// jobResponse holds the fields of JobResponse that matter.
type jobResponse struct {
	ID      string `json:"id"`
	Backend string `json:"backend"`
	Status  string `json:"status"`
	State   *struct {
		Status         string          `json:"status"`
		Reason         string          `json:"reason"`
		ReasonCode     json.RawMessage `json:"reason_code"`
		ReasonCodeOld  json.RawMessage `json:"reasonCode"`
		ReasonSolution string          `json:"reason_solution"`
	} `json:"state"`
	Created string   `json:"created"`
	Tags    []string `json:"tags"`
}

func rawScalar(r json.RawMessage) string {
	return strings.Trim(strings.TrimSpace(string(r)), `"`)
}

// ranTooLong is reason code 1305: the job hit its maximum execution time.
const ranTooLong = "1305"

func (j *jobResponse) status() (backends.Status, error) {
	raw := j.Status
	var st backends.Status
	if j.State != nil {
		if j.State.Status != "" {
			raw = j.State.Status
		}
		st.Reason = rawScalar(j.State.ReasonCode)
		if st.Reason == "" || st.Reason == "null" {
			st.Reason = rawScalar(j.State.ReasonCodeOld)
		}
		if st.Reason == "null" {
			st.Reason = ""
		}
		st.Message = j.State.Reason
		if s := strings.TrimSpace(j.State.ReasonSolution); s != "" {
			st.Message = strings.TrimSpace(st.Message + " (" + s + ")")
		}
	}
	st.Raw = raw
	if t, err := time.Parse(time.RFC3339Nano, j.Created); err == nil {
		st.SubmitTime = t.UTC()
	}
	l := strings.ToLower(strings.TrimSpace(raw))
	switch {
	case l == "queued" || l == "initializing" || l == "validating":
		st.State = backends.Pending
	case l == "running":
		st.State = backends.Running
	case l == "completed":
		st.State = backends.Done
	case l == "failed" || l == "error":
		st.State = backends.Failed
	case strings.HasPrefix(l, "cancelled") || strings.HasPrefix(l, "canceled"):
		if st.Reason == ranTooLong || strings.Contains(l, "ran too long") || strings.Contains(strings.ToLower(st.Message), "ran too long") {
			st.State = backends.Failed
			if st.Reason == "" {
				st.Reason = ranTooLong
			}
			if st.Message == "" {
				st.Message = "ran too long: the maximum execution time was reached"
			}
		} else {
			st.State = backends.Killed
		}
	case l == "":
		return st, errors.New("IBM Quantum answered a job without a status")
	default:
		return st, fmt.Errorf("unknown IBM Quantum job status %q", raw)
	}
	return st, nil
}

// Status reads the job.
func (b *Backend) Status(ctx context.Context, id string) (backends.Status, error) {
	if !jobIDRE.MatchString(id) {
		return backends.Status{}, fmt.Errorf("IBM Quantum job id %q is malformed: %w", id, backends.ErrNotFound)
	}
	buf, err := b.do(ctx, http.MethodGet, "/jobs/"+id, url.Values{"exclude_params": {"true"}}, nil)
	if err != nil {
		return backends.Status{}, notFound(err)
	}
	var j jobResponse
	if err := json.Unmarshal(buf, &j); err != nil {
		return backends.Status{}, fmt.Errorf("GET /jobs/%s: cannot read the answer: %w", id, err)
	}
	st, err := j.status()
	if err != nil {
		return st, fmt.Errorf("GET /jobs/%s: %w", id, err)
	}
	if st.State.Final() {
		b.times(ctx, id, &st)
	}
	return st, nil
}

// times fills start and end from the job's metrics (best effort).
func (b *Backend) times(ctx context.Context, id string, st *backends.Status) {
	buf, err := b.do(ctx, http.MethodGet, "/jobs/"+id+"/metrics", nil, nil)
	if err != nil {
		b.log.Debug("no metrics for the job's times", "job_id", id, "err", err)
		return
	}
	var m struct {
		Timestamps struct {
			Created, Running, Finished string
		} `json:"timestamps"`
	}
	if json.Unmarshal(buf, &m) != nil {
		return
	}
	parse := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}
		}
		return t.UTC()
	}
	st.StartTime, st.EndTime = parse(m.Timestamps.Running), parse(m.Timestamps.Finished)
	if st.SubmitTime.IsZero() {
		st.SubmitTime = parse(m.Timestamps.Created)
	}
}

func notFound(err error) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ae, backends.ErrNotFound)
	}
	return err
}

// Cancel cancels the job; a job that has ended is fine.
func (b *Backend) Cancel(ctx context.Context, id string) error {
	if !jobIDRE.MatchString(id) {
		return fmt.Errorf("IBM Quantum job id %q is malformed: %w", id, backends.ErrNotFound)
	}
	_, err := b.do(ctx, http.MethodPost, "/jobs/"+id+"/cancel", nil, nil)
	if err == nil {
		return nil
	}
	var ae *apiError
	if !errors.As(err, &ae) || ae.status == http.StatusNotFound || ae.status >= 500 || ae.status == http.StatusTooManyRequests ||
		ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden {
		return notFound(err)
	}
	if st, serr := b.Status(ctx, id); serr == nil && st.State.Final() {
		return nil
	}
	return err
}

// FindByKey returns the job tagged with key: GET /jobs?tags=<key>, checked
// again here.
func (b *Backend) FindByKey(ctx context.Context, key string) (string, error) {
	if !validKey(key) {
		return "", nil
	}
	buf, err := b.do(ctx, http.MethodGet, "/jobs", url.Values{"tags": {key}, "limit": {"50"}, "exclude_params": {"true"}}, nil)
	if err != nil {
		return "", err
	}
	var list struct {
		Jobs []jobResponse `json:"jobs"`
	}
	if len(bytes.TrimSpace(buf)) > 0 && bytes.TrimSpace(buf)[0] == '[' {
		err = json.Unmarshal(buf, &list.Jobs)
	} else {
		err = json.Unmarshal(buf, &list)
	}
	if err != nil {
		return "", fmt.Errorf("GET /jobs: cannot read the answer: %w", err)
	}
	var found []jobResponse
	for _, j := range list.Jobs {
		for _, t := range j.Tags {
			if t == key && jobIDRE.MatchString(j.ID) {
				found = append(found, j)
				break
			}
		}
	}
	if len(found) == 0 {
		return "", nil
	}
	sort.SliceStable(found, func(i, k int) bool { return found[i].Created < found[k].Created })
	if len(found) > 1 {
		ids := make([]string, len(found))
		for i, j := range found {
			ids[i] = j.ID
		}
		b.log.Warn("several IBM Quantum jobs carry this idempotency key; adopting the first", "key", key, "jobs", strings.Join(ids, ","), "adopted", found[0].ID)
	}
	return found[0].ID, nil
}

// FetchOutput writes one of Outputs: "results", "logs" or "metrics".
func (b *Backend) FetchOutput(ctx context.Context, id, name string, w io.Writer) error {
	if !jobIDRE.MatchString(id) {
		return fmt.Errorf("IBM Quantum job id %q is malformed: %w", id, backends.ErrNotFound)
	}
	switch name {
	case "results", "logs", "metrics":
	default:
		return backends.Invalid("s3upload.files", "the quantum backend offers %s, not %q", strings.Join(Outputs, ", "), name)
	}
	resp, err := b.open(ctx, http.MethodGet, "/jobs/"+id+"/"+name, nil, nil)
	if err != nil {
		return notFound(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return backends.Transient(fmt.Errorf("GET /jobs/%s/%s: %w", id, name, err))
	}
	return nil
}

func (b *Backend) credentials() (crn, apikey string, err error) {
	if b.creds == nil {
		return "", "", backends.Invalid("credentials", "the quantum backend needs a Secret with crn (the service instance's CRN) and apikey (an IBM Cloud API key)")
	}
	crn, err = b.creds.Get("crn", "serviceCRN", "service-crn", "username")
	if err != nil {
		return "", "", err
	}
	apikey, err = b.creds.Get("apikey", "api-key", "apiKey", "password")
	if err != nil {
		return "", "", err
	}
	if !strings.HasPrefix(crn, "crn:") {
		return "", "", backends.Invalid("credentials", "the CRN must look like crn:v1:bluemix:public:quantum-computing:REGION:a/ACCOUNT:INSTANCE::")
	}
	if apikey == "" {
		return "", "", backends.Invalid("credentials", "the API key is empty")
	}
	return crn, apikey, nil
}

// RateLimitError is a 429 answer; RetryAfter is the server's Retry-After
// (zero when it gave none). It is wrapped as backends.ErrTransient.
type RateLimitError struct {
	Err        *apiError
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	s := e.Err.Error() + " (rate limited: IBM Quantum accepts 5 jobs a minute per user"
	if e.RetryAfter > 0 {
		s += "; Retry-After: " + e.RetryAfter.String()
	}
	return s + ")"
}

func (e *RateLimitError) Unwrap() error { return e.Err }

// apiError is a non-2xx answer of the service or of IAM.
type apiError struct {
	op         string
	status     int
	code       string
	msg        string
	trace      string
	retryAfter time.Duration
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d", e.op, e.status)
	if e.msg != "" {
		s += ": " + e.msg
	} else {
		s += ": " + http.StatusText(e.status)
	}
	if e.code != "" {
		s += " (code " + e.code + ")"
	}
	if e.trace != "" {
		s += " [trace " + e.trace + "]"
	}
	return s
}

// readAPIError reads the {"errors":[…],"trace"} body (or IAM's
// {"errorCode","errorMessage"}, or text).
func readAPIError(op string, resp *http.Response) *apiError {
	buf := httpx.ReadError(resp)
	e := &apiError{op: op, status: resp.StatusCode, retryAfter: httpx.RetryAfter(resp.Header, time.Now())}
	var body struct {
		Errors []struct {
			Code     json.RawMessage `json:"code"`
			Message  string          `json:"message"`
			Solution string          `json:"solution"`
		} `json:"errors"`
		Trace        string `json:"trace"`
		ErrorCode    string `json:"errorCode"`
		ErrorMessage string `json:"errorMessage"`
		Message      string `json:"message"`
		Detail       string `json:"detail"`
	}
	if json.Unmarshal(buf, &body) == nil {
		e.trace = body.Trace
		var msgs, codes []string
		for _, x := range body.Errors {
			m := x.Message
			if x.Solution != "" {
				m += " (" + x.Solution + ")"
			}
			msgs = append(msgs, m)
			if c := rawScalar(x.Code); c != "" && c != "null" {
				codes = append(codes, c)
			}
		}
		e.msg, e.code = strings.Join(msgs, "; "), strings.Join(codes, ",")
		if e.msg == "" {
			e.msg = firstNonEmpty(body.ErrorMessage, body.Message, body.Detail)
			e.code = body.ErrorCode
		}
		return e
	}
	if s := strings.TrimSpace(string(buf)); s != "" && !strings.HasPrefix(s, "<") {
		if len(s) > 300 {
			s = s[:300] + "..."
		}
		e.msg = s
	}
	return e
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// classify turns an apiError into what the runner understands.
func classify(e *apiError) error {
	switch {
	case e.status == http.StatusTooManyRequests:
		return backends.Transient(&RateLimitError{Err: e, RetryAfter: e.retryAfter})
	case e.status >= 500 || e.status == http.StatusRequestTimeout:
		return backends.Transient(e)
	case httpx.IsAuth(e.status):
		// Never the server's words: an echo of the request would carry the
		// bearer token (see httpx.AuthError).
		return httpx.AuthError(e.op, e.status, "IBM Quantum refused the IAM token made from the API key, or the service CRN"+httpx.Code(e.code), "apikey", "crn")
	}
	return e
}

type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	ExpiresIn   int64  `json:"expires_in"`
	Expiration  int64  `json:"expiration"`
}

// bearer returns an IAM token for the current API key, making one when
// there is none, it is about to expire, or the key changed.
func (b *Backend) bearer(ctx context.Context, apikey string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	iam := b.iamURL
	if iam == "" {
		if v, err := b.creds.Get("iam_url", "iamurl"); err == nil && v != "" {
			iam = v
		} else {
			iam = DefaultIAMURL
		}
	}
	if b.token != "" && b.tokenFor == iam+"\x00"+apikey && b.now().Before(b.tokenRenew) {
		return b.token, nil
	}
	form := url.Values{"grant_type": {"urn:ibm:params:oauth:grant-type:apikey"}, "apikey": {apikey}}.Encode()
	rctx, cancel := context.WithTimeout(ctx, b.requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, iam, strings.NewReader(form))
	if err != nil {
		return "", backends.Invalid("jobproperties", "iam_url: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return "", httpx.Transport(ctx, "POST IAM token", err)
	}
	if resp.StatusCode != http.StatusOK {
		e := readAPIError("POST IAM token", resp)
		if e.status == http.StatusBadRequest || e.status == http.StatusUnauthorized || e.status == http.StatusForbidden {
			return "", httpx.AuthError(e.op, e.status, "IAM refused the API key"+httpx.Code(e.code), "apikey")
		}
		return "", classify(e)
	}
	defer resp.Body.Close()
	var t tokenAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&t); err != nil || t.AccessToken == "" {
		return "", fmt.Errorf("POST IAM token: an answer without access_token (%v)", err)
	}
	now := b.now()
	exp := now.Add(time.Hour)
	switch {
	case t.Expiration > 0:
		exp = time.Unix(t.Expiration, 0)
	case t.ExpiresIn > 0:
		exp = now.Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	backends.AddSecret(b.secrets, t.AccessToken)
	b.token, b.tokenFor = t.AccessToken, iam+"\x00"+apikey
	b.tokenRenew = exp.Add(-min(5*time.Minute, exp.Sub(now)/2))
	return b.token, nil
}

func (b *Backend) dropToken(tok string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.token == tok {
		b.token = ""
	}
}

// open sends one service request (JSON body when body is not nil); a 401
// makes a new IAM token and sends it once more. A 2xx answer comes back
// open; any other status is a classified error.
func (b *Backend) open(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	op := method + " " + path
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		crn, apikey, err := b.credentials()
		if err != nil {
			return nil, err
		}
		tok, err := b.bearer(ctx, apikey)
		if err != nil {
			return nil, err
		}
		u := b.base + path
		if len(query) > 0 {
			u += "?" + query.Encode()
		}
		req := httpx.Request{Method: method, URL: u, Timeout: b.requestTimeout, Header: http.Header{}}
		if payload != nil {
			req.Body = func() (io.Reader, error) { return bytes.NewReader(payload), nil }
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Service-CRN", crn)
		b.mu.Lock()
		req.Header.Set("IBM-API-Version", orDefault(b.apiVersion, DefaultAPIVersion))
		b.mu.Unlock()
		req.Header.Set("Accept", "application/json")
		resp, err := httpx.Open(ctx, b.client, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		e := readAPIError(op, resp)
		if e.status == http.StatusUnauthorized && attempt == 1 {
			b.dropToken(tok)
			b.log.Debug("IBM Quantum refused the IAM token; making a new one", "request", op)
			continue
		}
		return nil, classify(e)
	}
}

// do is open followed by reading the whole answer.
func (b *Backend) do(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	resp, err := b.open(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	return httpx.ReadAll(ctx, method+" "+path, resp, httpx.MaxBody)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.Finder        = (*Backend)(nil)
	_ backends.Validator     = (*Backend)(nil)
	_ backends.OutputFetcher = (*Backend)(nil)
)
