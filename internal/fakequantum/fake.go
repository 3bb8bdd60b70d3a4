// Package fakequantum is a fake IBM Quantum Compute service (IAM and the
// Qiskit Runtime REST API, as the reference describes them) for the
// quantum backend's tests (New) and for a person trying that backend
// without an IBM account (Listen, started by hack/fakes). It is never
// linked into bridge-runner.
package fakequantum

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bridge-runner/bridge-runner/internal/fakeserve"
)

// Server is an httptest IBM Quantum Compute service: IAM's token endpoint
// at /identity/token and the Qiskit Runtime REST API at /api/v1, as
// backend-apis.md §4 describes them, in the wire shape of API version
// 2026-04-15 (current-apis.md, checked 2026-11-25): bearer tokens that
// expire, Service-CRN checked, IBM-API-Version checked against the versions
// IBM lists (a deprecated one is refused after its sunset, by the fake's
// clock), strict submit bodies, the state object with reason codes, the
// {"errors":[…],"trace"} error shape, the 5-jobs-a-minute rate limit with
// Retry-After, 204 cancel, results, logs and metrics. What 2026-04-15
// dropped is gone: GET /jobs/{id}/transpiled_circuits answers 404 like any
// route the service does not have, /jobs and /metrics carry no bss and no
// usage, and circuits_execution_time_ns is at the root of /metrics.
// GET /backends/{name}/status answers state, status and length_queue. Faults
// can be injected per request.
type Server struct {
	*httptest.Server
	t testing.TB

	Mu          sync.Mutex
	APIKey, CRN string
	Tokens      map[string]time.Time
	TokenTTL    time.Duration
	IAMCalls    int
	Versions    map[string]time.Time // accepted IBM-API-Version → sunset (zero: live)
	Now         func() time.Time
	BackendsOK  map[string]bool
	Paused      map[string]bool // backends answering state false, status "paused"
	Queued      map[string]int  // other users' jobs waiting for a backend
	Jobs        map[string]*Job
	Order       []string
	SubmitTimes []time.Time
	RateLimit   int // jobs a minute; 0 = none
	IgnoreTags  bool
	Lists       []url.Values // the queries of GET /jobs
	Faults      []*Fault
	Requests    []string
	Headers     []http.Header
	RunFor      time.Duration // Listen's: how long a job runs; 0: jobs keep the state set
}

type Job struct {
	ID, Program, Backend string
	Params               json.RawMessage
	Tags                 []string
	Status               string
	Reason               string
	ReasonCode           any
	Created              time.Time
	Body                 map[string]json.RawMessage
	Logs                 string // GET /jobs/{id}/logs: the text so far
}

type Fault struct {
	Method, Path string
	Status       int
	Body         string
	RetryAfter   string
	Drop         bool
	Times        int
}

// New starts the fake for a test (TLS, closed when the test ends): jobs
// stay as submitted until the test changes them.
func New(t testing.TB) *Server {
	f := newServer()
	f.t = t
	f.Server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// Listen starts the fake for a person trying the quantum backend
// (hack/fakes): plain HTTP on addr, which should be a loopback address,
// and jobs that run as on the service: Running once submitted, Completed
// runFor after their submit.
func Listen(addr string, runFor time.Duration) (*Server, error) {
	f := newServer()
	f.RunFor = runFor
	srv, err := fakeserve.Listen(addr, http.HandlerFunc(f.serve))
	if err != nil {
		return nil, err
	}
	f.Server = srv
	return f, nil
}

func newServer() *Server {
	return &Server{APIKey: "test-api-key-0123456789",
		CRN:    "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::",
		Tokens: map[string]time.Time{}, TokenTTL: time.Hour,
		Versions: map[string]time.Time{"2025-05-01": sunset("2027-01-01"), "2026-02-01": sunset("2027-02-01"),
			"2026-02-15": sunset("2027-02-15"), "2026-03-15": sunset("2027-03-15"), "2026-04-15": {}}, Now: time.Now, BackendsOK: map[string]bool{"ibm_torino": true, "ibm_kyiv": true},
		Jobs: map[string]*Job{}, RateLimit: 5}
}

// advance moves the jobs of a fake started with Listen on (a test's fake
// has RunFor 0 and sets its jobs' states itself).
func (f *Server) advance() {
	if f.RunFor <= 0 {
		return
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for _, j := range f.Jobs {
		switch {
		case j.Status != "Queued" && j.Status != "Running":
		case time.Since(j.Created) >= f.RunFor:
			j.Status = "Completed"
		default:
			j.Status = "Running"
		}
	}
}

// sunset is a version's sunset date as GET /v1/versions gives it.
func sunset(d string) time.Time {
	t, err := time.Parse(time.DateOnly, d)
	if err != nil {
		panic(err)
	}
	return t
}

func (f *Server) AddFault(fl *Fault) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Faults = append(f.Faults, fl)
}

func (f *Server) Set(id string, fn func(j *Job)) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	fn(f.Jobs[id])
}

