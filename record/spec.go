// Package record is the contract of a job's state record, which invoke,
// cleanup and the operator share: the job description's fields as one table
// (ConfigMap key, IBM spellings, CLI flag, KFP input, Argo parameter,
// BridgeJob field, validation), the record's state keys, the state table
// with each state's facts, the faults, and the stores (a ConfigMap or a
// file). It imports no backend and no S3 client.
package record

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Spec is the job description: the one source of truth for a job's inputs,
// one table of its fields. Each field's tags give its ConfigMap key
// (compatible with IBM's Bridge Operator), its CLI flag, its default, its
// help text, its path in a BridgeJob's spec (crd), IBM's other spellings of
// its key (ibm) and its KFP type when not String (type); the KFP component
// inputs and Argo template parameters are the flag names in snake_case (see
// InputName), and Parse is its validation. Tests prove that every surface
// (CLI, KFP, Argo, BridgeJob CRD and types, IBM keys, README) agrees.
//
// All values are strings because that is what a ConfigMap holds; Parse turns
// them into a checked Job.
type Spec struct {
	Backend             string `key:"backend" flag:"backend" help:"the remote system: local, slurm, lsf, ray, quantum or htcondor (slurm and htcondor also over SSH, with an ssh://user@host URL); default local without a resource URL, else what the URL says" crd:"backend"`
	ResourceURL         string `key:"resourceURL" flag:"resource-url" help:"base URL of the remote system's API (not needed for local)" crd:"resourceURL"`
	ResourceSecret      string `key:"resourcesecret" flag:"resource-secret" help:"name of the Secret mounted as the credentials directory (informational)" crd:"resourcesecret"`
	Targets             string `key:"targets" flag:"targets" help:"run where the job starts soonest: a JSON list of targets, each {name, backend, resourceURL, credentials, jobproperties, cluster}, inheriting the job's own; probed (or read from the cluster's agent), one chosen by placement and recorded before the submit" crd:"targets"`
	Placement           string `key:"placement" flag:"placement" default:"earliest-start" help:"how targets are chosen: earliest-start, least-pending, ordered (the first where the job starts now, else the first that fits) or spread (the tasks of an array divided among the targets by what each can start now)" crd:"placement"`
	UpdateInterval      string `key:"updateInterval" flag:"update-interval" default:"20" help:"longest time between two status polls: seconds, or a duration such as 1m" crd:"updateinterval" ibm:"updateinterval" type:"Integer"`
	PendingLimit        string `key:"pendingLimit" flag:"pending-limit" help:"give up on a job that has not started after this long (seconds or a duration such as 30m): invoke cancels it and exits 2 naming the scheduler's reason; default none" crd:"pendingLimit"`
	ReplaceAfter        string `key:"replaceAfter" flag:"replace-after" help:"with two or more targets: a job still pending after this long (seconds or a duration such as 10m) moves to another target that would start it now, exactly once: only after its first target confirmed it cancelled and never started; default never" crd:"replaceAfter"`
	Array               string `key:"array" flag:"array" help:"job array: run the job as many tasks, e.g. 0-999 or 1,3,8-15, then %M for at most M at once (%50); each task sees its index in BRIDGE_TASK_INDEX (Slurm, HTCondor, LSF)" crd:"array"`
	JobProperties       string `key:"jobproperties" flag:"job-properties" help:"backend-native job settings as a JSON object" crd:"jobproperties" ibm:"jobProperties"`
	JobScript           string `key:"jobdata.jobScript" flag:"script" help:"the job script: its text (inline), a path on the remote system (remote) or bucket:object (s3)" crd:"jobdata.jobscript" ibm:"jobdata.jobscript"`
	ScriptLocation      string `key:"jobdata.scriptLocation" flag:"script-location" default:"inline" help:"where the script is: inline, remote or s3" crd:"jobdata.scriptlocation" ibm:"jobdata.scriptlocation"`
	ScriptMetadata      string `key:"jobdata.scriptMetadata" flag:"script-metadata" help:"script metadata: JSON (inline) or bucket:object (s3)" crd:"jobdata.scriptmetadata" ibm:"jobdata.scriptmetadata"`
	JobParameters       string `key:"jobdata.jobParameters" flag:"job-parameters" help:"job parameters: JSON (inline) or bucket:object (s3)" crd:"jobdata.jobparameters" ibm:"jobdata.jobparameters"`
	ScriptExtraLocation string `key:"jobdata.scriptExtraLocation" flag:"script-extra-location" default:"inline" help:"where metadata and parameters are: inline or s3" crd:"jobdata.scriptextralocation" ibm:"jobdata.scriptextralocation"`
	AdditionalData      string `key:"jobdata.additionalData" flag:"additional-data" help:"comma-separated bucket:object input files for the job" crd:"jobdata.additionaldata" ibm:"jobdata.additionaldata"`
	S3Endpoint          string `key:"s3.endpoint" flag:"s3-endpoint" help:"S3 endpoint, host:port" crd:"s3storage.endpoint" ibm:"s3storage.endpoint"`
	S3Secure            string `key:"s3.secure" flag:"s3-secure" default:"true" help:"use TLS for S3: true or false" crd:"s3storage.secure" ibm:"s3storage.secure" type:"Boolean"`
	S3Secret            string `key:"s3.secret" flag:"s3-secret" help:"name of the Secret mounted as the S3 credentials directory (informational)" crd:"s3storage.s3secret" ibm:"s3storage.s3secret"`
	S3Region            string `key:"s3.region" flag:"s3-region" help:"S3 region (default: asked of the server)" crd:"s3storage.region"`
	S3UploadBucket      string `key:"s3upload.bucket" flag:"s3-upload-bucket" help:"bucket that receives the job's outputs and logs" crd:"s3upload.bucket"`
	S3UploadFiles       string `key:"s3upload.files" flag:"s3-upload-files" help:"comma-separated files on the remote system to upload after the job" crd:"s3upload.files"`
	S3CreateBucket      string `key:"s3upload.createBucket" flag:"s3-create-bucket" default:"false" help:"create s3upload.bucket if it does not exist: true or false" crd:"s3upload.createbucket" type:"Boolean"`
	S3UploadLayout      string `key:"s3upload.layout" flag:"s3-upload-layout" default:"run" help:"where outputs go in s3upload.bucket: run (<job>/<key>/<job id>/<file>, unique to the run) or ibm (<job>/<file>, as IBM's Bridge Operator wrote them; another run of the same job name overwrites them)" crd:"s3upload.layout"`
	Cluster             string `key:"cluster" flag:"cluster" help:"the cluster whose agent follows this job (a BridgeCluster's name): the record gets the label bridge-runner.io/cluster, and while the agent's heartbeat works invoke neither polls nor elects a watcher; default none" crd:"cluster"`
}

