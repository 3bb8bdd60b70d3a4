package slurm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSlurm is an httptest slurmrestd that answers as backend-apis.md §1
// describes each version (v0.0.46 as SchedMD's data_parser/v0.0.46 on
// master defines it): paths, auth (X-SLURM-USER-* headers, and Authorization:
// Bearer from 23.02 on), submit validation, the shapes of job records,
// errors and not-found, with fault injection.
type fakeSlurm struct {
	*httptest.Server
	t *testing.T

	mu       sync.Mutex
	release  string
	versions map[apiVersion]bool
	user     string
	tokens   map[string]bool // tokens slurmctld accepts (besides exp)
	jobs     map[int]*fakeJob
	nextID   int
	ctldDown bool
	// accounting: the cluster keeps accounting (slurmdbd) and slurmrestd
	// serves /slurmdb/: vanished jobs are still known there.
	accounting bool
	// maxArraySize is slurm.conf's MaxArraySize, which GET conf serves
	// from v0.0.45 on (0: Slurm's default).
	maxArraySize int
	faults       []*fault
	requests     []string // "METHOD /path?query"
	bodies       []map[string]any
}

type fakeJob struct {
	id                        int
	name, comment, user       string
	script, cwd, stdout       string
	env                       map[string]string
	timeLimit                 *uint32 // minutes, nil = INFINITE
	state                     []string
	reason                    string
	exit                      *uint32 // raw wait status; nil while none
	submit, start, end        int64
	vanished                  bool
	body                      map[string]any
	topLevelScript, jobScript bool
}

// fault answers matching requests instead of the fake, times times (0 = always).
type fault struct {
	method, path string // path suffix to match, "" = any
	status       int
	body         string
	contentType  string
	drop         bool          // close the connection without answering
	delay        time.Duration // wait before answering (to trip timeouts)
	times        int
}

// releases: which plugins each Slurm release serves (its own and older ones).
var releases = map[string][]apiVersion{
	"22.05.8":  {38},
	"23.02.8":  {38, 39},
	"23.11.11": {38, 39, 40},
	"24.05.8":  {39, 40, 41},
	"24.11.7":  {40, 41, 42},
	"25.05.8":  {40, 41, 42, 43},
	"25.11.2":  {41, 42, 43, 44},
	"26.05.0":  {42, 43, 44, 45},
	"26.11.0":  {43, 44, 45, 46}, // master: v0.0.42 dropped, v0.0.43 deprecated
}

// releaseOf is the newest release that serves v.
var releaseOf = map[apiVersion]string{38: "22.05.8", 39: "23.02.8", 40: "23.11.11", 41: "24.05.8", 42: "24.11.7", 43: "25.05.8", 44: "25.11.2", 45: "26.05.0", 46: "26.11.0"}

var fakeKey = []byte("0123456789abcdef0123456789abcdef")

func newFake(t *testing.T, release string) *fakeSlurm {
	t.Helper()
	f := &fakeSlurm{t: t, release: release, versions: map[apiVersion]bool{}, user: "bridge",
		tokens: map[string]bool{}, jobs: map[int]*fakeJob{}, nextID: 100}
	for _, v := range releases[release] {
		f.versions[v] = true
	}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// mintJWT makes an HS256 token as slurmctld does (claims exp, iat, sun).
func mintJWT(key []byte, user string, exp time.Time) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{"exp": exp.Unix(), "iat": time.Now().Unix(), "sun": user})
	msg := head + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil))
}

// goodToken is a valid token for the fake's user, an hour long.
func (f *fakeSlurm) goodToken() string {
	tok := mintJWT(fakeKey, f.user, time.Now().Add(time.Hour))
	f.mu.Lock()
	f.tokens[tok] = true
	f.mu.Unlock()
	return tok
}

func (f *fakeSlurm) addFault(fl *fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fl)
}