func (f *Server) Count(prefix string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for _, r := range f.Requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func (f *Server) ExpireTokens() {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for k := range f.Tokens {
		f.Tokens[k] = time.Now().Add(-time.Second)
	}
}

// apiErr writes the ErrorContainer shape.
func apiErr(w http.ResponseWriter, status int, code any, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]any{{"code": code, "message": msg, "solution": "",
			"more_info": "https://cloud.ibm.com/apidocs/quantum-computing#error-handling"}},
		"trace": "0f3c1a2b-trace"})
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	if f.injectFault(w, r) {
		return
	}
	if r.URL.Path == "/identity/token" {
		f.iam(w, r)
		return
	}
	p, ok := strings.CutPrefix(r.URL.Path, "/api/v1")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if !f.authorized(w, r) {
		return
	}
	f.route(w, r, strings.Split(strings.Trim(p, "/"), "/"))
}

// route serves an authorized request for /api/v1/<parts>.
func (f *Server) route(w http.ResponseWriter, r *http.Request, parts []string) {
	f.advance()
	if len(parts) == 3 && parts[0] == "backends" && parts[2] == "status" && r.Method == http.MethodGet {
		f.backendStatus(w, parts[1])
		return
	}
	if parts[0] != "jobs" {
		apiErr(w, http.StatusNotFound, 1200, "Not found")
		return
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodPost:
		f.submit(w, r)
	case len(parts) == 1 && r.Method == http.MethodGet:
		f.list(w, r)
	case len(parts) == 2 && r.Method == http.MethodGet:
		f.get(w, r, parts[1])
	case len(parts) == 2 && r.Method == http.MethodDelete:
		f.Mu.Lock()
		delete(f.Jobs, parts[1])
		f.Mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case len(parts) == 3 && parts[2] == "cancel" && r.Method == http.MethodPost:
		f.cancel(w, r, parts[1])
	case len(parts) == 3 && r.Method == http.MethodGet:
		f.output(w, r, parts[1], parts[2])
	default:
		apiErr(w, http.StatusNotFound, 1200, "Not found")
	}
}