// Field describes one Spec field.
type Field struct {
	Key     string   // ConfigMap key
	Flag    string   // CLI flag name
	Default string   // the flag's, the KFP input's and the Argo parameter's default
	Help    string   // the flag's help
	CRD     string   // path in a BridgeJob's spec (IBM's spelling), e.g. jobdata.jobscript
	IBM     []string // IBM's spellings of Key, read as Key
	KFPType string   // KFP input type (see Type)
	index   int
}

// InputName is the field's KFP component input and Argo parameter name.
func (f Field) InputName() string { return Snake(f.Flag) }

// Get returns the field's value in s.
func (f Field) Get(s *Spec) string { return reflect.ValueOf(s).Elem().Field(f.index).String() }

// Ptr returns a pointer to the field's value in s, for flag binding.
func (f Field) Ptr(s *Spec) *string {
	return reflect.ValueOf(s).Elem().Field(f.index).Addr().Interface().(*string)
}

// Fields lists the Spec fields in declaration order.
var Fields = func() []Field {
	t := reflect.TypeOf(Spec{})
	out := make([]Field, t.NumField())
	for i := range out {
		tag := t.Field(i).Tag
		out[i] = Field{Key: tag.Get("key"), Flag: tag.Get("flag"), Default: tag.Get("default"), Help: tag.Get("help"),
			CRD: tag.Get("crd"), KFPType: tag.Get("type"), index: i}
		if ibm := tag.Get("ibm"); ibm != "" {
			out[i].IBM = strings.Split(ibm, ",")
		}
	}
	return out
}()

// FieldByKey returns the field with the given ConfigMap key.
func FieldByKey(key string) (Field, bool) {
	for _, f := range Fields {
		if f.Key == key {
			return f, true
		}
	}
	return Field{}, false
}

// WithDefaults returns s with every empty field set to its default. The
// backend defaults to local only when no resourceURL is set: with one,
// SelectBackend decides, since a job meant for a remote system must never
// run on this machine.
func (s Spec) WithDefaults() Spec {
	for _, f := range Fields {
		if p := f.Ptr(&s); *p == "" {
			*p = f.Default
		}
	}
	if s.Backend == "" && strings.TrimSpace(s.ResourceURL) == "" && strings.TrimSpace(s.Targets) == "" {
		s.Backend = LocalBackend
	}
	return s
}

