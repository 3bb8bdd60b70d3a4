package lsf

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePAC is an httptest LSF Application Center that speaks the web
// services as backend-apis.md §2 describes them: XML logon, the
// platform_token cookie with #quote#, multipart/mixed submit with a nested
// data part of <AppParam> XML, JSON (the XML mapping, "@" attributes) or XML
// answers chosen by Accept, 404 once a job has left mbatchd with the
// jobhistory fallback, both kill calls, file download, and the detailed
// queue information (fake_queues_test.go). Faults can be injected per
// request.
type fakePAC struct {
	*httptest.Server
	t testing.TB

	mu          sync.Mutex
	user, pass  string
	tokens      map[string]time.Time // cookie form (#quote#) -> expiry
	tokenTTL    time.Duration
	jobs        map[int]*pacJob
	nextID      int
	faults      []*fault
	requests    []string
	logons      int
	jacsKill    bool   // serve POST ws/jobs/kill
	userCmdKill bool   // serve POST ws/userCmd
	idAsString  bool   // submit answers {"id":"N"} instead of {"id":N}
	jobKey      string // JSON key of job elements: "job" or "Job"
	arrays      bool   // JSON: one job as an array of one
	killInfo    string // exitInfo of a killed job
	submits     []*pacSubmit
	queueStatus map[string]string // queue -> status as bqueues writes it (fake_queues_test.go)
}

type pacJob struct {
	id                 int
	app, name, cmd     string
	params             map[string]string
	files              map[string][]byte
	status             string
	exitStatus         *int
	exitInfo           string
	pendReason         string
	cwd                string
	outputs            map[string][]byte // absolute path -> content
	left, forgotten    bool              // left mbatchd (history only); gone from history too
	killedByOwner      bool
	submit, start, end time.Time
	index              int       // an array's element: its LSF index (from 1)
	elems              []*pacJob // an array: its elements
	maxParallel        int       // an array's %M
}

// idStr is the job's id as LSF writes it: "<id>[<index>]" for an element.
func (j *pacJob) idStr() string {
	if j.index > 0 {
		return fmt.Sprintf("%d[%d]", j.id, j.index)
	}
	return strconv.Itoa(j.id)
}

type pacSubmit struct {
	app    string
	params map[string]pacParam
	order  []string
	files  map[string][]byte
}

type pacParam struct{ value, typ string }

type fault struct {
	method, path string // path suffix; "" = any
	status       int
	body         string
	contentType  string
	retryAfter   string
	drop         bool
	delay        time.Duration
	times        int // 0 = always
}

func newFakePAC(t testing.TB, tls bool) *fakePAC {
	t.Helper()
	f := &fakePAC{t: t, user: "lsfuser", pass: `p&ss<"word>`, tokens: map[string]time.Time{}, tokenTTL: time.Hour,
		jobs: map[int]*pacJob{}, nextID: 1234, jacsKill: true, userCmdKill: true, jobKey: "job", killInfo: "TERM_OWNER",
		queueStatus: map[string]string{"normal": "Open:Active", "night": "Open:Inact", "retired": "Closed:Inact"}}
	if tls {
		f.Server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	} else {
		f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	}
	t.Cleanup(f.Close)
	return f
}

func (f *fakePAC) addFault(fl *fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fl)
}

func (f *fakePAC) job(id int) *pacJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobs[id]
}

func (f *fakePAC) set(id int, fn func(j *pacJob)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.jobs[id])
}

func (f *fakePAC) expireTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.tokens {
		f.tokens[k] = time.Now().Add(-time.Second)
	}
}

func (f *fakePAC) count(prefix string) int {
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

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// fail answers an error in the format the client asked for.
func fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(msg))
	fmt.Fprintf(w, "<error><message>%s</message></error>", b.String())
}

// maxRequestLine is a Tomcat connector's default maxHttpHeaderSize (8 KB),
// which bounds the request line of GET ws/jobs/{id,id,…}.
const maxRequestLine = 8192

