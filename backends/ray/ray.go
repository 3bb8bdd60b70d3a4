// Package ray runs a job as a Ray job through the Ray Jobs REST API of a Ray
// cluster's dashboard (https://docs.ray.io/en/latest/cluster/running-applications/job-submission/rest.html):
//
//	POST /api/jobs/                submit (the idempotency key is the submission_id)
//	GET  /api/jobs/{id}            status (also FindByKey: the id is the key)
//	GET  /api/jobs/                every job's status at once (StatusMany)
//	POST /api/jobs/{id}/stop       cancel
//	GET  /api/jobs/{id}/logs/tail  the driver's output, streamed (ReadLogs, tail.go)
//
// The job's id is its submission_id, which is the idempotency key Job.Key: a
// restarted invoke finds the job with GET /api/jobs/{key}, and a second
// submit with the same key is refused by Ray (400 "... already exists"),
// which Submit reports as backends.ErrExists. How the script and its
// parameters reach the driver without ever being pasted into a shell command
// is explained in entrypoint.go.
//
// Credentials (optional): the key "token" of the mounted Secret, sent as
// "Authorization: Bearer <token>" for Ray's token authentication (Ray >=
// 2.52, RAY_AUTH_MODE=token). Without the key, requests carry no
// credentials. The file is re-read for every request, so a rotated Secret
// is picked up.
package ray

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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// Name is the backend's registry name.
const Name = "ray"

// Ray's job states (ray.job_submission.JobStatus).
const (
	rayPending   = "PENDING"
	rayRunning   = "RUNNING"
	rayStopped   = "STOPPED"
	raySucceeded = "SUCCEEDED"
	rayFailed    = "FAILED"
)

// Backend talks to one Ray cluster's dashboard.
type Backend struct {
	base   *url.URL
	client *http.Client
	creds  backends.Credentials
	log    *slog.Logger

	tails map[string]*tail // open log streams (tail.go)
	ended map[string]bool  // jobs Status saw end
}