// LocalBackend is the backend of a job without a resourceURL and without a
// backend: the job runs on this machine.
const LocalBackend = "local"

// Data returns the ConfigMap data for s: every non-empty field under its key.
func (s Spec) Data() map[string]string {
	d := map[string]string{}
	for _, f := range Fields {
		if v := f.Get(&s); v != "" {
			d[f.Key] = v
		}
	}
	return d
}

// SpecFromData reads a Spec out of ConfigMap data, each key also under its
// IBM spellings (ibmkeys.go); keys that are not Spec fields (the state keys)
// are ignored (CheckKeys refuses unknown ones).
func SpecFromData(d map[string]string) Spec {
	var s Spec
	for _, f := range Fields {
		*f.Ptr(&s) = dataValue(d, f.Key)
	}
	return s
}

// Diff lists the keys whose values differ between a and b, with defaults
// applied to both (so an explicit default equals an omitted one). A backend
// left open on one side (a resourceURL and no backend, as in IBM's records)
// does not differ: SelectBackend decides it.
func Diff(a, b Spec) []string {
	a, b = a.WithDefaults(), b.WithDefaults()
	var keys []string
	for _, f := range Fields {
		if f.Key == "backend" && (a.Backend == "" || b.Backend == "") {
			continue
		}
		if f.Get(&a) != f.Get(&b) {
			keys = append(keys, f.Key)
		}
	}
	return keys
}

// Location values for jobdata.scriptLocation and jobdata.scriptExtraLocation.
const (
	Inline = "inline"
	Remote = "remote"
	S3     = "s3"
)

// Description is a checked Spec.
type Description struct {
	Backend     string
	ResourceURL string
	// Targets are the places the job may run (nil: Backend at
	// ResourceURL). Until Place chose one, Backend and ResourceURL are the
	// job's own, which targets inherit.
	Targets []Target
	Policy  string // the placement policy (record.Policies)
	// Target is the placed target's name; CredentialsDir its credentials
	// directory ("" for the step's own).
	Target         string
	CredentialsDir string
	UpdateInterval time.Duration
	// PendingLimit is how long the job may wait to start before invoke
	// cancels it and exits 2 naming the scheduler's reason (0: no limit).
	PendingLimit time.Duration
	// ReplaceAfter is how long the job may wait to start on its target
	// before invoke moves it to another that starts it now (0: never).
	ReplaceAfter   time.Duration
	Array          *backends.Array // nil: one job, not an array
	Properties     json.RawMessage
	Script         string
	ScriptLocation string
	Metadata       string // JSON, or bucket:object when ExtraLocation is s3
	Parameters     string
	ExtraLocation  string
	AdditionalData []ObjectRef
	S3             S3Settings
	UploadBucket   string
	UploadFiles    []string
	UploadLayout   string // LayoutRun or LayoutIBM
	// Cluster names the cluster whose agent follows the job ("" for none).
	Cluster string
}

// The layouts of s3upload.layout: where a run's outputs go in the bucket.
const (
	LayoutRun = "run" // <job>/<key>/<job id>/, unique to the run
	LayoutIBM = "ibm" // <job>/, as IBM's Bridge Operator wrote them
)

// S3Settings are the job's S3 connection settings (credentials are mounted).
type S3Settings struct {
	Endpoint     string
	Secure       bool
	Region       string
	CreateBucket bool
}

// ObjectRef is an S3 object named as bucket:object.
type ObjectRef struct{ Bucket, Object string }

func (o ObjectRef) String() string { return o.Bucket + ":" + o.Object }

// ParseObjectRef parses bucket:object.
func ParseObjectRef(field, v string) (ObjectRef, error) {
	b, o, ok := strings.Cut(strings.TrimSpace(v), ":")
	if !ok || b == "" || o == "" {
		return ObjectRef{}, backends.Invalid(field, "%q is not bucket:object; write it as my-bucket:path/to/object", v)
	}
	return ObjectRef{Bucket: b, Object: o}, nil
}

// MaxDescriptionBytes bounds the job description: a ConfigMap holds at most
// 1 MiB of data, and the state keys need room beside the description.
const MaxDescriptionBytes = 1<<20 - 64<<10

