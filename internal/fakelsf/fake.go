// Package fakelsf is a fake IBM Spectrum LSF Application Center (its web
// services, as the reference describes them) for the lsf backend's tests
// (New) and for a person trying that backend without a cluster (Listen,
// started by hack/fakes). It is never linked into bridge-runner.
package fakelsf

import (
	"bytes"
	"cmp"
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

	"github.com/bridge-runner/bridge-runner/internal/fakeserve"
)

// Server is an httptest LSF Application Center that speaks the web
// services as backend-apis.md §2 describes them: XML logon, the
// platform_token cookie with #quote#, multipart/mixed submit with a nested
// data part of <AppParam> XML, JSON (the XML mapping, "@" attributes) or XML
// answers chosen by Accept, 404 once a job has left mbatchd with the
// jobhistory fallback, both kill calls, file download, and the detailed
// queue information (queues.go). Faults can be injected per
// request.
type Server struct {
	*httptest.Server
	t testing.TB

	Mu          sync.Mutex
	User, Pass  string
	Tokens      map[string]time.Time // cookie form (#quote#) -> expiry
	TokenTTL    time.Duration
	Jobs        map[int]*Job
	NextID      int
	Faults      []*Fault
	Requests    []string
	Logons      int
	JacsKill    bool   // serve POST ws/jobs/kill
	UserCmdKill bool   // serve POST ws/userCmd
	IDAsString  bool   // submit answers {"id":"N"} instead of {"id":N}
	JobKey      string // JSON key of job elements: "job" or "Job"
	Arrays      bool   // JSON: one job as an array of one
	KillInfo    string // exitInfo of a killed job
	Submits     []*Submit
	RunFor      time.Duration     // Listen's: how long a job runs; 0: jobs keep the state set
	QueueStatus map[string]string // queue -> status as bqueues writes it (queues.go)
}

type Job struct {
	ID                 int
	App, Name, Cmd     string
	Params             map[string]string
	Files              map[string][]byte
	Status             string
	ExitStatus         *int
	ExitInfo           string
	PendReason         string
	Cwd                string
	Outputs            map[string][]byte // absolute path -> content
	Left, Forgotten    bool              // left mbatchd (history only); gone from history too
	KilledByOwner      bool
	Submit, Start, End time.Time
	Index              int    // an array's element: its LSF index (from 1)
	Elems              []*Job // an array: its elements
	MaxParallel        int    // an array's %M
}

// idStr is the job's id as LSF writes it: "<id>[<index>]" for an element.
func (j *Job) IDStr() string {
	if j.Index > 0 {
		return fmt.Sprintf("%d[%d]", j.ID, j.Index)
	}
	return strconv.Itoa(j.ID)
}

// OutputPath is where the job (an array's element) writes its output, as
// bsub -o names it: OUTPUT_FILE in its working directory, %J the job id
// (an array's) and %I the element's index (0 for a job that is no array).
func (j *Job) OutputPath() string {
	out := strings.NewReplacer("%J", strconv.Itoa(j.ID), "%I", strconv.Itoa(j.Index)).Replace(j.Params["OUTPUT_FILE"])
	if path.IsAbs(out) {
		return out
	}
	return j.Cwd + "/" + out
}

// ErrorPath is where the job (an array's element) writes its standard
// error, as bsub -e names it (ERROR_FILE, as OutputPath), or "" without
// one: then it goes to the output file.
func (j *Job) ErrorPath() string {
	errf := strings.NewReplacer("%J", strconv.Itoa(j.ID), "%I", strconv.Itoa(j.Index)).Replace(j.Params["ERROR_FILE"])
	if errf == "" || path.IsAbs(errf) {
		return errf
	}
	return j.Cwd + "/" + errf
}

type Submit struct {
	App    string
	Params map[string]Param
	Order  []string
	Files  map[string][]byte
}

type Param struct{ Value, Typ string }

type Fault struct {
	Method, Path string // path suffix; "" = any
	Status       int
	Body         string
	ContentType  string
	RetryAfter   string
	Drop         bool
	Delay        time.Duration
	Times        int // 0 = always
}