// New builds the backend for the dashboard at cfg.URL (http or https, e.g.
// http://ray-head:8265; a path prefix, as behind a proxy, is kept).
func New(cfg backends.Config) (backends.Backend, error) {
	if cfg.URL == "" {
		return nil, backends.Invalid("resourceURL", "the ray backend needs the URL of the Ray dashboard, e.g. http://ray-head:8265")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, backends.Invalid("resourceURL", "%q is not an http(s) URL of the Ray dashboard (e.g. http://ray-head:8265)", cfg.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, backends.Invalid("resourceURL", "%q: give the dashboard's base URL without a query or fragment", cfg.URL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	client := cfg.HTTPClient
	if client == nil {
		client = httpx.NewClient(httpx.NewTransport(httpx.Options{Use: httpx.Server}), 60*time.Second)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Backend{base: u, client: client, creds: cfg.Credentials, log: log}, nil
}

// Properties are the ray backend's jobproperties. The entrypoint_* fields
// and metadata are those of Ray's submit request; runtime_env is passed on
// as given (any Ray runtime_env key: working_dir, py_modules, pip, uv,
// conda, env_vars, ...), and working_dir, pip and env_vars may also be given
// at the top level as shorthands. Through the REST API, working_dir and
// py_modules must be URIs the cluster can fetch (s3://, gs://, https://
// .zip); a local directory is something only Ray's Python client uploads.
type Properties struct {
	RuntimeEnv map[string]json.RawMessage `json:"runtime_env"`
	WorkingDir string                     `json:"working_dir"`
	Pip        json.RawMessage            `json:"pip"`
	EnvVars    map[string]string          `json:"env_vars"`

	EntrypointNumCPUs   *float64           `json:"entrypoint_num_cpus"`
	EntrypointNumGPUs   *float64           `json:"entrypoint_num_gpus"`
	EntrypointMemory    *int64             `json:"entrypoint_memory"`
	EntrypointResources map[string]float64 `json:"entrypoint_resources"`

	// Metadata is added to the job's metadata (beside job_name).
	Metadata map[string]string `json:"metadata"`
	// Python is the interpreter the entrypoint runs (default "python", as
	// Ray's own examples; it must be on the PATH of the cluster's nodes).
	Python string `json:"python"`
	// Args are the script's command-line arguments (sys.argv[1:]).
	Args []string `json:"args"`
	// Entrypoint replaces the built-in Python entrypoint with a shell
	// command of the user's, verbatim.
	Entrypoint string `json:"entrypoint"`
}

const propertiesHelp = "the ray backend takes runtime_env (object), working_dir (string), pip (array or object), " +
	"env_vars (object of strings), entrypoint_num_cpus, entrypoint_num_gpus (numbers), entrypoint_memory (bytes, integer), " +
	"entrypoint_resources (object of numbers), metadata (object of strings), python (string), args (array of strings) " +
	"and entrypoint (string)"

func parseProperties(raw json.RawMessage) (Properties, error) {
	var p Properties
	if len(bytes.TrimSpace(raw)) == 0 {
		return p, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, backends.Invalid("jobproperties", "%v; %s", err, propertiesHelp)
	}
	return p, nil
}

// request is the body of POST /api/jobs/ (ray.dashboard.modules.job.common.JobSubmitRequest).
type submitRequest struct {
	Entrypoint          string             `json:"entrypoint"`
	SubmissionID        string             `json:"submission_id"`
	RuntimeEnv          map[string]any     `json:"runtime_env,omitempty"`
	Metadata            map[string]string  `json:"metadata,omitempty"`
	EntrypointNumCPUs   *float64           `json:"entrypoint_num_cpus,omitempty"`
	EntrypointNumGPUs   *float64           `json:"entrypoint_num_gpus,omitempty"`
	EntrypointMemory    *int64             `json:"entrypoint_memory,omitempty"`
	EntrypointResources map[string]float64 `json:"entrypoint_resources,omitempty"`
}

// buildRequest turns the job into Ray's submit request; every refusal is an
// ErrInvalid naming the field.
func buildRequest(job backends.Job) (*submitRequest, error) {
	p, err := parseProperties(job.Properties)
	if err != nil {
		return nil, err
	}
	if err := ibmMetadata(job.Metadata, &p); err != nil {
		return nil, err
	}
	if err := checkJob(job, p); err != nil {
		return nil, err
	}
	rt, err := runtimeEnv(p)
	if err != nil {
		return nil, err
	}
	if rt["env_vars"], err = jobEnv(job, p); err != nil {
		return nil, err
	}
	md := map[string]string{}
	for k, v := range p.Metadata {
		md[k] = v
	}
	if job.Name != "" {
		md["job_name"] = job.Name
	}
	md["submitted_by"] = "bridge-runner"

	return &submitRequest{
		Entrypoint:          entrypoint(p),
		SubmissionID:        job.Key,
		RuntimeEnv:          rt,
		Metadata:            md,
		EntrypointNumCPUs:   p.EntrypointNumCPUs,
		EntrypointNumGPUs:   p.EntrypointNumGPUs,
		EntrypointMemory:    p.EntrypointMemory,
		EntrypointResources: p.EntrypointResources,
	}, nil
}

// ibmMetadata maps the pip and env of IBM's Ray scriptMetadata
// ({"pip":{"numpy":"1.26.4"},"env":{"K":"V"}}, which IBM's pod turned into
// runtime_env pip ["numpy==1.26.4"] and env_vars) into p, beneath what
// jobproperties says. The metadata still reaches the job whole, as
// $BRIDGE_SCRIPT_METADATA.
func ibmMetadata(raw json.RawMessage, p *Properties) error {
	var md struct {
		Pip json.RawMessage   `json:"pip"`
		Env map[string]string `json:"env"`
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil
	}
	if err := json.Unmarshal(raw, &md); err != nil {
		return backends.Invalid("jobdata.scriptMetadata", "pip must be an object {\"package\":\"version\"} or an array of requirements, env an object of strings: %v", err)
	}
	if _, inRT := p.RuntimeEnv["pip"]; len(md.Pip) > 0 && p.Pip == nil && !inRT {
		var pins map[string]string
		var list []string
		if json.Unmarshal(md.Pip, &list) != nil && json.Unmarshal(md.Pip, &pins) != nil {
			return backends.Invalid("jobdata.scriptMetadata", "pip must be an object {\"package\":\"version\"} or an array of requirements")
		}
		if pins != nil {
			reqs := make([]string, 0, len(pins))
			for name, version := range pins {
				reqs = append(reqs, strings.TrimSuffix(name+"=="+version, "=="))
			}
			sort.Strings(reqs)
			md.Pip = mustMarshal(reqs)
		}
		p.Pip = md.Pip
	}
	if len(md.Env) == 0 {
		return nil
	}
	env := p.EnvVars
	if rt, ok := p.RuntimeEnv["env_vars"]; ok {
		env = map[string]string{}
		if err := json.Unmarshal(rt, &env); err != nil {
			return backends.Invalid("jobproperties", "runtime_env.env_vars must be an object of strings: %v", err)
		}
		defer func() { p.RuntimeEnv["env_vars"] = mustMarshal(env) }()
	}
	if env == nil {
		env = map[string]string{}
	}
	for k, v := range md.Env {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	if _, ok := p.RuntimeEnv["env_vars"]; !ok {
		p.EnvVars = env
	}
	return nil
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// checkJob refuses what Ray would refuse or misread.
func checkJob(job backends.Job, p Properties) error {
	if job.Key == "" {
		return backends.Invalid("idempotency key", "empty; the runner must give every job a key")
	}
	if p.Entrypoint == "" && job.Script == "" && job.ScriptPath == "" {
		return backends.Invalid("jobdata.jobScript", "no script: give a Python script (inline, s3, or a path on the Ray cluster with scriptLocation remote), or a shell command as jobproperties.entrypoint")
	}
	if p.Entrypoint != "" && (len(p.Args) > 0 || p.Python != "") {
		return backends.Invalid("jobproperties", "entrypoint replaces the Python entrypoint: args and python cannot be combined with it (read the script from $BRIDGE_SCRIPT or $BRIDGE_SCRIPT_PATH in your command)")
	}
	if strings.ContainsAny(p.Python, "\x00\n") {
		return backends.Invalid("jobproperties", "python %q is not a command name", p.Python)
	}
	for _, a := range p.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return backends.Invalid("jobproperties", "args: an argument contains a NUL byte")
		}
	}
	if p.EntrypointNumCPUs != nil && *p.EntrypointNumCPUs < 0 ||
		p.EntrypointNumGPUs != nil && *p.EntrypointNumGPUs < 0 ||
		p.EntrypointMemory != nil && *p.EntrypointMemory < 0 {
		return backends.Invalid("jobproperties", "entrypoint_num_cpus, entrypoint_num_gpus and entrypoint_memory must not be negative")
	}
	for k, v := range p.EntrypointResources {
		if v < 0 {
			return backends.Invalid("jobproperties", "entrypoint_resources: %q must not be negative", k)
		}
	}
	return nil
}

// runtimeEnv is runtime_env as given plus the shorthands (working_dir,
// pip); env_vars is jobEnv's.
func runtimeEnv(p Properties) (map[string]any, error) {
	rt := map[string]any{}
	for k, v := range p.RuntimeEnv {
		// Ray's keys are case-sensitive: "Env_Vars" would reach Ray as an
		// unknown field beside the env_vars we set. Refuse such near misses.
		for _, known := range []string{"working_dir", "pip", "env_vars"} {
			if k != known && strings.EqualFold(k, known) {
				return nil, backends.Invalid("jobproperties", "runtime_env key %q: Ray's keys are case-sensitive; write %s", k, known)
			}
		}
		rt[k] = v
	}
	set := func(key string, v any) error {
		if _, dup := p.RuntimeEnv[key]; dup {
			return backends.Invalid("jobproperties", "%s is given both at the top level and in runtime_env; give it once", key)
		}
		rt[key] = v
		return nil
	}
	if p.WorkingDir != "" {
		if err := set("working_dir", p.WorkingDir); err != nil {
			return nil, err
		}
	}
	if len(p.Pip) > 0 && string(p.Pip) != "null" {
		if err := set("pip", p.Pip); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// jobEnv is the job's environment: the user's env_vars (top level or in
// runtime_env, not both) and ours, which carry the script and its data.
func jobEnv(job backends.Job, p Properties) (map[string]string, error) {
	userEnv := map[string]string{}
	if raw, ok := p.RuntimeEnv["env_vars"]; ok {
		if p.EnvVars != nil {
			return nil, backends.Invalid("jobproperties", "env_vars is given both at the top level and in runtime_env; give it once")
		}
		if err := json.Unmarshal(raw, &userEnv); err != nil {
			return nil, backends.Invalid("jobproperties", "runtime_env.env_vars must be an object of strings: %v", err)
		}
	}
	for k, v := range p.EnvVars {
		userEnv[k] = v
	}
	ours, err := envVars(job.Name, job.Key, job.Script, job.ScriptPath, p.Args, job.Parameters, job.Metadata)
	if err != nil {
		field := "jobdata.jobScript"
		switch {
		case strings.Contains(err.Error(), envParameters):
			field = "jobdata.jobParameters"
		case strings.Contains(err.Error(), envMetadata):
			field = "jobdata.scriptMetadata"
		case strings.Contains(err.Error(), envArgs):
			field = "jobproperties"
		}
		return nil, backends.Invalid(field, "%v: put larger code on the Ray cluster (scriptLocation remote) or ship it in runtime_env.working_dir", err)
	}
	for _, k := range reservedEnv {
		if _, ok := userEnv[k]; ok {
			return nil, backends.Invalid("jobproperties", "env_vars: %s is set by bridge-runner; choose another name", k)
		}
	}
	for k, v := range ours {
		userEnv[k] = v
	}
	return userEnv, nil
}

// Validate checks the job before anything is submitted.
func (b *Backend) Validate(job backends.Job) error {
	_, err := buildRequest(job)
	return err
}

// Submit submits the job with submission_id = job.Key and returns that id.
// A job with this key that already exists is an error wrapping ErrExists.
func (b *Backend) Submit(ctx context.Context, job backends.Job) (string, error) {
	req, err := buildRequest(job)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	resp, err := b.do(ctx, http.MethodPost, "/api/jobs/", body)
	if err != nil {
		return "", err
	}
	switch {
	case resp.status == http.StatusOK:
		var out struct {
			SubmissionID string `json:"submission_id"`
			JobID        string `json:"job_id"`
		}
		if err := json.Unmarshal(resp.body, &out); err != nil {
			// Ray took the job; the key finds it.
			b.log.Warn("unreadable submit response from Ray; using the submission id", "err", err)
			return job.Key, nil
		}
		if out.SubmissionID != "" && out.SubmissionID != job.Key {
			return out.SubmissionID, fmt.Errorf("ray accepted the job as %q, not as the requested submission_id %q", out.SubmissionID, job.Key)
		}
		return job.Key, nil
	case isDuplicate(resp):
		return "", fmt.Errorf("ray job %s: %s: %w", job.Key, resp.text(), backends.ErrExists)
	case resp.status == http.StatusBadRequest:
		return "", backends.Invalid("jobproperties", "the Ray cluster refused the job: %s", resp.text())
	case resp.status == http.StatusNotFound:
		return "", backends.Invalid("resourceURL", "%s has no Ray Jobs API (POST /api/jobs/ answered %s); give the Ray dashboard's URL", b.base.Redacted(), resp.text())
	}
	return "", b.statusError(resp, "submitting ray job "+job.Key)
}

// isDuplicate reports whether an answer is Ray's refusal of a used
// submission_id: "ValueError: Job with submission_id X already exists.
// Please use a different submission_id." Older Ray answers 400 with it;
// since Ray 2.9 the head relays the agent's 400 as a 500 whose traceback
// contains it (observed on 2.60).
func isDuplicate(r *response) bool {
	return (r.status == http.StatusBadRequest || r.status == http.StatusInternalServerError) &&
		bytes.Contains(r.body, []byte("already exists")) && bytes.Contains(r.body, []byte("submission_id"))
}

// jobDetails is the part of GET /api/jobs/{id} (ray.dashboard.modules.job.pydantic_models.JobDetails) we read.
type jobDetails struct {
	Type           string            `json:"type"`
	JobID          *string           `json:"job_id"`
	SubmissionID   *string           `json:"submission_id"`
	Status         string            `json:"status"`
	Message        *string           `json:"message"`
	ErrorType      *string           `json:"error_type"`
	StartTime      *int64            `json:"start_time"` // ms since the epoch; set at submission
	EndTime        *int64            `json:"end_time"`
	Metadata       map[string]string `json:"metadata"`
	DriverExitCode *int              `json:"driver_exit_code"` // Ray >= 2.23
}

func (b *Backend) details(ctx context.Context, id string) (*jobDetails, error) {
	resp, err := b.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNotFound {
		return nil, fmt.Errorf("ray job %s: %s: %w", id, resp.text(), backends.ErrNotFound)
	}
	if resp.status != http.StatusOK {
		return nil, b.statusError(resp, "reading ray job "+id)
	}
	var d jobDetails
	if err := json.Unmarshal(resp.body, &d); err != nil {
		return nil, backends.Transient(fmt.Errorf("reading ray job %s: HTTP 200 with an answer that is not a job's details (%s)", id, httpx.NotShown))
	}
	if d.Status == "" {
		// Not a Ray job's details (a proxy's or another service's
		// answer): a fault, ridden out within the retry budget like any
		// other, never taken for a job still running.
		return nil, backends.Transient(fmt.Errorf("reading ray job %s: HTTP 200 with no job status in the answer (%s); is resourceURL Ray's dashboard?", id, httpx.NotShown))
	}
	return &d, nil
}

// rayCategories are Ray's job error types (JobErrorType) that are the
// cluster's doing: the supervisor actor that runs the entrypoint died (its
// node was lost) or could not be started. Every other failure (the
// entrypoint's exit code, a runtime_env that does not install, resources no
// node has) is the job's.
var rayCategories = map[string]backends.Category{
	"JOB_SUPERVISOR_ACTOR_DIED":            backends.CategoryInfrastructure,
	"JOB_SUPERVISOR_ACTOR_START_FAILURE":   backends.CategoryInfrastructure,
	"JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE": backends.CategoryInfrastructure,
}

// Status maps Ray's job state onto the seven states.
func (b *Backend) Status(ctx context.Context, id string) (backends.Status, error) {
	d, err := b.details(ctx, id)
	if err != nil {
		return backends.Status{}, err
	}
	st := d.status()
	b.noteEnd(id, st.State)
	return st, nil
}

// status maps one job's details onto the seven states; Status and
// StatusMany share it, so both say the same of a job.
func (d *jobDetails) status() backends.Status {
	st := backends.Status{Raw: enumWord(d.Status), ExitCode: d.DriverExitCode}
	if d.Message != nil {
		st.Message = rayMessage(*d.Message)
	}
	if d.ErrorType != nil {
		st.Reason = enumWord(*d.ErrorType)
	}
	if d.StartTime != nil && *d.StartTime > 0 {
		st.SubmitTime = time.UnixMilli(*d.StartTime).UTC()
	}
	if d.EndTime != nil && *d.EndTime > 0 {
		st.EndTime = time.UnixMilli(*d.EndTime).UTC()
	}
	switch d.Status {
	case rayPending:
		st.State = backends.Pending
	case rayRunning:
		st.State = backends.Running
	case raySucceeded:
		st.State = backends.Done
	case rayFailed:
		st.State, st.Category = backends.Failed, rayCategories[st.Reason]
		if st.Reason == "" && d.DriverExitCode != nil && *d.DriverExitCode != 0 {
			st.Reason = "NonZeroExitCode"
		}
	case rayStopped:
		st.State = backends.Killed
	default:
		// A state this code does not know (a newer Ray): keep following
		// unless Ray says the job ended.
		if !st.EndTime.IsZero() {
			st.State = backends.Unknown
		} else {
			st.State = backends.Running
		}
		st.Message = strings.TrimSpace(fmt.Sprintf("unrecognized Ray job state %s. %s", stateName(d.Status), st.Message))
	}
	// Ray records one time, start_time, set when the job is submitted
	// (its supervisor starts then; Ray keeps no separate driver start).
	// It is the submit time, and the start time once the job has left
	// PENDING: stable across restarts of invoke, unlike a "first seen
	// running" time would be.
	if st.State != backends.Pending {
		st.StartTime = st.SubmitTime
	}
	return st
}

// StatusMany reads Ray's job list (GET /api/jobs/, every job's details in
// one answer) and keeps the jobs whose submission_id is among ids: one
// request whatever the number of ids. A job Ray does not list is left out.
// Unlike Status it records nothing in the backend (a watcher may call it
// beside the job's own Status and ReadLogs): whoever acts on a job's end
// asks Status, which does.
func (b *Backend) StatusMany(ctx context.Context, ids []string) (map[string]backends.Status, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	resp, err := b.do(ctx, http.MethodGet, "/api/jobs/", nil)
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusOK {
		return nil, b.statusError(resp, "listing ray jobs")
	}
	list, err := parseJobList(resp.body)
	if err != nil {
		return nil, err
	}
	out := make(map[string]backends.Status, len(ids))
	for _, d := range list {
		// Only submission_id: GET /api/jobs/{x} also answers for a Ray
		// job_id, but our ids are submission ids (Job.Key).
		if d != nil && d.SubmissionID != nil && want[*d.SubmissionID] && d.Status != "" {
			out[*d.SubmissionID] = d.status()
		}
	}
	return out, nil
}

// parseJobList reads the answer of GET /api/jobs/: a JSON array of
// JobDetails. Anything else (a proxy's page, another service's JSON) is a
// fault to ride out, never an empty list that would hide every job.
func parseJobList(body []byte) ([]*jobDetails, error) {
	var list []*jobDetails
	if err := json.Unmarshal(body, &list); err != nil || list == nil {
		return nil, backends.Transient(fmt.Errorf("listing ray jobs: HTTP 200 with an answer that is not a job list (%s); is resourceURL Ray's dashboard?", httpx.NotShown))
	}
	return list, nil
}

// FindByKey returns key if Ray knows a job with that submission_id.
func (b *Backend) FindByKey(ctx context.Context, key string) (string, error) {
	if key == "" {
		return "", nil
	}
	d, err := b.details(ctx, key)
	if errors.Is(err, backends.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	// GET /api/jobs/{x} also answers for a Ray job_id; only a job whose
	// submission_id is the key is ours.
	if d.SubmissionID == nil || *d.SubmissionID != key {
		return "", nil
	}
	return key, nil
}

// Cancel stops the job (POST /api/jobs/{id}/stop). Ray answers
// {"stopped": false} for a job that has already ended: not an error.
func (b *Backend) Cancel(ctx context.Context, id string) error {
	resp, err := b.do(ctx, http.MethodPost, "/api/jobs/"+url.PathEscape(id)+"/stop", nil)
	if err != nil {
		return err
	}
	switch resp.status {
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
		return fmt.Errorf("ray job %s: %s: %w", id, resp.text(), backends.ErrNotFound)
	}
	return b.statusError(resp, "stopping ray job "+id)
}

// ---------------------------------------------------------------- HTTP

type response struct {
	status     int
	body       []byte
	retryAfter time.Duration
	// noToken is why no token was sent ("" if one was).
	noToken string
}

// text is what a message may say of a failed answer: the status and the
// reason. Ray's dashboard answers failures in plain text, many of them a
// Python traceback; the reason is the exception that caused it (the last
// "XxxError: ..." line: with Ray >= 2.9 the head relays the agent's
// traceback inside its own, and the agent's exception is the one that says
// what went wrong), or the text's first line, or a JSON answer's "detail"
// (aiohttp and newer routes), made fit by httpx.Reason. Nothing else of the
// body is shown.
func (r *response) text() string {
	return httpx.Failure(r.status, "the Ray dashboard", r.reason(), "")
}

func (r *response) reason() string {
	s := strings.TrimSpace(string(r.body))
	var j struct {
		Detail string `json:"detail"`
	}
	if strings.HasPrefix(s, "{") {
		if json.Unmarshal(r.body, &j) == nil {
			return j.Detail
		}
		return ""
	}
	if strings.HasPrefix(s, "Traceback (most recent call last):") {
		lines := strings.Split(s, "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if l := strings.TrimSpace(lines[i]); exceptionLine().MatchString(l) {
				return l
			}
		}
		return ""
	}
	return firstLine(s)
}

// exceptionLine matches the line of a Python traceback that names the
// exception, e.g. "ValueError: Job with submission_id x already exists.".
var exceptionLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)(: |$)`)
})

// do sends one request and reads the whole answer. Transport failures are
// transient.
func (b *Backend) do(ctx context.Context, method, path string, body []byte) (*response, error) {
	u := *b.base
	u.Path = b.base.Path + path
	req := httpx.Request{Method: method, URL: u.String(), Header: http.Header{"Accept": {"application/json"}}, Server: "the Ray dashboard"}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Body = func() (io.Reader, error) { return bytes.NewReader(body), nil }
	}
	resp := &response{}
	if tok, why := b.token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	} else {
		resp.noToken = why
	}
	hr, err := httpx.Open(ctx, b.client, req)
	if err != nil {
		return nil, err
	}
	resp.status, resp.retryAfter = hr.StatusCode, httpx.RetryAfter(hr.Header, time.Now())
	if resp.body, err = httpx.ReadAll(ctx, method+" "+path, hr, httpx.MaxBody); err != nil {
		return nil, err
	}
	b.log.Debug("ray request", "method", method, "path", path, "status", hr.StatusCode, "bytes", len(resp.body))
	return resp, nil
}

// token reads the optional bearer token; with none it says why.
func (b *Backend) token() (string, string) {
	if b.creds == nil {
		return "", "no credentials are configured"
	}
	tok, err := b.creds.Get("token")
	if err != nil {
		return "", err.Error()
	}
	return tok, ""
}

// statusError maps an unexpected HTTP status to the sentinel errors.
func (b *Backend) statusError(r *response, what string) error {
	if httpx.IsAuth(r.status) {
		// Never the server's words: an echo of the request would carry the
		// token (see httpx.AuthError).
		if r.noToken != "" {
			return httpx.AuthError(what, r.status, "the Ray dashboard wants a token and none was sent ("+r.noToken+")", "token")
		}
		return httpx.AuthError(what, r.status, "the Ray dashboard refused the token", "token")
	}
	msg := fmt.Sprintf("%s: %s; the dashboard's log (dashboard.log, dashboard_agent.log) says more", what, r.text())
	switch {
	case r.status == http.StatusTooManyRequests || r.status >= 500:
		return httpx.WithRetryAfter(backends.Transient(errors.New(msg)), r.retryAfter)
	}
	return errors.New(msg)
}

// rayMessage is the first line of Ray's message; when that line only
// announces the logs that follow ("... last available logs (truncated to
// 20,000 chars):"), the last line of those logs comes with it, which for a
// Python job is its exception, and where the rest is. Each line is the
// server's (or the job's) text: it comes as words (httpx.Reason), or is
// named by its size.
func rayMessage(m string) string {
	first := firstLine(m)
	if !strings.HasSuffix(first, ":") || !strings.Contains(first, "last available logs") {
		return words(first)
	}
	lines := strings.Split(strings.TrimSpace(m), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(lines) < 2 || last == "" {
		return words(strings.TrimSuffix(first, ":")) + " (none; see the step's log)"
	}
	return words(first) + " ... " + words(last) + " (the whole log is in the step's log)"
}

// words is line made fit for a message by httpx.Reason, or its size.
func words(line string) string {
	if r := httpx.Reason(line); r != "" {
		return r
	}
	return fmt.Sprintf("(%d bytes, not shown)", len(line))
}

// enumWord is a value of one of Ray's enumerations (a job status, an
// error_type) as the record may keep it: upper-case words joined by "_",
// that httpx.Reason keeps (not base32, say). Anything else is no
// documented value, and is dropped.
func enumWord(v string) string {
	if rayEnum().MatchString(v) && httpx.Reason(v) == v {
		return v
	}
	return ""
}

var rayEnum = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`) })

// stateName names an unknown status for a message: the value when it has
// an enumeration's shape, else its size.
func stateName(v string) string {
	if w := enumWord(v); w != "" {
		return strconv.Quote(w)
	}
	return fmt.Sprintf("(%d bytes, not a state name, not shown)", len(v))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}
