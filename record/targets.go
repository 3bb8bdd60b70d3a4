package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Target is one place a job may run (the targets key): a backend at a
// URL, the partition or queue it would use there (an overlay on the job's
// jobproperties) and the directory of that place's credentials. Placement
// (package runner) probes the targets, picks one and records it before
// the submit intent, so a job goes to exactly one of them.
type Target struct {
	Name        string `json:"name"`
	Backend     string `json:"backend,omitempty"`
	ResourceURL string `json:"resourceURL,omitempty"`
	// Credentials is the directory of this target's credentials: relative
	// to the step's credentials directory (a subdirectory), or absolute.
	// Empty or ".": the step's own, which serve one origin only (see
	// checkCredentialOrigins) unless their Secret binds more (OriginsKey).
	Credentials   string          `json:"credentials,omitempty"`
	JobProperties json.RawMessage `json:"jobproperties,omitempty"`
	// Cluster names the cluster whose agent measures this target's load
	// (a BridgeCluster's name); the record's cluster unless given.
	Cluster string `json:"cluster,omitempty"`
	// StartErrors are what the target's start estimates were off by lately,
	// by partition (the operator copies them from the BridgeCluster's
	// status): earliest-start corrects an estimate by them (StartError).
	StartErrors []StartError `json:"startErrors,omitempty"`
}

// Placement policies (the placement key).
const (
	// PolicyEarliestStart prefers a target where the job starts now, then
	// the scheduler's own start estimate, then the least backlog per CPU.
	PolicyEarliestStart = "earliest-start"
	// PolicyLeastPending prefers the fewest pending CPUs (or jobs) per free CPU.
	PolicyLeastPending = "least-pending"
	// PolicyOrdered takes the first target, in the order given, where the
	// job starts now; else the first that answered and fits (spill-over).
	PolicyOrdered = "ordered"
	// PolicySpread divides an array's tasks among the targets in
	// proportion to how many each can start now (runner/arrayspread.go).
	PolicySpread = "spread"
)

// Policies lists the placement policies, the default first.
var Policies = []string{PolicyEarliestStart, PolicyLeastPending, PolicyOrdered, PolicySpread}

// MaxTargets bounds the targets of one job: each is probed before the
// submit, and the record keeps what each probe saw.
const MaxTargets = 16

var targetName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// parseTargets parses and checks the targets key against the job's own
// backend, resourceURL and jobproperties, which every target inherits
// unless it gives its own.
func parseTargets(raw, placement string, d *Description) error {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var ts []Target
	if err := dec.Decode(&ts); err != nil {
		return backends.Invalid("targets", "is not a JSON list of targets (%s); give e.g. "+
			`[{"name":"a","resourceURL":"http://a:6820"},{"name":"b","resourceURL":"http://b:6820","credentials":"b"}]`+
			" (fields name, backend, resourceURL, credentials, jobproperties, cluster, startErrors)", jsonProblem(err))
	}
	if len(ts) == 0 || len(ts) > MaxTargets {
		return backends.Invalid("targets", "lists %d targets; give 1 to %d", len(ts), MaxTargets)
	}
	seen := map[string]bool{}
	for i := range ts {
		if err := checkTarget(i, &ts[i], d, seen); err != nil {
			return err
		}
	}
	if err := checkCredentialOrigins(ts, d.ResourceURL); err != nil {
		return err
	}
	d.Targets = ts
	d.Policy = strings.TrimSpace(placement)
	if d.Policy == PolicySpread && d.Array == nil {
		return backends.Invalid("placement", "spread divides an array's tasks among the targets, and this job has no array key; give one (e.g. 0-99) or another policy (earliest-start, least-pending, ordered)")
	}
	for _, p := range Policies {
		if d.Policy == p {
			return nil
		}
	}
	return backends.Invalid("placement", "%q is no placement policy; use one of %s", d.Policy, strings.Join(Policies, ", "))
}