func (f *fakePAC) serve(w http.ResponseWriter, r *http.Request) {
	if f.injectFault(w, r) {
		return
	}
	if len(r.Method)+len(r.RequestURI)+len(" HTTP/1.1") > maxRequestLine {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "<html><body>Request header is too large</body></html>")
		return
	}
	p, ok := strings.CutPrefix(r.URL.Path, "/platform/ws/")
	if !ok {
		notFoundPage(w)
		return
	}
	if p == "logon" && r.Method == http.MethodPost {
		f.logon(w, r)
		return
	}
	if !f.authorized(w, r) {
		return
	}
	f.route(w, r, p)
}

// route serves an authorized request for ws/<p>.
func (f *fakePAC) route(w http.ResponseWriter, r *http.Request, p string) {
	switch {
	case p == "jobs/submit" && r.Method == http.MethodPost:
		f.submit(w, r)
	case p == "jobs/kill" && r.Method == http.MethodPost && f.jacsKill:
		f.jobsKill(w, r)
	case p == "userCmd" && r.Method == http.MethodPost && f.userCmdKill:
		f.userCmd(w, r)
	case p == "jobs" && r.Method == http.MethodGet:
		f.list(w, r)
	case strings.HasPrefix(p, "jobs/") && r.Method == http.MethodGet:
		f.get(w, r, strings.TrimPrefix(p, "jobs/"))
	case p == "queues/getfullinfo" && r.Method == http.MethodPost:
		f.queueInfo(w, r)
	case p == "jobhistory" && r.Method == http.MethodGet:
		f.history(w, r)
	case strings.HasPrefix(p, "jobfiles/download/") && r.Method == http.MethodPost:
		f.download(w, r, strings.TrimPrefix(p, "jobfiles/download/"))
	default:
		notFoundPage(w)
	}
}

func notFoundPage(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusNotFound)
	io.WriteString(w, "<html><body>Not Found</body></html>")
}