// MaxUpdateInterval bounds updateInterval: slower polling would make a
// finished job look like a hung step.
const MaxUpdateInterval = time.Hour

// Parse checks s (with defaults applied) and returns the Description. Every
// error wraps backends.ErrInvalid and names the ConfigMap key at fault.
func (s Spec) Parse() (*Description, error) {
	s = s.WithDefaults()
	if err := checkSize(s); err != nil {
		return nil, err
	}
	d := &Description{Backend: strings.TrimSpace(s.Backend), ResourceURL: strings.TrimSpace(s.ResourceURL)}
	if d.Backend == "" && strings.TrimSpace(s.Targets) == "" {
		return nil, backends.Invalid("backend", "is empty; set --backend (or BRIDGE_BACKEND) to local, slurm, lsf, ray, quantum or htcondor")
	}
	var err error
	if d.UpdateInterval, err = parseInterval(s.UpdateInterval); err != nil {
		return nil, err
	}
	if d.PendingLimit, err = ParsePendingLimit(s.PendingLimit); err != nil {
		return nil, err
	}
	if d.ReplaceAfter, err = ParseReplaceAfter(s.ReplaceAfter); err != nil {
		return nil, err
	}
	if d.Cluster = strings.TrimSpace(s.Cluster); CheckCluster(d.Cluster) != nil {
		return nil, CheckCluster(d.Cluster)
	}
	if a := strings.TrimSpace(s.Array); a != "" {
		arr, err := backends.ParseArray(a)
		if err != nil {
			return nil, err
		}
		d.Array = &arr
	}
	if p := strings.TrimSpace(s.JobProperties); p != "" {
		if err := checkJSONObject("jobproperties", p); err != nil {
			return nil, err
		}
		d.Properties = json.RawMessage(p)
	}
	if err := parseTargets(s.Targets, s.Placement, d); err != nil {
		return nil, err
	}
	if err := checkReplace(d); err != nil {
		return nil, err
	}
	if err := s.parseScript(d); err != nil {
		return nil, err
	}
	if d.AdditionalData, err = parseAdditionalData(s.AdditionalData); err != nil {
		return nil, err
	}
	if err := s.parseS3(d); err != nil {
		return nil, err
	}
	if err := checkAddresses(d); err != nil {
		return nil, err
	}
	return d, nil
}

// parseScript checks the script and its metadata and parameters, wherever
// they are (inline, remote, S3), into d.
func (s Spec) parseScript(d *Description) error {
	d.ScriptLocation = strings.ToLower(strings.TrimSpace(s.ScriptLocation))
	d.Script = s.JobScript
	switch d.ScriptLocation {
	case Inline:
		if strings.TrimSpace(d.Script) == "" {
			return backends.Invalid("jobdata.jobScript", "is empty; give the script's text with --script")
		}
	case Remote:
		d.Script = strings.TrimSpace(d.Script)
		if d.Script == "" {
			return backends.Invalid("jobdata.jobScript", "is empty; give the script's path on the remote system with --script")
		}
	case S3:
		if _, err := ParseObjectRef("jobdata.jobScript", d.Script); err != nil {
			return err
		}
	default:
		return backends.Invalid("jobdata.scriptLocation", "is %q; use inline, remote or s3", s.ScriptLocation)
	}
	d.ExtraLocation = strings.ToLower(strings.TrimSpace(s.ScriptExtraLocation))
	d.Metadata, d.Parameters = strings.TrimSpace(s.ScriptMetadata), strings.TrimSpace(s.JobParameters)
	switch d.ExtraLocation {
	case Inline:
		for key, v := range map[string]string{"jobdata.scriptMetadata": d.Metadata, "jobdata.jobParameters": d.Parameters} {
			if v != "" && !json.Valid([]byte(v)) {
				return backends.Invalid(key, "is not valid JSON; give a JSON value, or set jobdata.scriptExtraLocation=s3 and give bucket:object")
			}
		}
	case S3:
		for key, v := range map[string]string{"jobdata.scriptMetadata": d.Metadata, "jobdata.jobParameters": d.Parameters} {
			if v != "" {
				if _, err := ParseObjectRef(key, v); err != nil {
					return err
				}
			}
		}
	default:
		return backends.Invalid("jobdata.scriptExtraLocation", "is %q; use inline or s3", s.ScriptExtraLocation)
	}
	return nil
}