// jsonProblem names what is wrong with a JSON value without quoting it.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("%s must be %s", cmpOr(te.Field, "the value"), te.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "an unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "not a list of objects"
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkTarget checks one target, filling in what it inherits.
func checkTarget(i int, t *Target, d *Description, seen map[string]bool) error {
	field := fmt.Sprintf("targets[%d]", i)
	if !targetName.MatchString(t.Name) {
		return backends.Invalid(field+".name", "must be 1 to 40 lower-case letters, digits and dashes (it names the target in the record and in outputs)")
	}
	if seen[t.Name] {
		return backends.Invalid(field+".name", "%s is given twice; name each target once", t.Name)
	}
	seen[t.Name] = true
	t.Backend, t.ResourceURL = strings.TrimSpace(t.Backend), strings.TrimSpace(t.ResourceURL)
	if err := checkResourceURL(field+".resourceURL", t.ResourceURL); err != nil {
		return err
	}
	if c := t.Credentials; c != "" && (path.Clean(c) != strings.TrimSuffix(c, "/") || strings.Contains(c, "..") || c == "/") {
		return backends.Invalid(field+".credentials", "must be a clean directory path (a subdirectory of --credentials-dir, or absolute) without ..")
	}
	if path.IsAbs(t.Credentials) && IdentityDir(t.Credentials) {
		return backends.Invalid(field+".credentials", "is %s, where the pod's own identity (its ServiceAccount token) is mounted, which never goes to a target; "+
			"mount the target's Secret elsewhere (e.g. /targets/%s) and name that directory", t.Credentials, t.Name)
	}
	if t.Cluster = strings.TrimSpace(t.Cluster); CheckCluster(t.Cluster) != nil {
		return backends.Invalid(field+".cluster", "is not a cluster name; give at most 63 lowercase letters, digits, '-' or '.', beginning and ending with a letter or digit (a BridgeCluster's name)")
	}
	if len(t.JobProperties) > 0 {
		if err := checkJSONObject(field+".jobproperties", string(t.JobProperties)); err != nil {
			return err
		}
	}
	if err := checkStartErrors(field+".startErrors", t.StartErrors); err != nil {
		return err
	}
	*t = d.Inherit(*t)
	return nil
}

// Inherit is the one rule by which a target takes the job's fields: each
// of backend, resourceURL and jobproperties that the target does not give
// is the job's, and jobproperties it gives are laid over the job's (a
// cluster it does not name is the record's: its load's agent). A
// target at a URL of its own thus keeps the job's backend (a second Slurm
// is a Slurm); only where neither names a backend is it chosen for the
// target's URL at placement, and with neither a backend nor a URL the
// target is local, as a job is. Credentials are not inherited: a target
// without its own uses the step's, which checkCredentialOrigins keeps to
// one origin. Nor are startErrors: they are the target's own cluster's.
func (d *Description) Inherit(t Target) Target {
	t.Backend = cmpOr(t.Backend, d.Backend)
	t.ResourceURL = cmpOr(t.ResourceURL, d.ResourceURL)
	t.Cluster = cmpOr(t.Cluster, d.Cluster)
	if t.Backend == "" && t.ResourceURL == "" {
		t.Backend = LocalBackend
	}
	if len(t.JobProperties) > 0 {
		t.JobProperties = mergeProperties(d.Properties, t.JobProperties)
	} else {
		t.JobProperties = d.Properties
	}
	return t
}

// mergeProperties overlays a target's jobproperties on the job's: the
// target's keys win (its partition or queue), the job's others stay.
func mergeProperties(base, over json.RawMessage) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(base) > 0 {
		_ = json.Unmarshal(base, &m) // checked by Parse
	}
	var o map[string]json.RawMessage
	_ = json.Unmarshal(over, &o) // checked by checkJSONObject
	for k, v := range o {
		m[k] = v
	}
	b, _ := json.Marshal(m) // keys sorted: the same inputs give the same record
	return b
}

// checkCredentialOrigins keeps the step's credentials to one origin: the
// job's resourceURL when it has one, else the one origin of the targets
// that name no credentials of their own. A target elsewhere that names
// none would be sent credentials given for another system, so it is
// refused here, before anything is probed or submitted.
func checkCredentialOrigins(ts []Target, jobURL string) error {
	own := Origin(jobURL)
	for i, t := range ts {
		if !StepCredentials(t.Credentials) || t.ResourceURL == "" {
			continue
		}
		o := Origin(t.ResourceURL)
		if own == "" {
			own = o
		}
		if o != own {
			return backends.Invalid(fmt.Sprintf("targets[%d].credentials", i),
				"names the step's own credentials (%s), which are for %s and never go to another system; mount this target's Secret and name its directory (e.g. \"credentials\": %q for --credentials-dir/%s)",
				cmpOr(t.Credentials, "by leaving it empty"), own, t.Name, t.Name)
		}
	}
	return nil
}