func (f *fakeSlurm) reqs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func (f *fakeSlurm) job(id string) *fakeJob {
	n, _ := strconv.Atoi(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobs[n]
}

// set changes a job's state (base state and flags) and exit status.
func (f *fakeSlurm) set(id string, reason string, exit *uint32, state ...string) {
	n, _ := strconv.Atoi(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[n]
	j.state, j.reason, j.exit = state, reason, exit
	now := time.Now().Unix()
	if state[0] != "PENDING" && j.start == 0 {
		j.start = now
	}
	if baseFinal(state[0]) {
		j.end = now
	}
}

func (f *fakeSlurm) vanish(id string) {
	n, _ := strconv.Atoi(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[n].vanished = true
}

func baseFinal(s string) bool {
	switch s {
	case "PENDING", "RUNNING", "SUSPENDED":
		return false
	}
	return true
}

func u32(n uint32) *uint32 { return &n }

var pathRE = regexp.MustCompile(`^/slurm/v0\.0\.(\d+)/(.*)$`)

var dbPathRE = regexp.MustCompile(`^/slurmdb/v0\.0\.(\d+)/job/(\d+)/?$`)

// dbJob answers GET /slurmdb/vX/job/{id} as slurmdbd's record: state,
// times and comment grouped; every job it ever ran, vanished or not.
func (f *fakeSlurm) dbJob(w http.ResponseWriter, v apiVersion, id string) {
	n, _ := strconv.Atoi(id)
	j := f.jobs[n]
	if j == nil {
		f.ok(w, v, map[string]any{"jobs": []any{}})
		return
	}
	live := j.record(v)
	var state any = j.state
	if v <= 39 {
		state = live["job_state"]
	}
	rec := map[string]any{
		"job_id": j.id, "name": j.name, "user": j.user, "comment": map[string]any{"job": j.comment, "administrator": "", "system": ""},
		"state": map[string]any{"current": state, "reason": j.reason}, "exit_code": live["exit_code"],
		"time":              map[string]any{"submission": j.submit, "start": j.start, "end": j.end, "elapsed": j.end - j.start},
		"working_directory": j.cwd, "stdout": j.stdout, "partition": "debug",
	}
	f.ok(w, v, map[string]any{"jobs": []any{rec}})
}

func (f *fakeSlurm) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, strings.TrimSuffix(r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery, "?"))
	if f.injectFault(w, r) {
		return
	}
	if _, _, ok := f.credentialsOf(r); !ok {
		w.Header().Set("Connection", "Close")
		plain(w, http.StatusUnauthorized, "Authentication failure")
		return
	}
	if dm := dbPathRE.FindStringSubmatch(r.URL.Path); dm != nil && f.accounting && r.Method == http.MethodGet {
		n, _ := strconv.Atoi(dm[1])
		f.dbJob(w, apiVersion(n), dm[2])
		return
	}
	if r.URL.Path == "/openapi/v3" && r.Method == http.MethodGet {
		f.openapi(w)
		return
	}
	v, ep, ok := f.route(r.URL.Path)
	if !ok {
		unknownPath(w)
		return
	}
	if f.refuse(w, r, v, ep) {
		return
	}
	if h := fakeRoutes[r.Method+" "+ep]; h != nil {
		h(f, w, r, v)
		return
	}
	if strings.HasPrefix(ep, "job/") {
		f.serveJob(w, r, v, ep)
		return
	}
	unknownPath(w)
}

// fakeRoutes: the slurmctld endpoints at fixed paths, by "METHOD endpoint".
var fakeRoutes = map[string]func(f *fakeSlurm, w http.ResponseWriter, r *http.Request, v apiVersion){
	"GET ping":        func(f *fakeSlurm, w http.ResponseWriter, _ *http.Request, v apiVersion) { f.ping(w, v) },
	"POST job/submit": (*fakeSlurm).submit,
	"GET jobs":        func(f *fakeSlurm, w http.ResponseWriter, _ *http.Request, v apiVersion) { f.listJobs(w, v) },
	"GET jobs/state":  (*fakeSlurm).jobStates,
	"GET partitions":  func(f *fakeSlurm, w http.ResponseWriter, _ *http.Request, v apiVersion) { f.partitions(w, v) },
	"GET nodes":       func(f *fakeSlurm, w http.ResponseWriter, _ *http.Request, v apiVersion) { f.nodes(w, v) },
	"GET conf":        func(f *fakeSlurm, w http.ResponseWriter, _ *http.Request, v apiVersion) { f.conf(w, v) },
}

// conf answers GET conf/ as slurmrestd does from v0.0.45 (Slurm 26.05):
// slurm.conf's values under slurm_conf; before that the path is unknown.
func (f *fakeSlurm) conf(w http.ResponseWriter, v apiVersion) {
	if v < 45 {
		unknownPath(w)
		return
	}
	n := f.maxArraySize
	if n == 0 {
		n = 1001
	}
	f.ok(w, v, map[string]any{"slurm_conf": map[string]any{"MaxArraySize": n, "MaxJobCount": 10000}})
}

// partitions answers GET partitions/ with one partition, debug, of 8 CPUs
// on one node, in the version's shape (v0.0.38 flat, with its default
// flag; later nested, with none).
func (f *fakeSlurm) partitions(w http.ResponseWriter, v apiVersion) {
	p := map[string]any{"name": "debug", "flags": []string{"default"}, "state": "UP", "total_cpus": 8, "total_nodes": 1,
		"max_time_limit": -1, "maximum_nodes_per_job": -1, "maximum_cpus_per_node": -1, "nodes": "fake"}
	if v >= 40 {
		inf := map[string]any{"set": false, "infinite": true, "number": 0}
		p = map[string]any{"name": "debug", "partition": map[string]any{"state": []string{"UP"}}, "cpus": map[string]any{"total": 8},
			"nodes": map[string]any{"total": 1, "configured": "fake"}, "maximums": map[string]any{"time": inf, "nodes": inf, "cpus_per_node": inf}}
	}
	f.ok(w, v, map[string]any{"partitions": []any{p}})
}

// nodes answers GET nodes/ with the one node, idle.
func (f *fakeSlurm) nodes(w http.ResponseWriter, v apiVersion) {
	n := map[string]any{"name": "fake", "cpus": 8, "alloc_cpus": 0, "state": "idle", "state_flags": []string{}, "partitions": []string{"debug"}}
	if v >= 40 {
		n["state"] = []string{"IDLE"}
	}
	f.ok(w, v, map[string]any{"nodes": []any{n}})
}

// jobStates answers GET jobs/state/ (v0.0.40+) as the real 24.11.5 does:
// job_id repeated (the comma form is a plain 400), unknown ids left out,
// job_id a string, state the base state and flags; no reason.
func (f *fakeSlurm) jobStates(w http.ResponseWriter, r *http.Request, v apiVersion) {
	if v < 40 {
		unknownPath(w)
		return
	}
	list := []any{}
	for _, id := range r.URL.Query()["job_id"] {
		n, err := strconv.Atoi(id)
		if err != nil {
			plain(w, http.StatusBadRequest, "Unable to parse query.")
			return
		}
		if j := f.jobs[n]; j != nil && !j.vanished {
			list = append(list, map[string]any{"job_id": strconv.Itoa(j.id), "state": j.state})
		}
	}
	f.ok(w, v, map[string]any{"jobs": list})
}

// injectFault answers r with the first fault set up for its path, if any.
func (f *fakeSlurm) injectFault(w http.ResponseWriter, r *http.Request) bool {
	for i, fl := range f.faults {
		if (fl.method == "" || fl.method == r.Method) && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), fl.path) {
			if fl.times > 0 {
				if fl.times--; fl.times == 0 {
					f.faults = append(f.faults[:i:i], f.faults[i+1:]...)
				}
			}
			f.answerFault(w, r, fl)
			return true
		}
	}
	return false
}