// parseS3 checks the S3 settings and the uploads into d.
func (s Spec) parseS3(d *Description) error {
	var err error
	d.S3.Endpoint = strings.TrimSpace(s.S3Endpoint)
	if d.S3.Secure, err = strconv.ParseBool(strings.TrimSpace(s.S3Secure)); err != nil {
		return backends.Invalid("s3.secure", "is %q; use true or false", s.S3Secure)
	}
	d.S3.Region = strings.TrimSpace(s.S3Region)
	if d.S3.CreateBucket, err = strconv.ParseBool(strings.TrimSpace(s.S3CreateBucket)); err != nil {
		return backends.Invalid("s3upload.createBucket", "is %q; use true or false", s.S3CreateBucket)
	}
	d.UploadBucket = strings.TrimSpace(s.S3UploadBucket)
	d.UploadFiles = splitList(s.S3UploadFiles)
	if err := checkUploadFiles(d.UploadFiles); err != nil {
		return err
	}
	switch d.UploadLayout = cmp.Or(strings.TrimSpace(s.S3UploadLayout), LayoutRun); d.UploadLayout {
	case LayoutRun, LayoutIBM:
	default:
		return backends.Invalid("s3upload.layout", "is %q; use run (<job>/<key>/<job id>/<file>) or ibm (<job>/<file>, IBM's)", s.S3UploadLayout)
	}
	if d.UsesS3() && d.S3.Endpoint == "" {
		return backends.Invalid("s3.endpoint", "is empty but the job uses S3; set --s3-endpoint to host:port")
	}
	if len(d.UploadFiles) > 0 && d.UploadBucket == "" {
		return backends.Invalid("s3upload.bucket", "is empty but s3upload.files names files to upload; set --s3-upload-bucket")
	}
	return nil
}

// UsesS3 reports whether the job reads from or writes to S3.
func (d *Description) UsesS3() bool {
	return d.ScriptLocation == S3 || (d.ExtraLocation == S3 && (d.Metadata != "" || d.Parameters != "")) ||
		len(d.AdditionalData) > 0 || d.UploadBucket != ""
}

// checkSize refuses a description too big for its ConfigMap, blaming its
// biggest field (the script, as a rule) and pointing at S3.
func checkSize(s Spec) error {
	total, biggest, size := 0, "", 0
	for k, v := range s.Data() {
		total += len(k) + len(v)
		if len(v) > size {
			biggest, size = k, len(v)
		}
	}
	if total <= MaxDescriptionBytes {
		return nil
	}
	return backends.Invalid(biggest, "the job description is %d bytes (%s alone is %d), more than a ConfigMap holds (%d); put it in S3 (scriptLocation or scriptExtraLocation s3) or on the remote system (remote)",
		total, biggest, size, MaxDescriptionBytes)
}

// parseAdditionalData parses jobdata.additionalData, refusing two objects
// with one base name: each is staged beside the job under its base name,
// so one would silently overwrite the other (before, only once the job was
// staged, and as a fault that a retry met again).
func parseAdditionalData(list string) ([]ObjectRef, error) {
	var refs []ObjectRef
	byName := map[string]ObjectRef{}
	for _, item := range splitList(list) {
		ref, err := ParseObjectRef("jobdata.additionalData", item)
		if err != nil {
			return nil, err
		}
		name := path.Base(ref.Object)
		if first, ok := byName[name]; ok {
			return nil, backends.Invalid("jobdata.additionalData", "%s and %s have the same file name %q, and the job's input files are "+
				"named by their base name; give each object a different base name (or stage them as one archive)", first, ref, name)
		}
		byName[name] = ref
		refs = append(refs, ref)
	}
	return refs, nil
}