// StepCredentials: a target's credentials directory is the step's own
// ("", ".", "./"), whichever way it is spelled.
func StepCredentials(dir string) bool { return dir == "" || path.Clean(dir) == "." }

// Origin is what credentials are given for: scheme, login and host:port of
// a URL, lower-cased ("" for no URL).
func Origin(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return strings.ToLower(strings.TrimSpace(raw))
	}
	host := u.Host
	if u.User != nil && u.User.Username() != "" {
		host = u.User.Username() + "@" + host
	}
	return strings.ToLower(u.Scheme + "://" + host)
}

// Placed is the placement a run recorded (status.placement) before its
// submit intent: the target chosen, the policy, when, and what each probe
// saw, so that a re-attach never submits elsewhere and status shows where
// and why.
type Placed struct {
	Target string `json:"target"`
	// Backend is the target's backend, as given or as chosen for its URL.
	Backend string    `json:"backend"`
	Policy  string    `json:"policy"`
	At      time.Time `json:"at"`
	Probes  []Probe   `json:"probes"`
	// Shares, for an array spread over several targets, are the targets
	// that got tasks and which; empty when the job went to Target alone.
	Shares []Share `json:"shares,omitempty"`
}

// Share is the part of a spread array one target runs: its indexes in
// the user's array ("0-11,40") and how many tasks they are.
type Share struct {
	Target  string `json:"target"`
	Backend string `json:"backend"`
	Indexes string `json:"indexes"`
	Tasks   int    `json:"tasks"`
}

// Probe is what placement saw of one target: its load, or why it was
// skipped (in bridge-runner's words, never a server's).
type Probe struct {
	Target  string `json:"target"`
	Queue   string `json:"queue,omitempty"`
	Skipped string `json:"skipped,omitempty"`
	// Shared: the figures are another invoke's recent probe of the same
	// cluster for the same kind of job, with what was placed there since.
	Shared      bool `json:"shared,omitempty"`
	FreeCPUs    *int `json:"freeCPUs,omitempty"`
	TotalCPUs   *int `json:"totalCPUs,omitempty"`
	PendingJobs *int `json:"pendingJobs,omitempty"`
	RunningJobs *int `json:"runningJobs,omitempty"`
	PendingCPUs *int `json:"pendingCPUs,omitempty"`
	// The work pending and running there in CPU-seconds (CPUs × time
	// limit, CPUs × time left), where the probe could tell.
	PendingCPUSeconds *int64     `json:"pendingCPUSeconds,omitempty"`
	RunningCPUSeconds *int64     `json:"runningCPUSeconds,omitempty"`
	EstimatedStart    *time.Time `json:"estimatedStart,omitempty"`
}

// ParsePlaced reads status.placement ("" is no placement yet).
func ParsePlaced(v string) (*Placed, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	var p Placed
	if err := dec.Decode(&p); err != nil || p.Target == "" || p.Backend == "" {
		return nil, backends.Invalid(KeyPlacement, "is not a placement bridge-runner wrote; delete the record (cleanup) and run the step again")
	}
	return &p, nil
}

// Place makes d the description of the job at the placed target: its
// backend, URL, jobproperties and credentials directory.
func (d *Description) Place(p Placed) error {
	for _, t := range d.Targets {
		if t.Name == p.Target {
			d.Backend, d.ResourceURL, d.Properties = cmpOr(p.Backend, t.Backend), t.ResourceURL, t.JobProperties
			d.CredentialsDir, d.Target = t.Credentials, t.Name
			return nil
		}
	}
	return backends.Invalid(KeyPlacement, "names target %s, which the targets key does not list; the record was edited: cleanup, then run the step again", p.Target)
}

// DescribeRecord is the checked description of a record's job, placed at
// the target its run recorded (if any): what cleanup and a re-attach use.
func DescribeRecord(data map[string]string) (*Description, error) {
	d, err := SpecFromData(data).Parse()
	if err != nil {
		return nil, err
	}
	p, err := ParsePlaced(data[KeyPlacement])
	if err != nil || p == nil || len(d.Targets) == 0 {
		return d, err
	}
	return d, d.Place(*p)
}