func (f *fakeSlurm) answerFault(w http.ResponseWriter, r *http.Request, fl *fault) {
	if fl.delay > 0 {
		f.mu.Unlock()
		select {
		case <-time.After(fl.delay):
		case <-r.Context().Done():
		}
		f.mu.Lock()
	}
	if fl.drop {
		hj, _ := w.(http.Hijacker)
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	ct := fl.contentType
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(fl.status)
	io.WriteString(w, fl.body)
}

// route finds the plugin version and endpoint of a slurmctld path, if this
// release serves that version.
func (f *fakeSlurm) route(path string) (apiVersion, string, bool) {
	m := pathRE.FindStringSubmatch(path)
	if m == nil {
		return 0, "", false
	}
	n, _ := strconv.Atoi(m[1])
	v := apiVersion(n)
	if !f.versions[v] {
		return 0, "", false
	}
	return v, strings.TrimSuffix(m[2], "/"), true
}

// refuse answers as slurmrestd does when slurmctld rejects the token or
// cannot be reached, and says whether it did.
func (f *fakeSlurm) refuse(w http.ResponseWriter, r *http.Request, v apiVersion, ep string) bool {
	write := r.Method != http.MethodGet
	// slurmctld checks the token: unknown, expired or for another user.
	if !f.authOK(r) {
		if v >= 42 {
			f.errorResp(w, v, 511, map[string]any{"description": "Authentication failure", "error_number": errProtocolAuth, "error": "Protocol authentication error", "source": "slurm_load_job"})
		} else if write {
			f.errorResp(w, v, 500, map[string]any{"description": "request failed: Zero Bytes were transmitted or received", "error_number": errZeroBytes, "error": "Zero Bytes were transmitted or received", "source": "slurm_kill_job"})
		} else {
			f.errorResp(w, v, 500, map[string]any{"description": "Failed while looking for jobs", "error_number": -1, "error": "Unspecified error", "source": "slurm_load_jobs"})
		}
		return true
	}
	if f.ctldDown && ep != "" {
		if write {
			f.errorResp(w, v, 500, map[string]any{"error_code": 1800, "error": "Unable to contact slurm controller (connect failure)"})
		} else {
			f.errorResp(w, v, 500, map[string]any{"description": "Unable to find JobId", "error_number": -1, "error": "Unspecified error", "source": "slurm_load_job"})
		}
		return true
	}
	return false
}

func (f *fakeSlurm) listJobs(w http.ResponseWriter, v apiVersion) {
	var list []any
	ids := make([]int, 0, len(f.jobs))
	for id := range f.jobs {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		if j := f.jobs[id]; !j.vanished {
			list = append(list, j.record(v))
		}
	}
	if list == nil {
		list = []any{}
	}
	f.ok(w, v, map[string]any{"jobs": list})
}

// serveJob serves GET and DELETE job/{id}.
func (f *fakeSlurm) serveJob(w http.ResponseWriter, r *http.Request, v apiVersion, ep string) {
	id, err := strconv.Atoi(strings.TrimPrefix(ep, "job/"))
	if err != nil || id == 0 {
		f.errorResp(w, v, 400, map[string]any{"description": "Unable to find JobId=" + ep, "error_number": 9002, "error": "Jobs description entry not found, empty or not dictionary or list", "source": "_handle_job_get"})
		return
	}
	j := f.jobs[id]
	if j == nil || j.vanished {
		f.notFound(w, v, id, r.Method)
		return
	}
	switch r.Method {
	case http.MethodGet:
		f.ok(w, v, map[string]any{"jobs": []any{j.record(v)}})
	case http.MethodDelete:
		f.cancel(w, r, v, j)
	default:
		plain(w, http.StatusMethodNotAllowed, "Requested REST method is not defined at URL")
	}
}

func (f *fakeSlurm) cancel(w http.ResponseWriter, r *http.Request, v apiVersion, j *fakeJob) {
	extra := map[string]any{}
	if baseFinal(j.state[0]) {
		if v >= 40 {
			extra["warnings"] = []any{map[string]any{"description": "Job already completed", "source": "slurm_kill_job"}}
		}
	} else if r.URL.Query().Get("signal") == "" {
		j.state, j.reason, j.exit, j.end = []string{"CANCELLED"}, "None", u32(15), time.Now().Unix()
	}
	if v >= 42 {
		extra["status"] = []any{map[string]any{"error": map[string]any{"string": "No error", "code": 0, "message": ""}, "step_id": "batch", "job_id": j.id, "federation": map[string]any{"sibling": ""}}}
	}
	f.ok(w, v, extra)
}

// credentialsOf reads the user and token as slurmrestd's rest_auth/jwt
// does, and says whether it lets the request through to slurmctld (if not,
// slurmrestd answers a plain 401). 22.05 wants X-SLURM-USER-NAME and
// X-SLURM-USER-TOKEN on every path. 23.02 and later also take the token as
// Authorization: Bearer (never both: that is ambiguous and refused), and
// the user name may be left out (slurmctld takes it from the token).
func (f *fakeSlurm) credentialsOf(r *http.Request) (user, tok string, ok bool) {
	user, tok = r.Header.Get("X-SLURM-USER-NAME"), r.Header.Get("X-SLURM-USER-TOKEN")
	if strings.HasPrefix(f.release, "22.") {
		return user, tok, user != "" && tok != ""
	}
	switch auth := r.Header.Get("Authorization"); {
	case auth != "" && tok != "":
		return "", "", false
	case auth != "":
		tok, ok = strings.CutPrefix(auth, "Bearer ")
		return user, tok, ok
	}
	return user, tok, tok != ""
}

func (f *fakeSlurm) authOK(r *http.Request) bool {
	user, tok, _ := f.credentialsOf(r)
	c, ok := parseJWT(tok)
	if user == "" {
		user = c.Sun
	}
	if !f.tokens[tok] || user != f.user {
		return false
	}
	return ok && time.Unix(c.Exp, 0).After(time.Now())
}

// unknownPath answers a path slurmrestd does not serve (a version whose
// plugin is not loaded) as real slurmrestd does (22.05 and 24.11): a 69-byte
// text/plain 404 that closes the connection.
func unknownPath(w http.ResponseWriter) {
	w.Header().Set("Connection", "Close")
	plain(w, http.StatusNotFound, "Unable find requested URL. Please view /openapi/v3 for API reference.")
}

func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	io.WriteString(w, msg)
}

