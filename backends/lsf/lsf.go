package lsf

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
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

	mu         sync.Mutex // guards the session and killVia
	token      string     // as sent in the cookie (quotes replaced)
	tokenRenew time.Time
	killVia    string // "", "jobs/kill" or "userCmd": the kill call that works
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
		b.client = &http.Client{}
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

// spec is a job ready to submit.
type spec struct {
	app     string
	params  [][2]string // id, value in order
	files   []file
	jobName string
}

type file struct {
	name string
	data []byte              // or
	in   *backends.InputFile // streamed
}

func (f file) size() int64 {
	if f.in != nil {
		return f.in.Size
	}
	return int64(len(f.data))
}

// property keys: canonical name, aliases, and the application parameter.
var propKeys = []struct {
	names []string
	param string
}{
	{[]string{"queue", "Queue", "QUEUE"}, "QUEUE"},
	{[]string{"jobName", "JOB_NAME"}, "JOB_NAME"},
	{[]string{"outputFile", "OutputFileName", "OUTPUT_FILE"}, "OUTPUT_FILE"},
	{[]string{"errorFile", "ErrorFileName", "ERROR_FILE"}, "ERROR_FILE"},
	{[]string{"runLimitHour", "RunLimitHour", "RUNLIMITHOUR"}, "RUNLIMITHOUR"},
	{[]string{"runLimitMinute", "RunLimitMinute", "RUNLIMITMINUTE"}, "RUNLIMITMINUTE"},
	{[]string{"extraParams", "EXTRA_PARAMS"}, "EXTRA_PARAMS"},
	{[]string{"numNodes", "numnodes", "NodesNumber"}, "-nnodes"},
	{[]string{"app", "AppName"}, "AppName"},
	{[]string{"params"}, "params"},
}

var reservedParams = map[string]bool{"COMMANDTORUN": true, "JOB_NAME": true, "QUEUE": true, "OUTPUT_FILE": true,
	"ERROR_FILE": true, "RUNLIMITHOUR": true, "RUNLIMITMINUTE": true, "EXTRA_PARAMS": true}

var paramID = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func knownKeys() string {
	var s []string
	for _, k := range propKeys {
		s = append(s, k.names[0])
	}
	return strings.Join(s, ", ")
}

