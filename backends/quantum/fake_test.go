package quantum

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
)

// fakeIQP is an httptest IBM Quantum Compute service: IAM's token endpoint
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
type fakeIQP struct {
	*httptest.Server
	t testing.TB

	mu          sync.Mutex
	apikey, crn string
	tokens      map[string]time.Time
	tokenTTL    time.Duration
	iamCalls    int
	versions    map[string]time.Time // accepted IBM-API-Version → sunset (zero: live)
	now         func() time.Time
	backendsOK  map[string]bool
	paused      map[string]bool // backends answering state false, status "paused"
	queued      map[string]int  // other users' jobs waiting for a backend
	jobs        map[string]*iqpJob
	order       []string
	submitTimes []time.Time
	rateLimit   int // jobs a minute; 0 = none
	ignoreTags  bool
	lists       []url.Values // the queries of GET /jobs
	faults      []*fault
	requests    []string
	headers     []http.Header
}

type iqpJob struct {
	id, program, backend string
	params               json.RawMessage
	tags                 []string
	status               string
	reason               string
	reasonCode           any
	created              time.Time
	body                 map[string]json.RawMessage
	logs                 string // GET /jobs/{id}/logs: the text so far
}

type fault struct {
	method, path string
	status       int
	body         string
	retryAfter   string
	drop         bool
	times        int
}

func newFakeIQP(t testing.TB) *fakeIQP {
	f := &fakeIQP{t: t, apikey: "test-api-key-0123456789",
		crn:    "crn:v1:bluemix:public:quantum-computing:us-east:a/acct:inst::",
		tokens: map[string]time.Time{}, tokenTTL: time.Hour,
		versions: map[string]time.Time{"2025-05-01": sunset("2027-01-01"), "2026-02-01": sunset("2027-02-01"),
			"2026-02-15": sunset("2027-02-15"), "2026-03-15": sunset("2027-03-15"), "2026-04-15": {}}, now: time.Now, backendsOK: map[string]bool{"ibm_torino": true, "ibm_kyiv": true},
		jobs: map[string]*iqpJob{}, rateLimit: 5}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// sunset is a version's sunset date as GET /v1/versions gives it.
func sunset(d string) time.Time {
	t, err := time.Parse(time.DateOnly, d)
	if err != nil {
		panic(err)
	}
	return t
}

func (f *fakeIQP) addFault(fl *fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fl)
}

func (f *fakeIQP) set(id string, fn func(j *iqpJob)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.jobs[id])
}