func (f *fakeSlurm) meta(v apiVersion) map[string]any {
	parts := strings.Split(f.release, ".")
	if v <= 39 {
		maj, _ := strconv.Atoi(parts[0])
		min, _ := strconv.Atoi(parts[1])
		mic, _ := strconv.Atoi(parts[2])
		return map[string]any{"plugin": map[string]any{"type": "openapi/" + v.String(), "name": "Slurm OpenAPI " + v.String()},
			"Slurm": map[string]any{"version": map[string]any{"major": maj, "micro": mic, "minor": min}, "release": f.release}}
	}
	return map[string]any{"plugin": map[string]any{"type": "openapi/slurmctld", "name": "Slurm OpenAPI slurmctld", "data_parser": "data_parser/" + v.String(), "accounting_storage": ""},
		"client":  map[string]any{"source": "[127.0.0.1]:4242", "user": f.user, "group": f.user},
		"command": []any{},
		"slurm":   map[string]any{"version": map[string]any{"major": parts[0], "micro": parts[2], "minor": parts[1]}, "release": f.release, "cluster": "fake"}}
}

func (f *fakeSlurm) ok(w http.ResponseWriter, v apiVersion, fields map[string]any) {
	out := map[string]any{"meta": f.meta(v), "errors": []any{}}
	if v >= 39 {
		out["warnings"] = []any{}
	}
	for k, val := range fields {
		out[k] = val
	}
	f.send(w, http.StatusOK, out)
}