// injectFault records r and answers it with the first matching Fault, if
// any.
func (f *Server) injectFault(w http.ResponseWriter, r *http.Request) bool {
	f.Mu.Lock()
	f.Requests = append(f.Requests, r.Method+" "+r.URL.Path)
	f.Headers = append(f.Headers, r.Header.Clone())
	var fl *Fault
	for _, c := range f.Faults {
		if c.Times >= 0 && (c.Method == "" || c.Method == r.Method) && strings.HasSuffix(r.URL.Path, c.Path) {
			fl = c
			if fl.Times > 0 {
				if fl.Times--; fl.Times == 0 {
					fl.Times = -1
				}
			}
			break
		}
	}
	f.Mu.Unlock()
	if fl == nil {
		return false
	}
	if fl.Drop {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return true
	}
	if fl.RetryAfter != "" {
		w.Header().Set("Retry-After", fl.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(fl.Status)
	io.WriteString(w, fl.Body)
	return true
}

func (f *Server) iam(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	body, _ := io.ReadAll(r.Body)
	form, err := url.ParseQuery(string(body))
	iamErr := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"errorCode": code, "errorMessage": msg, "context": map[string]string{"requestId": "r1"}})
	}
	if r.Method != http.MethodPost || mt != "application/x-www-form-urlencoded" || err != nil {
		iamErr(400, "BXNIM0109E", "Property missing or empty. Operation not allowed.")
		return
	}
	if form.Get("grant_type") != "urn:ibm:params:oauth:grant-type:apikey" {
		iamErr(400, "BXNIM0109E", "Unsupported grant_type.")
		return
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.IAMCalls++
	if form.Get("apikey") != f.APIKey {
		iamErr(400, "BXNIM0415E", "Provided API key could not be found.")
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := "eyJ" + hex.EncodeToString(b)
	exp := time.Now().Add(f.TokenTTL)
	f.Tokens[tok] = exp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "refresh_token": "not_supported", "token_type": "Bearer",
		"expires_in": int(f.TokenTTL.Seconds()), "expiration": exp.Unix(), "scope": "ibm_openid"})
}

func (f *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.Mu.Lock()
	exp, known := f.Tokens[tok]
	crnOK := r.Header.Get("Service-CRN") == f.CRN
	v := r.Header.Get("IBM-API-Version")
	end, listed := f.Versions[v]
	vOK := v == "" || listed && (end.IsZero() || f.Now().Before(end))
	f.Mu.Unlock()
	switch {
	case !ok || !known || time.Now().After(exp):
		apiErr(w, http.StatusUnauthorized, 1010, "Invalid or expired token.")
	case !crnOK:
		apiErr(w, http.StatusForbidden, 1011, "Service instance not found or not accessible: check the Service-CRN header.")
	case !vOK:
		apiErr(w, http.StatusBadRequest, 1012, "Unsupported IBM-API-Version "+v+".")
	default:
		return true
	}
	return false
}

var submitKeys = map[string]bool{"program_id": true, "backend": true, "params": true, "tags": true, "log_level": true, "cost": true,
	"session_id": true, "private": true, "calibration_id": true, "start_session": true, "session_time": true}

func (f *Server) submit(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		apiErr(w, 400, 1100, "Content-Type must be application/json")
		return
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		apiErr(w, 400, 1101, "Invalid JSON: "+err.Error())
		return
	}
	for k := range body {
		if !submitKeys[k] {
			apiErr(w, 400, 1102, "Unknown field: "+k)
			return
		}
	}
	var program, backend string
	_ = json.Unmarshal(body["program_id"], &program)
	_ = json.Unmarshal(body["backend"], &backend)
	var tags []string
	if raw, ok := body["tags"]; ok {
		if err := json.Unmarshal(raw, &tags); err != nil {
			apiErr(w, 400, 1103, "tags must be an array of strings")
			return
		}
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(body["params"], &params); err != nil || params["pubs"] == nil {
		apiErr(w, 400, 1104, "Invalid params: pubs are required")
		return
	}
	if program != "sampler" && program != "estimator" {
		apiErr(w, 400, 1105, "program_id must be sampler or estimator")
		return
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if !f.BackendsOK[backend] {
		apiErr(w, 404, "not_found", "Backend "+backend+" not found.")
		return
	}
	now := time.Now()
	if f.RateLimit > 0 {
		var recent []time.Time
		for _, t := range f.SubmitTimes {
			if now.Sub(t) < time.Minute {
				recent = append(recent, t)
			}
		}
		f.SubmitTimes = recent
		if len(recent) >= f.RateLimit {
			w.Header().Set("Retry-After", fmt.Sprint(int(time.Minute-now.Sub(recent[0]))/int(time.Second)+1))
			apiErr(w, http.StatusTooManyRequests, 1008, "Rate limit exceeded: 5 jobs per minute.")
			return
		}
		f.SubmitTimes = append(f.SubmitTimes, now)
	}
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	id := "c" + hex.EncodeToString(b)[:19]
	f.Jobs[id] = &Job{ID: id, Program: program, Backend: backend, Params: body["params"], Tags: tags, Status: "Queued",
		Created: now.UTC(), Body: body}
	f.Order = append(f.Order, id)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "backend": backend})
}