// buildSpec turns the job into application parameters and files.
func buildSpec(job backends.Job) (*spec, error) {
	sp := &spec{app: "generic"}
	vals := map[string]string{}
	var extra []string
	custom := map[string]string{}
	if len(bytes.TrimSpace(job.Properties)) > 0 {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(job.Properties, &raw); err != nil {
			return nil, backends.Invalid("jobproperties", "not a JSON object: %v", err)
		}
		seen := map[string]string{}
		keys := make([]string, 0, len(raw))
		for k := range raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := raw[k]
			param := ""
			for _, pk := range propKeys {
				for _, n := range pk.names {
					if n == k {
						param = pk.param
					}
				}
			}
			switch k {
			case "kill":
				return nil, backends.Invalid("jobproperties", "kill is not a job property here; set kill=true in the record (or run cleanup) to cancel the job")
			case "pastid", "inputfiledirectory":
				return nil, backends.Invalid("jobproperties", "%s is not needed: jobdata.additionalData files are uploaded with the job", k)
			case "COMMANDTORUN":
				return nil, backends.Invalid("jobproperties", "COMMANDTORUN comes from jobdata.jobScript (a remote path or a script); remove it")
			}
			if param == "" {
				return nil, backends.Invalid("jobproperties", "unknown key %q; the lsf backend takes %s (and the Bridge Operator's Queue, RunLimitHour, RunLimitMinute, OutputFileName, ErrorFileName, NodesNumber)", k, knownKeys())
			}
			if other, dup := seen[param]; dup {
				return nil, backends.Invalid("jobproperties", "%q and %q set the same thing; keep one", other, k)
			}
			seen[param] = k
			if param == "params" {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(v, &m); err != nil {
					return nil, backends.Invalid("jobproperties", "params must be an object of application parameter ids to values: %v", err)
				}
				for id, pv := range m {
					if !paramID.MatchString(id) {
						return nil, backends.Invalid("jobproperties", "params: %q is not an application parameter id", id)
					}
					s, err := scalar(pv)
					if err != nil {
						return nil, backends.Invalid("jobproperties", "params.%s: %v", id, err)
					}
					custom[id] = s
				}
				continue
			}
			s, err := scalar(v)
			if err != nil {
				return nil, backends.Invalid("jobproperties", "%s: %v", k, err)
			}
			switch param {
			case "RUNLIMITHOUR", "RUNLIMITMINUTE", "-nnodes":
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || n < 0 || (param == "RUNLIMITMINUTE" && n > 59) || (param == "-nnodes" && n < 1) {
					want := "a whole number of hours >= 0"
					switch param {
					case "RUNLIMITMINUTE":
						want = "a whole number of minutes from 0 to 59"
					case "-nnodes":
						want = "a whole number of nodes >= 1"
					}
					return nil, backends.Invalid("jobproperties", "%s must be %s, not %q", k, want, s)
				}
				s = strconv.Itoa(n)
			}
			switch param {
			case "-nnodes":
				extra = append(extra, "-nnodes "+s)
			case "AppName":
				if s == "" || strings.ContainsAny(s, "\r\n") {
					return nil, backends.Invalid("jobproperties", "%s must name an application, e.g. generic", k)
				}
				sp.app = s
			case "EXTRA_PARAMS":
				if s != "" {
					extra = append([]string{s}, extra...)
				}
			default:
				if strings.ContainsAny(s, "\r\n") {
					return nil, backends.Invalid("jobproperties", "%s must be one line", k)
				}
				vals[param] = s
			}
		}
	}
	if !validKey(job.Key) {
		return nil, backends.Invalid("idempotency key", "%q is not a plain name", job.Key)
	}
	sp.jobName = job.Key
	if n := vals["JOB_NAME"]; n != "" {
		sp.jobName = job.Key + "-" + n
	} else if job.Name != "" {
		sp.jobName = job.Key + "-" + job.Name
	}
	var cmd string
	switch {
	case job.ScriptPath != "":
		if strings.ContainsAny(job.ScriptPath, "\r\n") {
			return nil, backends.Invalid("jobdata.jobScript", "a remote script path must be one line")
		}
		cmd = job.ScriptPath
	case job.Script != "":
		name := job.Key + ".sh"
		sp.files = append(sp.files, file{name: name, data: []byte(job.Script)})
		if strings.HasPrefix(job.Script, "#!") {
			cmd = "chmod 755 ./" + name + " && ./" + name
		} else {
			cmd = "/bin/sh ./" + name
		}
	default:
		return nil, backends.Invalid("jobdata.jobScript", "the lsf backend needs a script (inline or s3) or a remote path to run")
	}
	if len(job.Parameters) > 0 {
		sp.files = append(sp.files, file{name: "bridge-parameters.json", data: job.Parameters})
	}
	if len(job.Metadata) > 0 {
		sp.files = append(sp.files, file{name: "bridge-metadata.json", data: job.Metadata})
	}
	names := map[string]bool{}
	for _, f := range sp.files {
		names[f.name] = true
	}
	for i := range job.Inputs {
		in := &job.Inputs[i]
		name := path.Base(strings.ReplaceAll(in.Name, "\\", "/"))
		if name == "." || name == "/" || name == ".." || !safeFileName(name) {
			return nil, backends.Invalid("jobdata.additionalData", "%q has no usable file name (letters, digits, '.', '-', '_')", in.Name)
		}
		if names[name] {
			return nil, backends.Invalid("jobdata.additionalData", "two input files are named %q", name)
		}
		names[name] = true
		sp.files = append(sp.files, file{name: name, in: in})
	}
	sp.params = append(sp.params, [2]string{"COMMANDTORUN", cmd}, [2]string{"JOB_NAME", sp.jobName})
	for _, p := range []string{"QUEUE", "OUTPUT_FILE", "ERROR_FILE", "RUNLIMITHOUR", "RUNLIMITMINUTE"} {
		if v := vals[p]; v != "" {
			sp.params = append(sp.params, [2]string{p, v})
		}
	}
	if len(extra) > 0 {
		sp.params = append(sp.params, [2]string{"EXTRA_PARAMS", strings.Join(extra, " ")})
	}
	ids := make([]string, 0, len(custom))
	for id := range custom {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if reservedParams[id] {
			return nil, backends.Invalid("jobproperties", "params.%s is set from jobdata.jobScript or a jobproperties key of its own; remove it from params", id)
		}
		if names[id] {
			return nil, backends.Invalid("jobproperties", "params.%s collides with a file of the same name", id)
		}
		sp.params = append(sp.params, [2]string{id, custom[id]})
	}
	return sp, nil
}