func (f *fakeSlurm) errorResp(w http.ResponseWriter, v apiVersion, status int, errs ...map[string]any) {
	list := make([]any, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	out := map[string]any{"meta": f.meta(v), "errors": list}
	if v >= 39 {
		out["warnings"] = []any{}
	}
	w.Header().Set("Connection", "Close")
	f.send(w, status, out)
}

func (f *fakeSlurm) send(w http.ResponseWriter, status int, body any) {
	buf, err := json.Marshal(body)
	if err != nil {
		f.t.Errorf("fake: %v", err)
	}
	// 22.05 escapes / as \/; decoders must not care.
	buf = []byte(strings.ReplaceAll(string(buf), "/", `\/`))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf)
}

func (f *fakeSlurm) notFound(w http.ResponseWriter, v apiVersion, id int, method string) {
	e := map[string]any{"description": fmt.Sprintf("Unable to find JobId=%d", id), "error_number": errInvalidJobID, "error": "Invalid job id specified", "source": "slurm_load_job"}
	if method == http.MethodDelete {
		e["description"] = fmt.Sprintf("unable to kill JobId=%d with signal 9: Invalid job id specified", id)
		e["source"] = "slurm_kill_job"
	}
	status := http.StatusNotFound
	if v == 38 {
		status = http.StatusInternalServerError
	}
	f.errorResp(w, v, status, e)
}