func (f *Server) jobJSON(j *Job, withParams bool) map[string]any {
	state := map[string]any{"status": j.Status}
	if j.Reason != "" {
		state["reason"] = j.Reason
	}
	if j.ReasonCode != nil {
		state["reason_code"] = j.ReasonCode
	}
	m := map[string]any{"id": j.ID, "backend": j.Backend, "state": state, "status": j.Status,
		"program": map[string]string{"id": j.Program}, "created": j.Created.Format(time.RFC3339Nano),
		"tags": j.Tags, "private": false} // no bss, no usage since 2026-03-15
	if withParams {
		m["params"] = j.Params
	}
	return m
}

// list serves GET /jobs as qiskit-ibm-runtime's jobs_get uses it: the
// instance's jobs newest first, filtered by tags (all of them), pending
// ("true": Queued and Running; "false": the final states), paged by limit
// and offset, as {"jobs":[…],"count":N,"limit","offset"} where count is the
// number of matching jobs before paging. There is no filter by id. Without
// a limit every matching job is listed (the server's default page size is
// not documented).
func (f *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset, ok := pageParams(q)
	if !ok {
		apiErr(w, http.StatusBadRequest, 1106, "limit and offset must be non-negative integers")
		return
	}
	f.Mu.Lock()
	f.Lists = append(f.Lists, q)
	var out []any
	for i := len(f.Order) - 1; i >= 0; i-- { // newest first
		j := f.Jobs[f.Order[i]]
		if j != nil && f.listed(j, q) {
			out = append(out, f.jobJSON(j, q.Get("exclude_params") != "true"))
		}
	}
	f.Mu.Unlock()
	count := len(out)
	out = out[min(offset, count):]
	if limit >= 0 {
		out = out[:min(limit, len(out))]
	}
	if out == nil {
		out = []any{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jobs": out, "count": count, "limit": max(limit, 0), "offset": offset})
}

// pageParams reads limit (-1 when absent) and offset.
func pageParams(q url.Values) (limit, offset int, ok bool) {
	limit = -1
	for name, p := range map[string]*int{"limit": &limit, "offset": &offset} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return 0, 0, false
			}
			*p = n
		}
	}
	return limit, offset, true
}

// listed reports whether j matches the tags and pending filters of q.
func (f *Server) listed(j *Job, q url.Values) bool {
	for _, t := range q["tags"] {
		if !slices.Contains(j.Tags, t) && !f.IgnoreTags {
			return false
		}
	}
	active := j.Status == "Queued" || j.Status == "Running"
	switch q.Get("pending") {
	case "true":
		return active
	case "false":
		return !active
	}
	return true
}

func (f *Server) get(w http.ResponseWriter, r *http.Request, id string) {
	f.Mu.Lock()
	j := f.Jobs[id]
	var m map[string]any
	if j != nil {
		m = f.jobJSON(j, r.URL.Query().Get("exclude_params") != "true")
	}
	f.Mu.Unlock()
	if j == nil {
		apiErr(w, http.StatusNotFound, 1291, "Job not found. Job ID: "+id)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m)
}