func scalar(v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var n json.Number
	if json.Unmarshal(v, &n) == nil {
		return n.String(), nil
	}
	var bl bool
	if json.Unmarshal(v, &bl) == nil {
		return strconv.FormatBool(bl), nil
	}
	return "", fmt.Errorf("must be a string or a number, not %s", string(v))
}

func safeFileName(n string) bool {
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return n != ""
}

func validKey(k string) bool { return k != "" && safeFileName(k) }

// Validate checks the job and that credentials are present, without
// contacting Application Center.
func (b *Backend) Validate(job backends.Job) error {
	if _, err := buildSpec(job); err != nil {
		return err
	}
	_, _, err := b.credentials()
	return err
}

// appParam is one application parameter of the submit's data part.
type appParam struct {
	XMLName xml.Name `xml:"AppParam"`
	ID      string   `xml:"id"`
	Value   string   `xml:"value"`
	Type    string   `xml:"type"`
}

func boundary() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "br" + hex.EncodeToString(b)
}

// writeSubmit writes the multipart/mixed submit body.
func writeSubmit(ctx context.Context, w io.Writer, sp *spec, outer, inner string) error {
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(outer); err != nil {
		return err
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="AppName"`)
	h.Set("Content-ID", "<AppName>")
	pw, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(pw, sp.app); err != nil {
		return err
	}
	var data bytes.Buffer
	dw := multipart.NewWriter(&data)
	if err := dw.SetBoundary(inner); err != nil {
		return err
	}
	addParam := func(p appParam) error {
		ph := textproto.MIMEHeader{}
		ph.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"`, p.ID))
		ph.Set("Content-Type", "application/xml; charset=UTF-8")
		part, err := dw.CreatePart(ph)
		if err != nil {
			return err
		}
		x, err := xml.Marshal(p)
		if err != nil {
			return err
		}
		_, err = part.Write(x)
		return err
	}
	for _, p := range sp.params {
		if err := addParam(appParam{ID: p[0], Value: p[1]}); err != nil {
			return err
		}
	}
	for _, f := range sp.files {
		if err := addParam(appParam{ID: f.name, Value: f.name + ",upload", Type: "file"}); err != nil {
			return err
		}
	}
	if err := dw.Close(); err != nil {
		return err
	}
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="data"`)
	h.Set("Content-ID", "<data>")
	h.Set("Content-Type", "multipart/mixed; boundary="+inner)
	if pw, err = mw.CreatePart(h); err != nil {
		return err
	}
	if _, err := pw.Write(data.Bytes()); err != nil {
		return err
	}
	for _, f := range sp.files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, f.name, f.name))
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-ID", "<"+f.name+">")
		pw, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		if f.in == nil {
			if _, err := pw.Write(f.data); err != nil {
				return err
			}
			continue
		}
		rc, err := f.in.Open(ctx)
		if err != nil {
			return fmt.Errorf("opening input %s: %w", f.in.Name, err)
		}
		_, err = io.Copy(pw, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("sending input %s: %w", f.in.Name, err)
		}
	}
	return mw.Close()
}

// Submit submits the job to the application and returns the LSF job id.
func (b *Backend) Submit(ctx context.Context, job backends.Job) (string, error) {
	sp, err := buildSpec(job)
	if err != nil {
		return "", err
	}
	outer, inner := boundary(), boundary()
	var total int64
	for _, f := range sp.files {
		total += max(f.size(), 0)
	}
	body := func() (io.Reader, error) {
		if total <= maxBufferedSubmit {
			var buf bytes.Buffer
			if err := writeSubmit(ctx, &buf, sp, outer, inner); err != nil {
				return nil, err
			}
			return bytes.NewReader(buf.Bytes()), nil
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeSubmit(ctx, pw, sp, outer, inner)) }()
		return pr, nil
	}
	r := request{method: http.MethodPost, path: "/ws/jobs/submit", contentType: "multipart/mixed; boundary=" + outer,
		accept: "application/json", body: body}
	buf, err := b.do(ctx, r)
	if err != nil {
		if se := asStatus(err); se != nil && (se.status == http.StatusBadRequest || se.status == http.StatusUnprocessableEntity) {
			return "", backends.Invalid("jobproperties", "Application Center refused the job: %s", orText(se.msg, "bad request"))
		}
		return "", transientOr(err)
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return "", fmt.Errorf("%s: cannot read the answer: %w", r, err)
	}
	id := str(get(doc, "id", "jobId"))
	if id == "" {
		if j := firstMap(get(doc, "job")); j != nil {
			id = str(get(j, "id", "jobId"))
		}
	}
	if !validID(id) {
		// Never report a job that may not exist (the Bridge Operator
		// followed job 0 forever).
		return "", fmt.Errorf("%s: HTTP 200 without a job id: %s", r, orText(errorMessage(buf), string(bytes.TrimSpace(buf))))
	}
	return id, nil
}

// validID: LSF job ids are positive numbers (array jobs: 123[4]).
func validID(id string) bool {
	base, idx, arr := strings.Cut(id, "[")
	if arr && (!strings.HasSuffix(idx, "]") || !digits(strings.TrimSuffix(idx, "]"))) {
		return false
	}
	return digits(base) && strings.Trim(base, "0") != "" && len(base) <= 12
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// jobEntries finds the job elements of a jobs answer, whatever their casing
// and wrapping.
func jobEntries(doc node) []node {
	if inner := firstMap(get(doc, "jobs")); inner != nil && get(doc, "job", "pseudoJob") == nil {
		doc = inner
	}
	return list(get(doc, "job", "pseudoJob"))
}

func entryID(e node) string { return str(get(e, "jobId", "id", "jobID")) }

// FindByKey lists the user's jobs named <key>* and returns the one whose
// name is the key or starts with "<key>-".
func (b *Backend) FindByKey(ctx context.Context, key string) (string, error) {
	if !validKey(key) {
		return "", nil
	}
	r := request{method: http.MethodGet, path: "/ws/jobs", query: url.Values{"jobname": {key + "*"}}, accept: "application/json"}
	buf, err := b.do(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound {
		return "", nil // "No jobs that match the specified criteria were found."
	}
	if err != nil {
		return "", transientOr(err)
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return "", fmt.Errorf("%s: cannot read the answer: %w", r, err)
	}
	var found []string
	for _, e := range jobEntries(doc) {
		name, id := str(get(e, "jobName", "name")), entryID(e)
		if (name == key || strings.HasPrefix(name, key+"-")) && validID(id) && !contains(found, id) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	sort.Slice(found, func(i, j int) bool { return idNum(found[i]) < idNum(found[j]) })
	b.log.Warn("several LSF jobs carry this idempotency key; adopting the first", "key", key, "jobs", strings.Join(found, ","), "adopted", found[0])
	return found[0], nil
}

func idNum(id string) int64 {
	base, _, _ := strings.Cut(id, "[")
	n, _ := strconv.ParseInt(base, 10, 64)
	return n
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// jobInfo reads GET ws/jobs/{id}; nil, nil when Application Center no
// longer lists the job.
func (b *Backend) jobInfo(ctx context.Context, id string) (node, error) {
	r := request{method: http.MethodGet, path: "/ws/jobs/" + id, accept: "application/json"}
	buf, err := b.do(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, transientOr(err)
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read the answer: %w", r, err)
	}
	entries := jobEntries(doc)
	for _, e := range entries {
		if entryID(e) == id {
			return e, nil
		}
	}
	if len(entries) == 1 && entryID(entries[0]) == "" {
		return entries[0], nil
	}
	return nil, nil
}

// Status reads the job, falling back to its history once it has left
// mbatchd.
func (b *Backend) Status(ctx context.Context, id string) (backends.Status, error) {
	if !validID(id) {
		return backends.Status{}, fmt.Errorf("LSF job id %q is not a job id: %w", id, backends.ErrNotFound)
	}
	e, err := b.jobInfo(ctx, id)
	if err != nil {
		return backends.Status{}, err
	}
	if e != nil {
		return mapJob(e)
	}
	return b.history(ctx, id)
}

var (
	exitCodeRE = regexp.MustCompile(`(?i)exit(?:ed with exit)? code (\d+)`)
	killRE     = regexp.MustCompile(`<KILL>|(?i)signal <?KILL>?`)
)

// history reads GET ws/jobhistory?ids={id} (bhist's text).
func (b *Backend) history(ctx context.Context, id string) (backends.Status, error) {
	r := request{method: http.MethodGet, path: "/ws/jobhistory", query: url.Values{"ids": {id}}, accept: "application/xml, application/json"}
	buf, err := b.do(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound {
		return backends.Status{}, fmt.Errorf("LSF job %s: neither the job list nor the job history knows it: %w", id, backends.ErrNotFound)
	}
	if err != nil {
		return backends.Status{}, transientOr(err)
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return backends.Status{}, fmt.Errorf("%s: cannot read the answer: %w", r, err)
	}
	if inner := firstMap(get(doc, "jobHistory")); inner != nil {
		doc = inner
	}
	var texts []string
	hv := get(doc, "history")
	if s := str(hv); s != "" {
		texts = append(texts, s)
	}
	if l, ok := hv.([]any); ok {
		for _, x := range l {
			if s := str(x); s != "" {
				texts = append(texts, s)
			}
		}
	}
	for _, h := range list(hv) {
		if s := str(get(h, "content")); s != "" {
			texts = append(texts, s)
		}
	}
	if len(texts) == 0 {
		return backends.Status{}, fmt.Errorf("LSF job %s: not in the job list, and its history is empty: %w", id, backends.ErrNotFound)
	}
	text := strings.Join(texts, "\n")
	st := backends.Status{Reason: "history"}
	if m := exitCodeRE.FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1])
		st.ExitCode = &n
	}
	switch {
	case strings.Contains(text, "Done successfully"):
		st.State, st.Raw, st.Message = backends.Done, "DONE", "done successfully (from the job history)"
		if st.ExitCode == nil {
			z := 0
			st.ExitCode = &z
		}
	case strings.Contains(text, "Completed <exit>") || strings.Contains(text, "Exited"):
		st.Raw = "EXIT"
		if killRE.MatchString(text) {
			st.State, st.Message = backends.Killed, "killed (from the job history)"
		} else {
			st.State, st.Message = backends.Failed, "exited (from the job history)"
			if st.ExitCode != nil {
				st.Message = fmt.Sprintf("exited with code %d (from the job history)", *st.ExitCode)
			}
		}
	default:
		st.State, st.Raw = backends.Unknown, "UNKNOWN"
		st.Message = "the job has left LSF's job list and its history shows no end"
	}
	return st, nil
}

// Killing exit reasons (LSF TERM_* names and numbers from lsbatch.h).
var killedInfo = map[string]bool{
	"TERM_OWNER": true, "TERM_ADMIN": true, "TERM_FORCE_OWNER": true, "TERM_FORCE_ADMIN": true,
	"TERM_REQUEUE_OWNER": true, "TERM_REQUEUE_ADMIN": true,
	"8": true, "9": true, "10": true, "11": true, "14": true, "15": true,
}

// mapJob maps one job element to a Status.
func mapJob(e node) (backends.Status, error) {
	raw := strings.ToUpper(str(get(e, "jobStatus", "status", "stat")))
	st := backends.Status{Raw: raw}
	st.SubmitTime = parseTime(get(e, "submitTimeGMT", "submitTime"))
	st.StartTime = parseTime(get(e, "startTimeGMT", "startTime"))
	st.EndTime = parseTime(get(e, "endTimeGMT", "endTime", "finishTime"))
	if n, ok := parseInt(get(e, "exitStatus", "exitCode")); ok {
		if n > 255 && n%256 == 0 {
			n >>= 8 // a wait status
		}
		st.ExitCode = &n
	}
	info := strings.ToUpper(str(get(e, "exitInfo", "exitReason", "termReason", "terminationReason")))
	switch raw {
	case "PEND", "WAIT", "PROV":
		st.State = backends.Pending
		st.Message = str(get(e, "pendReason", "pendingReason"))
		st.Reason = st.Message
	case "RUN":
		st.State = backends.Running
	case "PSUSP", "USUSP", "SSUSP":
		st.State = backends.Suspended
		st.Message = str(get(e, "suspendReason", "suspReason", "pendReason"))
	case "DONE":
		st.State, st.Message = backends.Done, "done"
		if st.ExitCode == nil {
			z := 0
			st.ExitCode = &z
		}
	case "EXIT":
		st.Reason = info
		switch {
		case killedInfo[info]:
			st.State, st.Message = backends.Killed, "killed ("+info+")"
		case info == "" && st.ExitCode != nil && *st.ExitCode == 130:
			st.State, st.Message = backends.Killed, "killed (exit code 130: SIGINT, as bkill sends)"
		default:
			st.State = backends.Failed
			st.Message = "exited"
			if st.ExitCode != nil {
				st.Message = fmt.Sprintf("exited with code %d", *st.ExitCode)
				if st.Reason == "" {
					st.Reason = "NonZeroExitCode"
				}
			}
			if info != "" {
				st.Message += " (" + info + ")"
			}
		}
	case "ZOMBI":
		st.State, st.Message = backends.Killed, "killed while its execution host was unreachable (ZOMBI)"
	case "UNKWN":
		st.State, st.Message = backends.Unknown, "mbatchd lost contact with the job's sbatchd (UNKWN)"
	case "":
		return st, errors.New("Application Center answered a job without a jobStatus")
	default:
		return st, fmt.Errorf("unknown LSF job status %q", raw)
	}
	return st, nil
}

var timeLayouts = []string{
	time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006/01/02 15:04:05",
	"Mon Jan _2 15:04:05 2006", "Jan _2 15:04:05 2006", "Mon Jan _2 15:04:05 MST 2006",
}

// parseTime reads LSF times in the forms seen in the wild; zero if none fits.
func parseTime(v any) time.Time {
	s := str(v)
	if s == "" || s == "-" || s == "0" {
		return time.Time{}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		if n > 1e12 {
			return time.UnixMilli(n).UTC()
		}
		return time.Unix(n, 0).UTC()
	}
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

type userCmd struct {
	XMLName xml.Name `xml:"UserCmd"`
	Cmd     string   `xml:"cmd"`
}

// Cancel kills the job: POST ws/jobs/kill (ids=ID), or, where that is not
// served, POST ws/userCmd with bkill. A job that has already ended is fine.
func (b *Backend) Cancel(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("LSF job id %q is not a job id: %w", id, backends.ErrNotFound)
	}
	b.mu.Lock()
	via := b.killVia
	b.mu.Unlock()
	var err error
	if via != "userCmd" {
		form := []byte(url.Values{"ids": {id}}.Encode())
		_, err = b.do(ctx, request{method: http.MethodPost, path: "/ws/jobs/kill", contentType: "application/x-www-form-urlencoded",
			accept: "application/json", body: func() (io.Reader, error) { return bytes.NewReader(form), nil }})
		if err == nil {
			b.setKillVia("jobs/kill")
			return nil
		}
		se := asStatus(err)
		if via != "" || se == nil || (se.status != http.StatusNotFound && se.status != http.StatusMethodNotAllowed) {
			return b.cancelFailed(ctx, id, err)
		}
	}
	x, _ := xml.Marshal(userCmd{Cmd: "bkill " + id})
	_, err = b.do(ctx, request{method: http.MethodPost, path: "/ws/userCmd", contentType: "application/xml",
		accept: "application/json", body: func() (io.Reader, error) { return bytes.NewReader(x), nil }})
	if err == nil {
		b.setKillVia("userCmd")
		return nil
	}
	return b.cancelFailed(ctx, id, err)
}

func (b *Backend) setKillVia(v string) {
	b.mu.Lock()
	b.killVia = v
	b.mu.Unlock()
}

// cancelFailed: a refused kill of a job that has ended is a success.
func (b *Backend) cancelFailed(ctx context.Context, id string, err error) error {
	if errors.Is(err, backends.ErrAuth) || ctx.Err() != nil {
		return err
	}
	st, serr := b.Status(ctx, id)
	if serr == nil && st.State.Final() {
		return nil
	}
	if errors.Is(serr, backends.ErrNotFound) {
		return fmt.Errorf("%v: %w", err, backends.ErrNotFound)
	}
	return transientOr(err)
}

// FetchOutput downloads a file the job wrote: POST ws/jobfiles/download/{id}
// with dir=<path>; a relative path is taken from the job's cwd.
func (b *Backend) FetchOutput(ctx context.Context, id, p string, w io.Writer) error {
	if !validID(id) {
		return fmt.Errorf("LSF job id %q is not a job id: %w", id, backends.ErrNotFound)
	}
	if p == "" || strings.ContainsAny(p, ",|\r\n") {
		return backends.Invalid("s3upload.files", "%q is not a file path Application Center can download (no ',' or '|')", p)
	}
	if !strings.HasPrefix(p, "/") {
		e, err := b.jobInfo(ctx, id)
		if err != nil {
			return err
		}
		cwd := ""
		if e != nil {
			cwd = str(get(e, "cwd", "execCwd"))
		}
		if cwd == "" {
			return fmt.Errorf("output %s: the job's working directory is unknown (the job left LSF's job list); give an absolute path", p)
		}
		p = path.Join(cwd, p)
	}
	form := []byte("dir=" + strings.ReplaceAll(url.QueryEscape(p), "%2F", "/"))
	r := request{method: http.MethodPost, path: "/ws/jobfiles/download/" + id, contentType: "application/x-www-form-urlencoded",
		accept: "multipart/mixed, application/octet-stream", body: func() (io.Reader, error) { return bytes.NewReader(form), nil }}
	resp, err := b.open(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound {
		return fmt.Errorf("output %s: %v: %w", p, se, backends.ErrNotFound)
	}
	if err != nil {
		return transientOr(err)
	}
	defer resp.Body.Close()
	mt, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !strings.HasPrefix(mt, "multipart/") {
		_, err := io.Copy(w, resp.Body)
		return b.readErr(ctx, r, err)
	}
	mr := multipart.NewReader(resp.Body, params["boundary"])
	base := path.Base(p)
	var first []byte
	havePart := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return b.readErr(ctx, r, err)
		}
		cid := strings.Trim(part.Header.Get("Content-ID"), "<>")
		if part.FormName() == base || part.FileName() == base || cid == base || part.FormName() == p || cid == p {
			_, err := io.Copy(w, part)
			return b.readErr(ctx, r, err)
		}
		if !havePart {
			first, err = io.ReadAll(io.LimitReader(part, 1<<30))
			if err != nil {
				return b.readErr(ctx, r, err)
			}
			havePart = true
		}
	}
	if !havePart {
		return fmt.Errorf("output %s: the download answer has no file: %w", p, backends.ErrNotFound)
	}
	_, err = w.Write(first)
	return err
}

func (b *Backend) readErr(ctx context.Context, r request, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return backends.Transient(fmt.Errorf("%s: reading the answer: %w", r, err))
}

var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.Finder        = (*Backend)(nil)
	_ backends.Validator     = (*Backend)(nil)
	_ backends.InputStager   = (*Backend)(nil)
	_ backends.OutputFetcher = (*Backend)(nil)
)