// openapi answers GET /openapi/v3 as slurmrestd does: one document whose
// paths hold every endpoint of every loaded plugin (22.05 without a trailing
// slash, later releases with one), info.version "0.0.N" on 22.05 and
// "Slurm-<release>&openapi/slurmctld" later; no token check (slurmctld is
// not asked).
func (f *fakeSlurm) openapi(w http.ResponseWriter) {
	paths := map[string]any{}
	info := "Slurm-" + f.release + "&openapi/slurmctld"
	for v := range f.versions {
		eps := []string{"ping", "diag", "jobs", "job/submit", "job/{job_id}"}
		if v >= 40 {
			eps = append(eps, "jobs/state")
		}
		for _, ep := range eps {
			p := "/slurm/" + v.String() + "/" + ep
			if v > 38 {
				p += "/"
			}
			paths[p] = map[string]any{"get": map[string]any{"responses": map[string]any{"200": map[string]any{"description": "ok"}}}}
		}
	}
	if strings.HasPrefix(f.release, "22.") {
		info = "0.0.38"
	}
	f.send(w, http.StatusOK, map[string]any{"openapi": "3.0.2", "info": map[string]any{"title": "Slurm REST API", "version": info}, "paths": paths})
}

func (f *fakeSlurm) ping(w http.ResponseWriter, v apiVersion) {
	p := map[string]any{"hostname": "fake", "mode": "primary"}
	switch {
	case v == 38:
		p["ping"], p["status"] = "UP", 0
	case v >= 42:
		p["pinged"], p["latency"], p["responding"], p["primary"] = "UP", 120, true, true
	default:
		p["pinged"], p["latency"] = "UP", 120
	}
	f.ok(w, v, map[string]any{"pings": []any{p}})
}

// knownJobKeys is the part of the job description schema the fake knows;
// anything else is an unknown key, as slurmrestd says.
var knownJobKeys = map[string]bool{
	"account": true, "comment": true, "cpus_per_task": true, "current_working_directory": true,
	"environment": true, "memory_per_node": true, "memory_per_cpu": true, "name": true, "nodes": true,
	"partition": true, "qos": true, "standard_error": true, "standard_output": true, "standard_input": true,
	"tasks": true, "time_limit": true, "minimum_nodes": true, "tres_per_node": true, "script": true,
	"exclusive": true, "hold": true, "requeue": true,
	"container_type": true, "runtime": true, // v0.0.45 only; its new name from v0.0.46 on
}