// New starts the fake for a test (closed when the test ends): jobs stay as
// submitted until the test changes them.
func New(t testing.TB, tls bool) *Server {
	t.Helper()
	f := newServer()
	f.t = t
	if tls {
		f.Server = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	} else {
		f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	}
	t.Cleanup(f.Close)
	return f
}

// Listen starts the fake for a person trying the lsf backend (hack/fakes):
// plain HTTP on addr, which should be a loopback address, and jobs that
// go PEND, RUN, then DONE runFor after their submit, with a line in their
// OUTPUT_FILE (the fake runs no command).
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
	return &Server{User: "lsfuser", Pass: `p&ss<"word>`, Tokens: map[string]time.Time{}, TokenTTL: time.Hour,
		Jobs: map[int]*Job{}, NextID: 1234, JacsKill: true, UserCmdKill: true, JobKey: "job", KillInfo: "TERM_OWNER",
		QueueStatus: map[string]string{"normal": "Open:Active", "night": "Open:Inact", "retired": "Closed:Inact"}}
}

// advance moves the jobs of a fake started with Listen on (a test's fake
// has RunFor 0 and sets its jobs' states itself).
func (f *Server) advance() {
	if f.RunFor <= 0 {
		return
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	now := time.Now().UTC().Truncate(time.Second)
	for _, j := range f.Jobs {
		for _, e := range append([]*Job{j}, j.Elems...) {
			switch {
			case e.Status != "PEND" && e.Status != "RUN":
			case now.Sub(e.Submit) >= f.RunFor:
				zero := 0
				e.Status, e.ExitStatus, e.End, e.PendReason = "DONE", &zero, now, ""
				if e.Start.IsZero() {
					e.Start = now
				}
				if out := e.Params["OUTPUT_FILE"]; out != "" && e.Outputs != nil {
					e.Outputs[e.OutputPath()] = []byte("fake LSF: job " + e.IDStr() + " is DONE (the fake runs no command)\n")
				}
				if errf := e.ErrorPath(); errf != "" && e.Outputs != nil {
					e.Outputs[errf] = []byte("fake LSF: job " + e.IDStr() + " wrote no error (the fake runs no command)\n")
				}
			case e.Status == "PEND":
				e.Status, e.Start, e.PendReason = "RUN", now, ""
			}
		}
	}
}

func (f *Server) AddFault(fl *Fault) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Faults = append(f.Faults, fl)
}

func (f *Server) JobByID(id int) *Job {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.Jobs[id]
}

func (f *Server) Set(id int, fn func(j *Job)) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	fn(f.Jobs[id])
}

