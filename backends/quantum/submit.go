package quantum

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

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
	dateRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`) })
	logLevels = map[string]bool{"DEBUG": true, "INFO": true, "WARNING": true, "ERROR": true, "CRITICAL": true}
)

func parseProperties(raw json.RawMessage) (Properties, error) {
	var p Properties
	if len(bytes.TrimSpace(raw)) == 0 {
		return p, nil
	}
	norm, _, err := backends.PropertyObject(raw, aliases)
	if err != nil {
		return p, err
	}
	buf, _ := json.Marshal(norm)
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, backends.Invalid("jobproperties", "%v; the quantum backend takes program_id, backend, iam_url, api_version, log_level, cost, session_id, private, calibration_id, tags and shots", err)
	}
	return p, p.check()
}

// check refuses values the service would refuse, with the fix.
func (p Properties) check() error {
	switch {
	case p.ProgramID != "" && p.ProgramID != "sampler" && p.ProgramID != "estimator":
		return backends.Invalid("jobproperties", "program_id must be sampler or estimator (custom programs are no longer supported), not %q", p.ProgramID)
	case p.IAMURL != "" && !httpURL(p.IAMURL):
		return backends.Invalid("jobproperties", "iam_url %q is not an http(s) URL such as %s", p.IAMURL, DefaultIAMURL)
	case p.APIVersion != "" && !dateRE().MatchString(p.APIVersion):
		return backends.Invalid("jobproperties", "api_version must be a date YYYY-MM-DD such as %s, not %q", DefaultAPIVersion, p.APIVersion)
	case p.LogLevel != "" && !logLevels[p.LogLevel]:
		return backends.Invalid("jobproperties", "log_level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, not %q", p.LogLevel)
	case p.Cost != nil && (*p.Cost < 1 || *p.Cost > 10800):
		return backends.Invalid("jobproperties", "cost is the maximum execution time in seconds, 1 to 10800, not %d", *p.Cost)
	case p.Shots != nil && *p.Shots < 1:
		return backends.Invalid("jobproperties", "shots must be positive")
	case strings.ContainsAny(p.Backend, " \t\r\n/"):
		return backends.Invalid("jobproperties", "backend %q is not a backend name such as ibm_torino", p.Backend)
	}
	for _, t := range p.Tags {
		if strings.TrimSpace(t) == "" {
			return backends.Invalid("jobproperties", "tags must not be empty strings")
		}
	}
	return nil
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
	program, err := programOf(job, p)
	if err != nil {
		return nil, p, err
	}
	if !validKey(job.Key) {
		return nil, p, backends.Invalid("idempotency key", "%q is not a plain name", job.Key)
	}
	params, err := primitiveParams(job, p, program)
	if err != nil {
		return nil, p, err
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

// programOf is the primitive to run (program_id, or the remote script's
// name) after checking that a backend is named too.
func programOf(job backends.Job, p Properties) (string, error) {
	program := p.ProgramID
	if job.ScriptPath != "" {
		sp := strings.TrimSpace(job.ScriptPath)
		if sp != "sampler" && sp != "estimator" {
			return "", backends.Invalid("jobdata.jobScript", "%q is not a primitive: with scriptLocation remote the script names the program, sampler or estimator (custom programs are no longer supported)", job.ScriptPath)
		}
		if program != "" && program != sp {
			return "", backends.Invalid("jobproperties", "program_id %q contradicts jobdata.jobScript %q", program, sp)
		}
		program = sp
	}
	switch script := strings.TrimSpace(job.Script); {
	case program == "" && script != "" && !strings.Contains(script, "OPENQASM"):
		// IBM's samples: a Python program uploaded as a custom program.
		return "", backends.Invalid("jobdata.jobScript", "is a program, not an OpenQASM circuit: IBM Quantum retired custom programs and runs only its primitives; "+
			"set program_id in jobproperties to sampler or estimator, and give the circuit as OpenQASM in jobdata.jobScript (or as pubs in jobdata.jobParameters)")
	case program == "" && script != "":
		return "", backends.Invalid("jobproperties", "program_id is required with an inline OpenQASM circuit: sampler or estimator (the circuit becomes its one pub)")
	case program == "":
		return "", backends.Invalid("jobproperties", "program_id is required: sampler or estimator")
	}
	if p.Backend == "" {
		return "", backends.Invalid("jobproperties", "backend is required: the QPU to run on, e.g. ibm_torino")
	}
	return program, nil
}

// primitiveParams is the primitive's params: jobParameters (bare or under
// "params"), with an inline OpenQASM circuit made into the one pub.
func primitiveParams(job backends.Job, p Properties, program string) (map[string]json.RawMessage, error) {
	params := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(job.Parameters)) > 0 {
		if err := json.Unmarshal(job.Parameters, &params); err != nil {
			return nil, backends.Invalid("jobdata.jobParameters", "must be a JSON object (the primitive's params: pubs, options, version): %v", err)
		}
		if inner, ok := params["params"]; ok && len(params) == 1 {
			params = map[string]json.RawMessage{}
			if err := json.Unmarshal(inner, &params); err != nil {
				return nil, backends.Invalid("jobdata.jobParameters", "params must be a JSON object: %v", err)
			}
		}
	}
	_, hasPubs := params["pubs"]
	circuit := strings.TrimSpace(job.Script)
	switch {
	case circuit != "" && hasPubs:
		return nil, backends.Invalid("jobdata.jobScript", "give the circuit either as the script or inside jobdata.jobParameters' pubs, not both")
	case circuit != "" && !strings.Contains(circuit, "OPENQASM"):
		return nil, backends.Invalid("jobdata.jobScript", "an inline script for the quantum backend is an OpenQASM 3 circuit (it starts with OPENQASM 3.0;)")
	case circuit != "" && program != "sampler":
		return nil, backends.Invalid("jobdata.jobParameters", "the estimator needs observables: give pubs in jobdata.jobParameters")
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
		return nil, backends.Invalid("jobdata.jobParameters", "no pubs: give the primitive's params ({\"pubs\":[...],\"version\":2}) or an OpenQASM 3 circuit as the script")
	case p.Shots != nil:
		return nil, backends.Invalid("jobproperties", "shots applies only to a circuit given as the script; put shots in the pubs")
	}
	return params, nil
}

func validKey(k string) bool { return validJobID(k) }

// validJobID: 1 to 128 of [A-Za-z0-9_-], an id safe in a URL path. A loop,
// not a regular expression: regexp expands a counted repeat into that many
// copies, and {1,128} cost 100 KiB of heap at every start of the binary.
func validJobID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

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
	if w := versionWarning(b.apiVersion, b.now()); w != "" && w != b.warned {
		b.warned = w
		b.log.Warn(w, "api_version", b.apiVersion)
	}
}

// versionNote is the warning about the pinned API version, if any, for the
// status message (see versionWarning).
func (b *Backend) versionNote() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return versionWarning(b.apiVersion, b.now())
}

// CheckSpec refuses what the job's description alone makes unrunnable
// (a custom program, a missing primitive or QPU), with no credentials and
// no request: Validate's first step, which the operator also runs before
// it makes a pod that would refuse the job.
func CheckSpec(job backends.Job) error {
	_, _, err := buildSubmit(job)
	return err
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
	if !validJobID(r.ID) {
		return "", fmt.Errorf("POST /jobs: HTTP 200 without a job id (%s)", httpx.NotShown)
	}
	return r.ID, nil
}