func (f *fakeSlurm) submit(w http.ResponseWriter, r *http.Request, v apiVersion) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		w.Header().Set("Connection", "Close")
		plain(w, http.StatusBadRequest, "Unable to parse query.")
		return
	}
	f.bodies = append(f.bodies, body)
	job, _ := body["job"].(map[string]any)
	if job == nil {
		f.errorResp(w, v, 400, map[string]any{"error_code": 9002, "error": "Jobs description entry not found, empty or not dictionary or list"})
		return
	}
	parseErrs := unknownJobKeys(job, v)
	env, envErrs := fakeEnvironment(job, v)
	tl, tlErrs := fakeTimeLimit(job, v)
	parseErrs = append(append(parseErrs, envErrs...), tlErrs...)
	if len(parseErrs) > 0 {
		parseErrs = append(parseErrs, map[string]any{"error_code": 9001, "error": "Failure during parsing"})
		f.errorResp(w, v, 400, parseErrs...)
		return
	}
	script, top := body["script"].(string)
	js, inJob := job["script"].(string)
	if inJob {
		script = js
	}
	switch {
	case !top && !inJob:
		f.errorResp(w, v, 500, map[string]any{"error_code": 2009, "error": "Job script not specified"})
		return
	case len(env) == 0:
		f.errorResp(w, v, 500, map[string]any{"description": "Environment is missing in job", "error_number": 2127, "error": "Environment is missing in job", "source": "slurm_submit_batch_job"})
		return
	case job["partition"] != nil && job["partition"] != "debug":
		f.errorResp(w, v, 500, map[string]any{"error_code": 2000, "error": "Invalid partition name specified"})
		return
	}
	f.nextID++
	j := &fakeJob{id: f.nextID, user: f.user, script: script, env: env, timeLimit: tl, state: []string{"PENDING"}, reason: "Priority",
		submit: time.Now().Unix(), body: job, topLevelScript: top, jobScript: inJob}
	j.name, _ = job["name"].(string)
	j.comment, _ = job["comment"].(string)
	j.cwd, _ = job["current_working_directory"].(string)
	j.stdout, _ = job["standard_output"].(string)
	f.jobs[j.id] = j
	f.ok(w, v, submitReply(v, j.id))
}

// unknownJobKeys: the parse errors slurmrestd gives for keys its job
// schema (of version v) does not have, in key order.
func unknownJobKeys(job map[string]any, v apiVersion) []map[string]any {
	var parseErrs []map[string]any
	keys := make([]string, 0, len(job))
	for k := range job {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !knownJobKeys[k] || (k == "script" && v < 40) || (k == "container_type" && v != 45) || (k == "runtime" && v < 46) {
			parseErrs = append(parseErrs, map[string]any{"description": fmt.Sprintf("Unknown key %q", k), "source": "hsearch_r"})
		}
	}
	return parseErrs
}

// fakeEnvironment reads the job's environment as version v accepts it.
func fakeEnvironment(job map[string]any, v apiVersion) (map[string]string, []map[string]any) {
	var parseErrs []map[string]any
	env := map[string]string{}
	switch e := job["environment"].(type) {
	case nil:
		if v == 38 {
			parseErrs = append(parseErrs, map[string]any{"error": "environment must be set", "error_code": 2127})
		}
	case map[string]any:
		for k, val := range e {
			env[k], _ = val.(string)
		}
	case []any:
		if v == 38 {
			parseErrs = append(parseErrs, map[string]any{"error": "environment must be a dictionary", "error_code": -1})
		}
		for _, kv := range e {
			k, val, _ := strings.Cut(kv.(string), "=")
			env[k] = val
		}
	}
	return env, parseErrs
}

// fakeTimeLimit reads the job's time limit as version v accepts it.
func fakeTimeLimit(job map[string]any, v apiVersion) (*uint32, []map[string]any) {
	var parseErrs []map[string]any
	var tl *uint32
	switch t := job["time_limit"].(type) {
	case nil:
	case float64:
		tl = u32(uint32(t))
	case string:
		if v >= 39 {
			if n, err := strconv.Atoi(t); err == nil {
				tl = u32(uint32(n))
			} else {
				parseErrs = append(parseErrs, map[string]any{"error": "Expected integer but got " + t, "error_code": 9202})
			}
		} else if m, inf, ok := parseSlurmTime(t); ok && !inf {
			tl = u32(m)
		}
	case map[string]any:
		if v == 38 {
			parseErrs = append(parseErrs, map[string]any{"error": "Unable to read string", "error_code": 9202})
		} else if t["infinite"] != true {
			tl = u32(uint32(t["number"].(float64)))
		}
	}
	return tl, parseErrs
}