// decimalRE is a plain decimal number of seconds: ParseFloat would also
// take 0x1p4 (16) and 1_000 (in Go syntax), which no one means here.
var decimalRE = regexp.MustCompile(`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)

func parseInterval(v string) (time.Duration, error) {
	d, err := parseSeconds("updateInterval", v)
	if err != nil {
		return 0, err
	}
	if d < 100*time.Millisecond || d > MaxUpdateInterval {
		return 0, backends.Invalid("updateInterval", "is %s; give a value from 0.1s to %s", d, MaxUpdateInterval)
	}
	return d, nil
}

// parseSeconds reads a duration field: decimal seconds (20, 0.5) or a Go
// duration (1m30s).
func parseSeconds(field, v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	n, perr := strconv.ParseFloat(v, 64)
	switch {
	case perr == nil && decimalRE.MatchString(v):
		return secondsDuration(field, v, n)
	case perr == nil: // 0x1p4, 1_000, 1e3, NaN, Inf: Go's syntax, not seconds anyone writes
		return 0, NewFault(FaultDuration, field, "is %q, not a decimal number of seconds (no hex, exponent, '_', NaN or Inf); "+
			"give decimal seconds (20, 0.5) or a duration (1m30s)", v)
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, backends.Invalid(field, "is %q; give decimal seconds (20, 0.5) or a duration (1m30s)", v)
	}
	return d, nil
}

// MaxPendingLimit bounds pendingLimit: a job may wait a long time for its
// turn, but a limit past a year is no limit anyone means.
const MaxPendingLimit = 365 * 24 * time.Hour

// ParsePendingLimit reads pendingLimit: "" or 0 is none (the job may wait
// for ever, as it does under sbatch), else 1s to MaxPendingLimit.
func ParsePendingLimit(v string) (time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return 0, nil
	}
	d, err := parseSeconds("pendingLimit", v)
	if err != nil || d == 0 {
		return 0, err
	}
	if d < time.Second || d > MaxPendingLimit {
		return 0, backends.Invalid("pendingLimit", "is %s; give 0 (no limit) or a value from 1s to %s, e.g. 30m", d, MaxPendingLimit)
	}
	return d, nil
}

// MinReplaceAfter and MaxReplaceAfter bound replaceAfter: below a second
// is a slip of the unit; later than a week, it would never matter.
const (
	MinReplaceAfter = time.Second
	MaxReplaceAfter = 7 * 24 * time.Hour
)

// ParseReplaceAfter reads replaceAfter: "" or 0 is never.
func ParseReplaceAfter(v string) (time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return 0, nil
	}
	d, err := parseSeconds("replaceAfter", v)
	if err != nil || d == 0 {
		return 0, err
	}
	if d < MinReplaceAfter || d > MaxReplaceAfter {
		return 0, backends.Invalid("replaceAfter", "is %s; give 0 (never) or a value from %s to %s, e.g. 10m", d, MinReplaceAfter, MaxReplaceAfter)
	}
	return d, nil
}

// checkReplace: a job moves only between its targets, one at a time.
func checkReplace(d *Description) error {
	switch {
	case d.ReplaceAfter == 0:
		return nil
	case len(d.Targets) < 2:
		return backends.Invalid("replaceAfter", "needs at least two targets to move a job between; give targets (two or more) or leave replaceAfter empty")
	case d.Array != nil:
		return backends.Invalid("replaceAfter", "does not apply to a job array; leave replaceAfter empty or drop array")
	}
	return nil
}

func checkJSONObject(field, v string) error {
	var obj map[string]any
	if err := json.Unmarshal([]byte(v), &obj); err != nil || obj == nil {
		msg := "is not a JSON object"
		if err != nil {
			msg = fmt.Sprintf("is not a JSON object (%v)", err)
		}
		return backends.Invalid(field, "%s; give an object such as {\"partition\":\"debug\"}", msg)
	}
	return nil
}

// splitList splits a comma-separated list, trimming items and dropping
// empty ones (IBM's samples use both "a,b" and "a, b").
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// LogObject is the name the job's log is uploaded under, beside the files
// of s3upload.files.
const LogObject = "job.log"

// OutputName is where a remote file goes under the run's prefix: its path
// made relative and free of "..", so two files with one base name in
// different directories do not collide.
func OutputName(file string) string {
	clean := path.Clean("/" + strings.ReplaceAll(file, "\\", "/"))
	return strings.TrimPrefix(clean, "/")
}

// checkUploadFiles refuses s3upload.files that cannot each have an object
// of their own under the run's prefix, before anything is submitted: a name
// that is the job's directory itself ("." or "/": the key would be the
// prefix, which an S3 server on a file system refuses with 400), the log's
// name, or two names for one object (the second would replace the first).
func checkUploadFiles(files []string) error {
	seen := map[string]string{}
	for _, f := range files {
		n := OutputName(f)
		switch {
		case n == "":
			return backends.Invalid("s3upload.files", "%q names the job's directory, not a file; name the files to upload", f)
		case n == LogObject:
			return backends.Invalid("s3upload.files", "%q would be uploaded as %s, where the job's log goes; rename the file, or drop it (the log is uploaded anyway)", f, LogObject)
		}
		if other, ok := seen[n]; ok {
			return backends.Invalid("s3upload.files", "%q and %q are both uploaded as %s; name each file once", other, f, n)
		}
		seen[n] = f
	}
	return nil
}