func (f *fakeIQP) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeIQP) expireTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.tokens {
		f.tokens[k] = time.Now().Add(-time.Second)
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

func (f *fakeIQP) serve(w http.ResponseWriter, r *http.Request) {
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
func (f *fakeIQP) route(w http.ResponseWriter, r *http.Request, parts []string) {
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
		f.mu.Lock()
		delete(f.jobs, parts[1])
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case len(parts) == 3 && parts[2] == "cancel" && r.Method == http.MethodPost:
		f.cancel(w, r, parts[1])
	case len(parts) == 3 && r.Method == http.MethodGet:
		f.output(w, r, parts[1], parts[2])
	default:
		apiErr(w, http.StatusNotFound, 1200, "Not found")
	}
}

// injectFault records r and answers it with the first matching fault, if
// any.
func (f *fakeIQP) injectFault(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	f.headers = append(f.headers, r.Header.Clone())
	var fl *fault
	for _, c := range f.faults {
		if c.times >= 0 && (c.method == "" || c.method == r.Method) && strings.HasSuffix(r.URL.Path, c.path) {
			fl = c
			if fl.times > 0 {
				if fl.times--; fl.times == 0 {
					fl.times = -1
				}
			}
			break
		}
	}
	f.mu.Unlock()
	if fl == nil {
		return false
	}
	if fl.drop {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return true
	}
	if fl.retryAfter != "" {
		w.Header().Set("Retry-After", fl.retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(fl.status)
	io.WriteString(w, fl.body)
	return true
}

func (f *fakeIQP) iam(w http.ResponseWriter, r *http.Request) {
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
	f.mu.Lock()
	defer f.mu.Unlock()
	f.iamCalls++
	if form.Get("apikey") != f.apikey {
		iamErr(400, "BXNIM0415E", "Provided API key could not be found.")
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := "eyJ" + hex.EncodeToString(b)
	exp := time.Now().Add(f.tokenTTL)
	f.tokens[tok] = exp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "refresh_token": "not_supported", "token_type": "Bearer",
		"expires_in": int(f.tokenTTL.Seconds()), "expiration": exp.Unix(), "scope": "ibm_openid"})
}

func (f *fakeIQP) authorized(w http.ResponseWriter, r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	exp, known := f.tokens[tok]
	crnOK := r.Header.Get("Service-CRN") == f.crn
	v := r.Header.Get("IBM-API-Version")
	end, listed := f.versions[v]
	vOK := v == "" || listed && (end.IsZero() || f.now().Before(end))
	f.mu.Unlock()
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

func (f *fakeIQP) submit(w http.ResponseWriter, r *http.Request) {
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
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.backendsOK[backend] {
		apiErr(w, 404, "not_found", "Backend "+backend+" not found.")
		return
	}
	now := time.Now()
	if f.rateLimit > 0 {
		var recent []time.Time
		for _, t := range f.submitTimes {
			if now.Sub(t) < time.Minute {
				recent = append(recent, t)
			}
		}
		f.submitTimes = recent
		if len(recent) >= f.rateLimit {
			w.Header().Set("Retry-After", fmt.Sprint(int(time.Minute-now.Sub(recent[0]))/int(time.Second)+1))
			apiErr(w, http.StatusTooManyRequests, 1008, "Rate limit exceeded: 5 jobs per minute.")
			return
		}
		f.submitTimes = append(f.submitTimes, now)
	}
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	id := "c" + hex.EncodeToString(b)[:19]
	f.jobs[id] = &iqpJob{id: id, program: program, backend: backend, params: body["params"], tags: tags, status: "Queued",
		created: now.UTC(), body: body}
	f.order = append(f.order, id)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "backend": backend})
}

func (f *fakeIQP) jobJSON(j *iqpJob, withParams bool) map[string]any {
	state := map[string]any{"status": j.status}
	if j.reason != "" {
		state["reason"] = j.reason
	}
	if j.reasonCode != nil {
		state["reason_code"] = j.reasonCode
	}
	m := map[string]any{"id": j.id, "backend": j.backend, "state": state, "status": j.status,
		"program": map[string]string{"id": j.program}, "created": j.created.Format(time.RFC3339Nano),
		"tags": j.tags, "private": false} // no bss, no usage since 2026-03-15
	if withParams {
		m["params"] = j.params
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
func (f *fakeIQP) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset, ok := pageParams(q)
	if !ok {
		apiErr(w, http.StatusBadRequest, 1106, "limit and offset must be non-negative integers")
		return
	}
	f.mu.Lock()
	f.lists = append(f.lists, q)
	var out []any
	for i := len(f.order) - 1; i >= 0; i-- { // newest first
		j := f.jobs[f.order[i]]
		if j != nil && f.listed(j, q) {
			out = append(out, f.jobJSON(j, q.Get("exclude_params") != "true"))
		}
	}
	f.mu.Unlock()
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
func (f *fakeIQP) listed(j *iqpJob, q url.Values) bool {
	for _, t := range q["tags"] {
		if !slices.Contains(j.tags, t) && !f.ignoreTags {
			return false
		}
	}
	active := j.status == "Queued" || j.status == "Running"
	switch q.Get("pending") {
	case "true":
		return active
	case "false":
		return !active
	}
	return true
}

func (f *fakeIQP) get(w http.ResponseWriter, r *http.Request, id string) {
	f.mu.Lock()
	j := f.jobs[id]
	var m map[string]any
	if j != nil {
		m = f.jobJSON(j, r.URL.Query().Get("exclude_params") != "true")
	}
	f.mu.Unlock()
	if j == nil {
		apiErr(w, http.StatusNotFound, 1291, "Job not found. Job ID: "+id)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m)
}

func (f *fakeIQP) cancel(w http.ResponseWriter, r *http.Request, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[id]
	switch {
	case j == nil:
		apiErr(w, http.StatusNotFound, 1291, "Job not found. Job ID: "+id)
	case j.status != "Queued" && j.status != "Running":
		apiErr(w, http.StatusConflict, 1209, "Job "+id+" is in a final state and cannot be cancelled.")
	default:
		j.status, j.reason = "Cancelled", "Job was cancelled by the user"
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *fakeIQP) output(w http.ResponseWriter, r *http.Request, id, what string) {
	f.mu.Lock()
	j := f.jobs[id]
	var status string
	var created time.Time
	if j != nil {
		status, created = j.status, j.created
	}
	f.mu.Unlock()
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
		f.mu.Lock()
		logs := j.logs
		f.mu.Unlock()
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
func (f *fakeIQP) backendStatus(w http.ResponseWriter, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.backendsOK[name] {
		apiErr(w, 404, "not_found", "Backend "+name+" not found.")
		return
	}
	queue := f.queued[name]
	for _, j := range f.jobs {
		if j.backend == name && j.status == "Queued" {
			queue++
		}
	}
	state, status, msg := true, "active", "available"
	if f.paused[name] {
		state, status, msg = false, "paused", "paused for calibration"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"state": state, "status": status, "message": msg,
		"length_queue": queue, "backend_version": "1.3.7"})
}