// submitReply is the job/submit answer of version v.
func submitReply(v apiVersion, id int) map[string]any {
	out := map[string]any{"job_id": id, "step_id": "BATCH", "job_submit_user_msg": ""}
	if v >= 39 {
		out["step_id"] = "batch"
	}
	if v >= 39 && v <= 41 {
		out["result"] = map[string]any{"job_id": id, "step_id": "batch", "error_code": 0, "error": "No error", "job_submit_user_msg": ""}
	}
	return out
}

// noVal is {set,infinite,number} for an integer, or unset.
func noVal(n int64, set bool) map[string]any {
	return map[string]any{"set": set, "infinite": false, "number": n}
}

// record is the job as GET job/{id} shows it in version v.
func (j *fakeJob) record(v apiVersion) map[string]any {
	rec := map[string]any{
		"account": "", "job_id": j.id, "name": j.name, "comment": j.comment, "user_name": j.user,
		"partition": "debug", "state_reason": j.reason, "state_description": "",
		"standard_output": j.stdout, "standard_error": "", "current_working_directory": j.cwd,
		"batch_flag": true, "nodes": "fake", "array_task_id": nil,
	}
	switch { // v0.0.46 renamed v0.0.45's container_type
	case v == 45:
		rec["container_type"] = ""
	case v >= 46:
		rec["runtime"] = ""
	}
	// job_state: ≤v0.0.39 one string, a flag winning over the base state
	// (job_state_string); v0.0.40+ the base state and flags as an array.
	if v <= 39 {
		s := j.state[0]
		if len(j.state) > 1 {
			s = j.state[len(j.state)-1]
		}
		rec["job_state"] = s
	} else {
		rec["job_state"] = j.state
	}
	times := map[string]int64{"submit_time": j.submit, "start_time": j.start, "end_time": j.end}
	if j.state[0] == "PENDING" {
		times["start_time"] = time.Now().Add(time.Hour).Unix() // a forecast
	}
	if !baseFinal(j.state[0]) && j.state[0] != "PENDING" && j.timeLimit != nil {
		times["end_time"] = j.start + int64(*j.timeLimit)*60 // the deadline
	}
	for k, t := range times {
		if v <= 39 {
			rec[k] = t
		} else {
			rec[k] = noVal(t, true)
		}
	}
	switch {
	case v == 38:
		if j.timeLimit == nil {
			rec["time_limit"] = nil
		} else {
			rec["time_limit"] = *j.timeLimit
		}
	case j.timeLimit == nil:
		rec["time_limit"] = map[string]any{"set": false, "infinite": true, "number": 0}
	default:
		rec["time_limit"] = noVal(int64(*j.timeLimit), true)
	}
	var ws uint32
	if j.exit != nil {
		ws = *j.exit
	}
	switch {
	case v == 38:
		rec["exit_code"] = ws
	case v == 39:
		rec["exit_code"] = noVal(int64(ws), true)
	default:
		rec["exit_code"] = verboseExit(j.exit)
	}
	rec["derived_exit_code"] = rec["exit_code"]
	return rec
}

// verboseExit is PROCESS_EXIT_CODE as data_parser v0.0.40+ dumps it.
func verboseExit(ws *uint32) map[string]any {
	out := map[string]any{"status": []string{"PENDING"}, "return_code": noVal(0, false),
		"signal": map[string]any{"id": noVal(0, false), "name": ""}}
	if ws == nil {
		return out
	}
	switch e := waitStatus(*ws); {
	case e.signal != 0:
		out["status"] = []string{"SIGNALED"}
		out["signal"] = map[string]any{"id": noVal(int64(e.signal), true), "name": strings.TrimPrefix(signalName(e.signal), "SIG")}
	case e.code == 0:
		out["status"], out["return_code"] = []string{"SUCCESS"}, noVal(0, true)
	default:
		out["status"], out["return_code"] = []string{"ERROR"}, noVal(int64(e.code), true)
	}
	return out
}

// memCreds is a Credentials over a map; tests rotate values in it.