// injectFault answers r with the first matching fault, if any.
func (f *fakePAC) injectFault(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	var fl *fault
	for _, c := range f.faults {
		if c.times >= 0 && (c.method == "" || c.method == r.Method) && strings.HasSuffix(r.URL.Path, c.path) {
			fl = c
			if fl.times > 0 {
				fl.times--
				if fl.times == 0 {
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
	if fl.delay > 0 {
		select {
		case <-time.After(fl.delay):
		case <-r.Context().Done():
			return true
		}
	}
	if fl.drop {
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close()
		return true
	}
	if fl.retryAfter != "" {
		w.Header().Set("Retry-After", fl.retryAfter)
	}
	w.Header().Set("Content-Type", orText(fl.contentType, "application/json"))
	w.WriteHeader(fl.status)
	io.WriteString(w, fl.body)
	return true
}

// jobsKill serves POST ws/jobs/kill (ids=... form).
func (f *fakePAC) jobsKill(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	q, err := url.ParseQuery(string(body))
	if err != nil || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		fail(w, r, 400, "bad form")
		return
	}
	f.kill(w, r, q.Get("ids"))
}

// userCmd serves POST ws/userCmd with <UserCmd><cmd>bkill ID</cmd>.
func (f *fakePAC) userCmd(w http.ResponseWriter, r *http.Request) {
	var uc struct {
		XMLName xml.Name `xml:"UserCmd"`
		Cmd     string   `xml:"cmd"`
	}
	if err := xml.NewDecoder(r.Body).Decode(&uc); err != nil {
		fail(w, r, 400, "bad UserCmd: "+err.Error())
		return
	}
	id, ok := strings.CutPrefix(uc.Cmd, "bkill ")
	if !ok {
		fail(w, r, 400, "unsupported command")
		return
	}
	f.kill(w, r, id)
}

func (f *fakePAC) logon(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/xml" {
		fail(w, r, 415, "Content-Type must be application/xml")
		return
	}
	var u struct {
		XMLName xml.Name `xml:"User"`
		Name    string   `xml:"name"`
		Pass    string   `xml:"pass"`
	}
	dec := xml.NewDecoder(r.Body)
	dec.Strict = true
	if err := dec.Decode(&u); err != nil {
		fail(w, r, 400, "malformed logon request: "+err.Error())
		return
	}
	if u.Name == "" {
		fail(w, r, 400, "User name is empty.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logons++
	if u.Name != f.user || u.Pass != f.pass {
		fail(w, r, 403, "Logon failed: wrong user name or password.")
		return
	}
	rnd := make([]byte, 24)
	_, _ = rand.Read(rnd)
	exp := time.Now().Add(f.tokenTTL).UTC().Truncate(time.Second)
	tok := fmt.Sprintf(`%s"%s"%s`, u.Name, exp.Format(time.RFC3339), base64.StdEncoding.EncodeToString(rnd))
	f.tokens[strings.ReplaceAll(tok, `"`, "#quote#")] = exp
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(tok))
	fmt.Fprintf(w, "<User><token>%s</token></User>", b.String())
}

func (f *fakePAC) authorized(w http.ResponseWriter, r *http.Request) bool {
	raw := r.Header.Get("Cookie")
	c, err := r.Cookie("platform_token")
	if err != nil || strings.Contains(raw, `"`) {
		fail(w, r, 401, "You are not logged on: missing or malformed platform_token.")
		return false
	}
	f.mu.Lock()
	exp, ok := f.tokens[c.Value]
	f.mu.Unlock()
	if !ok {
		fail(w, r, 401, "Invalid token.")
		return false
	}
	if time.Now().After(exp) {
		fail(w, r, 401, "Token has expired. Log on again.")
		return false
	}
	return true
}

// parseSubmit reads the multipart/mixed submit strictly.
func parseSubmit(r *http.Request) (*pacSubmit, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" || params["boundary"] == "" {
		return nil, fmt.Errorf("Content-Type must be multipart/mixed with a boundary, not %q", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	s := &pacSubmit{params: map[string]pacParam{}, files: map[string][]byte{}}
	part, err := mr.NextPart()
	if err != nil || part.FormName() != "AppName" || part.Header.Get("Content-ID") != "<AppName>" {
		return nil, fmt.Errorf("the first part must be AppName with Content-ID <AppName>")
	}
	app, _ := io.ReadAll(part)
	s.app = string(app)
	part, err = mr.NextPart()
	if err != nil || part.FormName() != "data" {
		return nil, fmt.Errorf("the second part must be data")
	}
	dmt, dparams, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
	if err != nil || dmt != "multipart/mixed" || dparams["boundary"] == "" || dparams["boundary"] == params["boundary"] {
		return nil, fmt.Errorf("the data part must be multipart/mixed with its own boundary")
	}
	if err := s.readParams(multipart.NewReader(part, dparams["boundary"])); err != nil {
		return nil, err
	}
	if err := s.readFiles(mr); err != nil {
		return nil, err
	}
	return s, nil
}

// readParams reads the data part: one <AppParam> per part.
func (s *pacSubmit) readParams(dr *multipart.Reader) error {
	for {
		sub, err := dr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("data: %v", err)
		}
		if smt, _, _ := mime.ParseMediaType(sub.Header.Get("Content-Type")); smt != "application/xml" {
			return fmt.Errorf("parameter %s: Content-Type must be application/xml", sub.FormName())
		}
		var ap struct {
			XMLName xml.Name `xml:"AppParam"`
			ID      string   `xml:"id"`
			Value   string   `xml:"value"`
			Type    *string  `xml:"type"`
		}
		dec := xml.NewDecoder(sub)
		dec.Strict = true
		if err := dec.Decode(&ap); err != nil {
			return fmt.Errorf("parameter %s: %v", sub.FormName(), err)
		}
		if ap.ID != sub.FormName() || ap.Type == nil {
			return fmt.Errorf("parameter %s: id %q and a <type> element are required", sub.FormName(), ap.ID)
		}
		s.params[ap.ID] = pacParam{value: ap.Value, typ: *ap.Type}
		s.order = append(s.order, ap.ID)
	}
}

// readFiles reads the file parts, each declared by a file parameter.
func (s *pacSubmit) readFiles(mr *multipart.Reader) error {
	for {
		fp, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := fp.FormName()
		decl, ok := s.params[name]
		if !ok || decl.typ != "file" || decl.value != name+",upload" {
			return fmt.Errorf("file part %q has no file parameter %q", name, name+",upload")
		}
		if fp.Header.Get("Content-Type") != "application/octet-stream" || fp.Header.Get("Content-ID") != "<"+name+">" {
			return fmt.Errorf("file part %q: needs application/octet-stream and Content-ID <%s>", name, name)
		}
		s.files[name], _ = io.ReadAll(fp)
	}
	for id, p := range s.params {
		if p.typ == "file" {
			if _, ok := s.files[id]; !ok {
				return fmt.Errorf("file parameter %s without a file part", id)
			}
		}
	}
	return nil
}

func (f *fakePAC) submit(w http.ResponseWriter, r *http.Request) {
	s, err := parseSubmit(r)
	if err != nil {
		fail(w, r, 400, err.Error())
		return
	}
	if s.app != "generic" {
		fail(w, r, 400, "Application "+s.app+" does not exist.")
		return
	}
	if s.params["COMMANDTORUN"].value == "" {
		fail(w, r, 400, "COMMANDTORUN is required.")
		return
	}
	f.mu.Lock()
	f.submits = append(f.submits, s)
	id := f.nextID
	f.nextID++
	j := &pacJob{id: id, app: s.app, name: s.params["JOB_NAME"].value, cmd: s.params["COMMANDTORUN"].value,
		params: map[string]string{}, files: s.files, status: "PEND", pendReason: "New job is waiting for scheduling;",
		cwd: "/home/" + f.user + "/pac/" + strconv.Itoa(id), outputs: map[string][]byte{}, submit: time.Now().UTC().Truncate(time.Second)}
	if j.name == "" {
		j.name = strconv.Itoa(id)
	}
	if err := j.makeArray(); err != nil {
		f.nextID--
		f.mu.Unlock()
		fail(w, r, 400, err.Error())
		return
	}
	for k, v := range s.params {
		j.params[k] = v.value
	}
	f.jobs[id] = j
	asString := f.idAsString
	f.mu.Unlock()
	if !wantsJSON(r) {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, "<job><id>%d</id></job>", id)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if asString {
		fmt.Fprintf(w, `{"id":"%d"}`, id)
	} else {
		fmt.Fprintf(w, `{"id":%d}`, id)
	}
}

func (f *fakePAC) kill(w http.ResponseWriter, r *http.Request, ids string) {
	id, err := strconv.Atoi(strings.TrimSpace(ids))
	f.mu.Lock()
	j := f.jobs[id]
	if err != nil || j == nil || j.left {
		f.mu.Unlock()
		fail(w, r, 404, fmt.Sprintf("Job <%s>: No matching job found", ids))
		return
	}
	// bkill of an array's id kills every element still going.
	killed := 0
	for _, e := range append([]*pacJob{j}, j.elems...) {
		if e.status == "DONE" || e.status == "EXIT" || (e == j && j.elems != nil) {
			continue
		}
		e.status, e.exitInfo, e.killedByOwner = "EXIT", f.killInfo, true
		code := 130
		e.exitStatus = &code
		e.end = time.Now().UTC().Truncate(time.Second)
		killed++
	}
	f.mu.Unlock()
	if killed == 0 {
		fail(w, r, 500, fmt.Sprintf("Job <%d>: Job has already finished", id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"message":"Job <%d> is being terminated"}`, id)
}

func (f *fakePAC) jobJSON(j *pacJob) map[string]any {
	m := map[string]any{"jobId": j.idStr(), "jobName": j.name, "jobStatus": j.status, "cwd": j.cwd, "outfile": j.params["OUTPUT_FILE"],
		"command": j.cmd, "queue": orText(j.params["QUEUE"], "normal"), "user": f.user,
		"submitTimeGMT": j.submit.Format(time.RFC3339), "pendReason": j.pendReason}
	if !j.start.IsZero() {
		m["startTime"] = j.start.Format("2006-01-02 15:04:05")
	}
	if !j.end.IsZero() {
		m["endTime"] = j.end.Format("2006-01-02 15:04:05")
	}
	if j.exitStatus != nil {
		m["exitStatus"] = strconv.Itoa(*j.exitStatus)
	}
	if j.exitInfo != "" {
		m["exitInfo"] = j.exitInfo
	}
	return m
}

type xmlJob struct {
	XMLName       xml.Name `xml:"job"`
	JobID         string   `xml:"jobId"`
	JobName       string   `xml:"jobName"`
	JobStatus     string   `xml:"jobStatus"`
	ExitStatus    string   `xml:"exitStatus"`
	ExitInfo      string   `xml:"exitInfo,omitempty"`
	Cwd           string   `xml:"cwd"`
	Outfile       string   `xml:"outfile"`
	PendReason    string   `xml:"pendReason"`
	SubmitTimeGMT string   `xml:"submitTimeGMT"`
	StartTime     string   `xml:"startTime"`
	EndTime       string   `xml:"endTime"`
}

// writeJobs answers a jobs document: {"@total":"N","job":…} or <jobs total="N"><job>…
func (f *fakePAC) writeJobs(w http.ResponseWriter, r *http.Request, elem string, jobs []*pacJob) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		doc := map[string]any{"@total": strconv.Itoa(len(jobs))}
		var list []any
		for _, j := range jobs {
			m := f.jobJSON(j)
			if elem == "pseudoJob" {
				m = map[string]any{"id": m["jobId"], "name": m["jobName"], "status": m["jobStatus"]}
			}
			list = append(list, m)
		}
		key := elem
		if elem == "job" {
			key = f.jobKey
		}
		switch {
		case len(list) == 1 && !f.arrays:
			doc[key] = list[0]
		case len(list) > 0:
			doc[key] = list
		}
		_ = json.NewEncoder(w).Encode(doc)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	fmt.Fprintf(w, `<jobs total="%d"><atom:link rel="self" href="%s"/>`, len(jobs), r.URL.String())
	for _, j := range jobs {
		if elem == "pseudoJob" {
			fmt.Fprintf(w, "<pseudoJob><id>%s</id><name>%s</name><status>%s</status></pseudoJob>", j.idStr(), j.name, j.status)
			continue
		}
		x := xmlJob{JobID: j.idStr(), JobName: j.name, JobStatus: j.status, ExitInfo: j.exitInfo, Cwd: j.cwd, Outfile: j.params["OUTPUT_FILE"], PendReason: j.pendReason,
			SubmitTimeGMT: j.submit.Format(time.RFC3339)}
		if j.exitStatus != nil {
			x.ExitStatus = strconv.Itoa(*j.exitStatus)
		}
		if !j.start.IsZero() {
			x.StartTime = j.start.Format("2006-01-02 15:04:05")
		}
		if !j.end.IsZero() {
			x.EndTime = j.end.Format("2006-01-02 15:04:05")
		}
		b, _ := xml.Marshal(x)
		w.Write(b)
	}
	io.WriteString(w, "</jobs>")
}

// get serves "Get detailed job information by job ID": GET ws/jobs/{jobIds},
// ids separated by commas, none 0 (else 400); the jobs found are listed,
// and 404 when none is.
func (f *fakePAC) get(w http.ResponseWriter, r *http.Request, ids string) {
	var jobs []*pacJob
	f.mu.Lock()
	for _, s := range strings.Split(ids, ",") {
		id, err := strconv.Atoi(s)
		if err != nil || id == 0 {
			f.mu.Unlock()
			fail(w, r, 400, "The job ID cannot be 0 or non-numeric.")
			return
		}
		if j := f.jobs[id]; j != nil && !j.left {
			jobs = append(jobs, j.listed()...)
		}
	}
	f.mu.Unlock()
	if len(jobs) == 0 {
		fail(w, r, 404, "No jobs that match the specified criteria were found.")
		return
	}
	f.writeJobs(w, r, "job", jobs)
}

func (f *fakePAC) list(w http.ResponseWriter, r *http.Request) {
	pat := r.URL.Query().Get("jobname")
	var jobs []*pacJob
	f.mu.Lock()
	for _, j := range f.jobs {
		if j.left {
			continue
		}
		for _, e := range j.listed() {
			if ok, _ := path.Match(pat, e.name); pat == "" || ok {
				jobs = append(jobs, e)
			}
		}
	}
	f.mu.Unlock()
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].id < jobs[b].id })
	if len(jobs) == 0 {
		fail(w, r, 404, "No jobs that match the specified criteria were found.")
		return
	}
	f.writeJobs(w, r, "pseudoJob", jobs)
}

func (f *fakePAC) history(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.URL.Query().Get("ids"))
	f.mu.Lock()
	j := f.jobs[id]
	var text string
	if j != nil && !j.forgotten {
		text = fmt.Sprintf("Job <%d>, Job Name <%s>, User <%s>, Project <default>, Command <%s>; %s: Submitted from host <pac>, to Queue <normal>;",
			j.id, j.name, f.user, j.cmd, j.submit.Format("Mon Jan _2 15:04:05"))
		switch j.status {
		case "DONE":
			text += " Done successfully. The CPU time used is 0.1 seconds;"
		case "EXIT":
			if j.killedByOwner {
				text += " Signal <KILL> requested by user or administrator <" + f.user + ">;"
			}
			code := 1
			if j.exitStatus != nil {
				code = *j.exitStatus
			}
			text += fmt.Sprintf(" Exited with exit code %d. The CPU time used is 0.1 seconds; Completed <exit>;", code)
		}
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/xml")
	if text == "" {
		io.WriteString(w, "<jobHistory/>")
		return
	}
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(text))
	fmt.Fprintf(w, "<jobHistory><history><content>%s</content><timeSummary><timeOfCalculation>%s</timeOfCalculation></timeSummary></history></jobHistory>",
		b.String(), time.Now().UTC().Format(time.RFC3339))
}

func (f *fakePAC) download(w http.ResponseWriter, r *http.Request, ids string) {
	id, _ := strconv.Atoi(ids)
	body, _ := io.ReadAll(r.Body)
	q, _ := url.ParseQuery(string(body))
	dir := q.Get("dir")
	if id == 0 || dir == "" {
		fail(w, r, 400, "dir and job ID must not be empty.")
		return
	}
	f.mu.Lock()
	var data []byte
	ok := false
	if j := f.jobs[id]; j != nil {
		data, ok = j.outputs[dir]
	}
	f.mu.Unlock()
	if !ok {
		fail(w, r, 404, "File "+dir+" does not exist.")
		return
	}
	mw := multipart.NewWriter(w)
	w.Header().Set("Content-Type", "multipart/mixed; boundary="+mw.Boundary())
	h := textproto.MIMEHeader{}
	base := path.Base(dir)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, base, base))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-ID", "<"+base+">")
	pw, _ := mw.CreatePart(h)
	pw.Write(data)
	mw.Close()
}

// arrayName is bsub -J's array syntax: "name[1-5,9]%2".
var arrayName = regexp.MustCompile(`^(.*)\[([0-9,-]+)\](?:%([0-9]+))?$`)

// makeArray makes j an array when its name asks for one, with LSF's
// rules: indexes from 1 to MAX_JOB_ARRAY_SIZE's default 1000 (bsub refuses
// others with "Bad job name"), a specification of at most 255 characters, each
// element named "<name>[<index>]", listed as "<id>[<index>]".
func (j *pacJob) makeArray() error {
	m := arrayName.FindStringSubmatch(j.name)
	if m == nil {
		return nil
	}
	j.maxParallel, _ = strconv.Atoi(m[3])
	if len(m[1])+len(m[2])+2 > 255 { // the documented longest array specification
		return fmt.Errorf("Bad job name. Job not submitted.")
	}
	for _, part := range strings.Split(m[2], ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err1 := strconv.Atoi(lo)
		last, err2 := first, error(nil)
		if isRange {
			last, err2 = strconv.Atoi(hi)
		}
		// Indexes from 1 up to MAX_JOB_ARRAY_SIZE (1000 by default).
		if err1 != nil || err2 != nil || first < 1 || last < first || last > 1000 {
			return fmt.Errorf("Bad job name. Job not submitted.")
		}
		for i := first; i <= last; i++ {
			e := *j
			e.index, e.name, e.params = i, fmt.Sprintf("%s[%d]", m[1], i), j.params
			e.cwd = j.cwd
			j.elems = append(j.elems, &e)
		}
	}
	return nil
}

// listed are the entries GET ws/jobs shows for j: an array's elements.
func (j *pacJob) listed() []*pacJob {
	if j.elems != nil {
		return j.elems
	}
	return []*pacJob{j}
}

// setElem changes the element index (LSF's) of the array id.
func (f *fakePAC) setElem(id, index int, fn func(j *pacJob)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.jobs[id].elems {
		if e.index == index {
			fn(e)
			return
		}
	}
	f.t.Fatalf("array %d has no element %d", id, index)
}