func (f *Server) ExpireTokens() {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for k := range f.Tokens {
		f.Tokens[k] = time.Now().Add(-time.Second)
	}
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

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
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
func (f *Server) route(w http.ResponseWriter, r *http.Request, p string) {
	f.advance()
	switch {
	case p == "jobs/submit" && r.Method == http.MethodPost:
		f.submit(w, r)
	case p == "jobs/kill" && r.Method == http.MethodPost && f.JacsKill:
		f.jobsKill(w, r)
	case p == "userCmd" && r.Method == http.MethodPost && f.UserCmdKill:
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

// injectFault answers r with the first matching Fault, if any.
func (f *Server) injectFault(w http.ResponseWriter, r *http.Request) bool {
	f.Mu.Lock()
	f.Requests = append(f.Requests, r.Method+" "+r.URL.Path)
	var fl *Fault
	for _, c := range f.Faults {
		if c.Times >= 0 && (c.Method == "" || c.Method == r.Method) && strings.HasSuffix(r.URL.Path, c.Path) {
			fl = c
			if fl.Times > 0 {
				fl.Times--
				if fl.Times == 0 {
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
	if fl.Delay > 0 {
		select {
		case <-time.After(fl.Delay):
		case <-r.Context().Done():
			return true
		}
	}
	if fl.Drop {
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close()
		return true
	}
	if fl.RetryAfter != "" {
		w.Header().Set("Retry-After", fl.RetryAfter)
	}
	w.Header().Set("Content-Type", cmp.Or(fl.ContentType, "application/json"))
	w.WriteHeader(fl.Status)
	io.WriteString(w, fl.Body)
	return true
}

// jobsKill serves POST ws/jobs/kill (ids=... form).
func (f *Server) jobsKill(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	q, err := url.ParseQuery(string(body))
	if err != nil || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		fail(w, r, 400, "bad form")
		return
	}
	f.kill(w, r, q.Get("ids"))
}

// userCmd serves POST ws/userCmd with <UserCmd><cmd>bkill ID</cmd>.
func (f *Server) userCmd(w http.ResponseWriter, r *http.Request) {
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

func (f *Server) logon(w http.ResponseWriter, r *http.Request) {
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
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Logons++
	if u.Name != f.User || u.Pass != f.Pass {
		fail(w, r, 403, "Logon failed: wrong user name or password.")
		return
	}
	rnd := make([]byte, 24)
	_, _ = rand.Read(rnd)
	exp := time.Now().Add(f.TokenTTL).UTC().Truncate(time.Second)
	tok := fmt.Sprintf(`%s"%s"%s`, u.Name, exp.Format(time.RFC3339), base64.StdEncoding.EncodeToString(rnd))
	f.Tokens[strings.ReplaceAll(tok, `"`, "#quote#")] = exp
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

func (f *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	raw := r.Header.Get("Cookie")
	c, err := r.Cookie("platform_token")
	if err != nil || strings.Contains(raw, `"`) {
		fail(w, r, 401, "You are not logged on: missing or malformed platform_token.")
		return false
	}
	f.Mu.Lock()
	exp, ok := f.Tokens[c.Value]
	f.Mu.Unlock()
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
func ParseSubmit(r *http.Request) (*Submit, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" || params["boundary"] == "" {
		return nil, fmt.Errorf("Content-Type must be multipart/mixed with a boundary, not %q", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	s := &Submit{Params: map[string]Param{}, Files: map[string][]byte{}}
	part, err := mr.NextPart()
	if err != nil || part.FormName() != "AppName" || part.Header.Get("Content-ID") != "<AppName>" {
		return nil, fmt.Errorf("the first part must be AppName with Content-ID <AppName>")
	}
	app, _ := io.ReadAll(part)
	s.App = string(app)
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
func (s *Submit) readParams(dr *multipart.Reader) error {
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
		s.Params[ap.ID] = Param{Value: ap.Value, Typ: *ap.Type}
		s.Order = append(s.Order, ap.ID)
	}
}

// readFiles reads the file parts, each declared by a file parameter.
func (s *Submit) readFiles(mr *multipart.Reader) error {
	for {
		fp, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := fp.FormName()
		decl, ok := s.Params[name]
		if !ok || decl.Typ != "file" || decl.Value != name+",upload" {
			return fmt.Errorf("file part %q has no file parameter %q", name, name+",upload")
		}
		if fp.Header.Get("Content-Type") != "application/octet-stream" || fp.Header.Get("Content-ID") != "<"+name+">" {
			return fmt.Errorf("file part %q: needs application/octet-stream and Content-ID <%s>", name, name)
		}
		s.Files[name], _ = io.ReadAll(fp)
	}
	for id, p := range s.Params {
		if p.Typ == "file" {
			if _, ok := s.Files[id]; !ok {
				return fmt.Errorf("file parameter %s without a file part", id)
			}
		}
	}
	return nil
}

func (f *Server) submit(w http.ResponseWriter, r *http.Request) {
	s, err := ParseSubmit(r)
	if err != nil {
		fail(w, r, 400, err.Error())
		return
	}
	if s.App != "generic" {
		fail(w, r, 400, "Application "+s.App+" does not exist.")
		return
	}
	if s.Params["COMMANDTORUN"].Value == "" {
		fail(w, r, 400, "COMMANDTORUN is required.")
		return
	}
	f.Mu.Lock()
	f.Submits = append(f.Submits, s)
	id := f.NextID
	f.NextID++
	j := &Job{ID: id, App: s.App, Name: s.Params["JOB_NAME"].Value, Cmd: s.Params["COMMANDTORUN"].Value,
		Params: map[string]string{}, Files: s.Files, Status: "PEND", PendReason: "New job is waiting for scheduling;",
		Cwd: "/home/" + f.User + "/pac/" + strconv.Itoa(id), Outputs: map[string][]byte{}, Submit: time.Now().UTC().Truncate(time.Second)}
	if j.Name == "" {
		j.Name = strconv.Itoa(id)
	}
	if err := j.MakeArray(); err != nil {
		f.NextID--
		f.Mu.Unlock()
		fail(w, r, 400, err.Error())
		return
	}
	for k, v := range s.Params {
		j.Params[k] = v.Value
	}
	f.Jobs[id] = j
	asString := f.IDAsString
	f.Mu.Unlock()
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

func (f *Server) kill(w http.ResponseWriter, r *http.Request, ids string) {
	id, err := strconv.Atoi(strings.TrimSpace(ids))
	f.Mu.Lock()
	j := f.Jobs[id]
	if err != nil || j == nil || j.Left {
		f.Mu.Unlock()
		fail(w, r, 404, fmt.Sprintf("Job <%s>: No matching job found", ids))
		return
	}
	// bkill of an array's id kills every element still going.
	killed := 0
	for _, e := range append([]*Job{j}, j.Elems...) {
		if e.Status == "DONE" || e.Status == "EXIT" || (e == j && j.Elems != nil) {
			continue
		}
		e.Status, e.ExitInfo, e.KilledByOwner = "EXIT", f.KillInfo, true
		code := 130
		e.ExitStatus = &code
		e.End = time.Now().UTC().Truncate(time.Second)
		killed++
	}
	f.Mu.Unlock()
	if killed == 0 {
		fail(w, r, 500, fmt.Sprintf("Job <%d>: Job has already finished", id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"message":"Job <%d> is being terminated"}`, id)
}

func (f *Server) jobJSON(j *Job) map[string]any {
	m := map[string]any{"jobId": j.IDStr(), "jobName": j.Name, "jobStatus": j.Status, "cwd": j.Cwd, "outfile": j.Params["OUTPUT_FILE"], "errfile": j.Params["ERROR_FILE"],
		"command": j.Cmd, "queue": cmp.Or(j.Params["QUEUE"], "normal"), "user": f.User,
		"submitTimeGMT": j.Submit.Format(time.RFC3339), "pendReason": j.PendReason}
	if !j.Start.IsZero() {
		m["startTime"] = j.Start.Format("2006-01-02 15:04:05")
	}
	if !j.End.IsZero() {
		m["endTime"] = j.End.Format("2006-01-02 15:04:05")
	}
	if j.ExitStatus != nil {
		m["exitStatus"] = strconv.Itoa(*j.ExitStatus)
	}
	if j.ExitInfo != "" {
		m["exitInfo"] = j.ExitInfo
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
	Errfile       string   `xml:"errfile"`
	PendReason    string   `xml:"pendReason"`
	SubmitTimeGMT string   `xml:"submitTimeGMT"`
	StartTime     string   `xml:"startTime"`
	EndTime       string   `xml:"endTime"`
}

// writeJobs answers a jobs document: {"@total":"N","job":…} or <jobs total="N"><job>…
func (f *Server) writeJobs(w http.ResponseWriter, r *http.Request, elem string, jobs []*Job) {
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
			key = f.JobKey
		}
		switch {
		case len(list) == 1 && !f.Arrays:
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
			fmt.Fprintf(w, "<pseudoJob><id>%s</id><name>%s</name><status>%s</status></pseudoJob>", j.IDStr(), j.Name, j.Status)
			continue
		}
		x := xmlJob{JobID: j.IDStr(), JobName: j.Name, JobStatus: j.Status, ExitInfo: j.ExitInfo, Cwd: j.Cwd, Outfile: j.Params["OUTPUT_FILE"], Errfile: j.Params["ERROR_FILE"], PendReason: j.PendReason,
			SubmitTimeGMT: j.Submit.Format(time.RFC3339)}
		if j.ExitStatus != nil {
			x.ExitStatus = strconv.Itoa(*j.ExitStatus)
		}
		if !j.Start.IsZero() {
			x.StartTime = j.Start.Format("2006-01-02 15:04:05")
		}
		if !j.End.IsZero() {
			x.EndTime = j.End.Format("2006-01-02 15:04:05")
		}
		b, _ := xml.Marshal(x)
		w.Write(b)
	}
	io.WriteString(w, "</jobs>")
}

// get serves "Get detailed job information by job ID": GET ws/jobs/{jobIds},
// ids separated by commas, none 0 (else 400); the jobs found are listed,
// and 404 when none is.
func (f *Server) get(w http.ResponseWriter, r *http.Request, ids string) {
	var jobs []*Job
	f.Mu.Lock()
	for _, s := range strings.Split(ids, ",") {
		id, err := strconv.Atoi(s)
		if err != nil || id == 0 {
			f.Mu.Unlock()
			fail(w, r, 400, "The job ID cannot be 0 or non-numeric.")
			return
		}
		if j := f.Jobs[id]; j != nil && !j.Left {
			jobs = append(jobs, j.Listed()...)
		}
	}
	f.Mu.Unlock()
	if len(jobs) == 0 {
		fail(w, r, 404, "No jobs that match the specified criteria were found.")
		return
	}
	f.writeJobs(w, r, "job", jobs)
}

func (f *Server) list(w http.ResponseWriter, r *http.Request) {
	pat := r.URL.Query().Get("jobname")
	var jobs []*Job
	f.Mu.Lock()
	for _, j := range f.Jobs {
		if j.Left {
			continue
		}
		for _, e := range j.Listed() {
			if ok, _ := path.Match(pat, e.Name); pat == "" || ok {
				jobs = append(jobs, e)
			}
		}
	}
	f.Mu.Unlock()
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].ID < jobs[b].ID })
	if len(jobs) == 0 {
		fail(w, r, 404, "No jobs that match the specified criteria were found.")
		return
	}
	f.writeJobs(w, r, "pseudoJob", jobs)
}

func (f *Server) history(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.URL.Query().Get("ids"))
	f.Mu.Lock()
	j := f.Jobs[id]
	var text string
	if j != nil && !j.Forgotten {
		text = fmt.Sprintf("Job <%d>, Job Name <%s>, User <%s>, Project <default>, Command <%s>; %s: Submitted from host <pac>, to Queue <normal>;",
			j.ID, j.Name, f.User, j.Cmd, j.Submit.Format("Mon Jan _2 15:04:05"))
		switch j.Status {
		case "DONE":
			text += " Done successfully. The CPU time used is 0.1 seconds;"
		case "EXIT":
			if j.KilledByOwner {
				text += " Signal <KILL> requested by user or administrator <" + f.User + ">;"
			}
			code := 1
			if j.ExitStatus != nil {
				code = *j.ExitStatus
			}
			text += fmt.Sprintf(" Exited with exit code %d. The CPU time used is 0.1 seconds; Completed <exit>;", code)
		}
	}
	f.Mu.Unlock()
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

func (f *Server) download(w http.ResponseWriter, r *http.Request, ids string) {
	id, _ := strconv.Atoi(ids)
	body, _ := io.ReadAll(r.Body)
	q, _ := url.ParseQuery(string(body))
	dir := q.Get("dir")
	if id == 0 || dir == "" {
		fail(w, r, 400, "dir and job ID must not be empty.")
		return
	}
	f.Mu.Lock()
	var data []byte
	ok := false
	if j := f.Jobs[id]; j != nil {
		data, ok = j.Outputs[dir]
	}
	f.Mu.Unlock()
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
func (j *Job) MakeArray() error {
	m := arrayName.FindStringSubmatch(j.Name)
	if m == nil {
		return nil
	}
	j.MaxParallel, _ = strconv.Atoi(m[3])
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
			e.Index, e.Name, e.Params = i, fmt.Sprintf("%s[%d]", m[1], i), j.Params
			e.Cwd = j.Cwd
			j.Elems = append(j.Elems, &e)
		}
	}
	return nil
}

// listed are the entries GET ws/jobs shows for j: an array's elements.
func (j *Job) Listed() []*Job {
	if j.Elems != nil {
		return j.Elems
	}
	return []*Job{j}
}

// setElem changes the element index (LSF's) of the array id.
func (f *Server) SetElem(id, index int, fn func(j *Job)) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for _, e := range f.Jobs[id].Elems {
		if e.Index == index {
			fn(e)
			return
		}
	}
	f.t.Fatalf("array %d has no element %d", id, index)
}