func (f *Server) cancel(w http.ResponseWriter, r *http.Request, id string) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	j := f.Jobs[id]
	switch {
	case j == nil:
		apiErr(w, http.StatusNotFound, 1291, "Job not found. Job ID: "+id)
	case j.Status != "Queued" && j.Status != "Running":
		apiErr(w, http.StatusConflict, 1209, "Job "+id+" is in a final state and cannot be cancelled.")
	default:
		j.Status, j.Reason = "Cancelled", "Job was cancelled by the user"
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *Server) output(w http.ResponseWriter, r *http.Request, id, what string) {
	f.Mu.Lock()
	j := f.Jobs[id]
	var status string
	var created time.Time
	if j != nil {
		status, created = j.Status, j.Created
	}
	f.Mu.Unlock()
	if j == nil {
		apiErr(w, http.StatusNotFound, 1291, "Job not found. Job ID: "+id)
		return
	}
	switch what {
	case "transpiled_circuits":
		// Dropped on 2026-02-01: the service answers as for any route it
		// does not have.
		apiErr(w, http.StatusNotFound, 1200, "Not found")
	case "results":
		if status != "Completed" {
			apiErr(w, http.StatusNotFound, 1292, "Results not found for job "+id)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"__type__":"PrimitiveResult","__value__":{"pub_results":[{"__type__":"SamplerPubResult","__value__":{"data":{"c":{"__type__":"BitArray","__value__":{"array":{"__type__":"ndarray","__value__":"AAE="},"num_bits":2}}}}}],"metadata":{"version":2}}}`)
	case "logs":
		f.Mu.Lock()
		logs := j.Logs
		f.Mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, logs)
	case "metrics":
		w.Header().Set("Content-Type", "application/json")
		ts := map[string]any{"created": created.Format(time.RFC3339Nano)}
		if status != "Queued" {
			ts["running"] = created.Add(2 * time.Second).Format(time.RFC3339Nano)
		}
		if status == "Completed" || status == "Failed" || status == "Cancelled" {
			ts["finished"] = created.Add(5 * time.Second).Format(time.RFC3339Nano)
		}
		m := map[string]any{"timestamps": ts} // no usage since 2026-03-15
		if status != "Queued" {
			m["circuits_execution_time_ns"] = 2_500_000_000 // at the root since 2026-04-15
		}
		var buf bytes.Buffer
		_ = json.NewEncoder(&buf).Encode(m)
		w.Write(buf.Bytes())
	default:
		apiErr(w, http.StatusNotFound, 1200, "Not found")
	}
}

// backendStatus serves GET /backends/{name}/status in the shape
// qiskit-ibm-runtime reads (api/rest/cloud_backend.py): state (operational),
// status, message, length_queue (the jobs waiting: ours Queued on that
// backend and other users'), backend_version; an unknown backend is 404
// with the string code not_found, as for a submit to it.
func (f *Server) backendStatus(w http.ResponseWriter, name string) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if !f.BackendsOK[name] {
		apiErr(w, 404, "not_found", "Backend "+name+" not found.")
		return
	}
	queue := f.Queued[name]
	for _, j := range f.Jobs {
		if j.Backend == name && j.Status == "Queued" {
			queue++
		}
	}
	state, status, msg := true, "active", "available"
	if f.Paused[name] {
		state, status, msg = false, "paused", "paused for calibration"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"state": state, "status": status, "message": msg,
		"length_queue": queue, "backend_version": "1.3.7"})
}

// AddJob puts a job into the fake as if submitted now (no rate limit).
func (f *Server) AddJob(status, reason string, code any) string {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	id := fmt.Sprintf("c%019d", len(f.Order)+1)
	f.Jobs[id] = &Job{ID: id, Program: "sampler", Backend: "ibm_torino", Params: []byte(`{}`), Status: status,
		Reason: reason, ReasonCode: code, Created: time.Now().UTC()}
	f.Order = append(f.Order, id)
	return id
}

// ListCalls counts GET /jobs (not /jobs/{id}).
func (f *Server) ListCalls() int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.Lists)
}
