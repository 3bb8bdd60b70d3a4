// Package backends defines what a remote system must offer bridge-runner: a
// small required interface (submit, status, cancel) plus optional capabilities
// that the runner discovers by type assertion. A backend speaks its wire
// protocol and maps states; polling, retries, logging and staging policy live
// in package runner.
package backends

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// Job is what the runner hands a backend to submit: the job description with
// every indirection (S3, inline, defaults) already resolved.
type Job struct {
	// Name is the workflow-level job name (the ConfigMap is <Name>-bridge-cm).
	Name string
	// Key is the idempotency key, derived from the state record's UID. The
	// backend stamps it into its own job record so that FindByKey can find it.
	Key string
	// Script is the job script's text, for inline and S3 scripts.
	Script string
	// ScriptPath is a path on the remote system (scriptLocation=remote).
	ScriptPath string
	// Properties is jobproperties: backend-native settings as a JSON object.
	Properties json.RawMessage
	// Parameters is jobdata.jobParameters as JSON (may be empty).
	Parameters json.RawMessage
	// Metadata is jobdata.scriptMetadata as JSON (may be empty).
	Metadata json.RawMessage
	// Inputs are jobdata.additionalData, for backends that are InputStagers.
	Inputs []InputFile
	// LogShip, when set, asks a LogShipper to have the job send its own
	// output out while it runs.
	LogShip *LogShip
}

// LogShip is where and how often a job ships its output: URL is a presigned
// HTTP PUT URL for one object (a secret: it travels in the job's
// environment, never in its script); the job PUTs its whole output file
// there every Every while it runs, when the file grew, and once at its end.
type LogShip struct {
	URL   string
	Every time.Duration
	// Tasks, for an array, has every task ship its own output (else only
	// the lowest index's task ships, to URL): URL is then where a
	// presigned POST form is sent (Tasks.Fields, secrets like URL's
	// signature), and task i's output goes to the object
	// Tasks.KeyPrefix+"i.log", i being the index the user gave.
	Tasks *TaskShip
}

// TaskShip is the presigned POST policy an array's tasks ship their
// outputs with: it lets its holder write any key under KeyPrefix, and
// nothing else, until it expires.
type TaskShip struct {
	KeyPrefix string
	Fields    map[string]string
	// Live is the index of the task whose output the step's log follows
	// (-1: none): it ships every LogShip.Every, the others every
	// OthersEvery, so that a wide array does not flood S3 with PUTs.
	Live        int
	OthersEvery time.Duration
}

// Status is a backend's view of a job at one moment.
type Status struct {
	State    State
	Raw      string // the backend's own state, e.g. "TIMEOUT" or "EXIT"
	Reason   string // why, when the backend says (e.g. "NonZeroExitCode", "1305")
	Message  string // human-readable detail
	ExitCode *int   // the job's exit code, when known
	// Category is whose doing a FAILED or KILLED end was, when the backend
	// can tell (see FailureCategory for the default).
	Category Category

	SubmitTime time.Time
	StartTime  time.Time
	EndTime    time.Time
}

// Backend is the required interface. Implementations must be safe for use by
// one goroutine at a time; the runner never calls them concurrently except
// Cancel, which may race with Status.
type Backend interface {
	// Submit submits job and returns the backend's job id. An error wrapping
	// ErrInvalid means the backend refused the job as given (exit 2).
	Submit(ctx context.Context, job Job) (string, error)
	// Status returns the job's current status. A job the backend no longer
	// knows must be reported as an error wrapping ErrNotFound.
	Status(ctx context.Context, id string) (Status, error)
	// Cancel asks the backend to end the job. Cancelling a job that has
	// already ended is not an error.
	Cancel(ctx context.Context, id string) error
}

// Finder is implemented by backends that can find a job by the idempotency
// key stamped into it at submit. It is what makes adoption after a crash
// between submit and recording the id possible.
type Finder interface {
	// FindByKey returns the id of the job carrying key, or "" if none.
	FindByKey(ctx context.Context, key string) (string, error)
}

// Preparer is implemented by backends that must know something of the
// server before they can submit (slurmrestd: which API version it
// speaks) and learn it the first time they need it. Prepare learns it if
// it is not known yet (a version recalled from the record or a cluster
// agent's heartbeat costs nothing; compare Discoverer, which always asks
// anew). The runner calls Prepare before it claims the submit intent,
// within the retry budget, so that the submit's own window, which the
// submit lease bounds, holds the submit alone: under a burst of steps on
// one daemon the discovery requests queued behind everyone else's and ate
// that window, and the step exited 75 while its submit, still queued, went
// on to start a job no record followed.
type Preparer interface {
	Prepare(ctx context.Context) error
}

// Forgetter is implemented by backends that keep something of a job on
// this side of the wire (the local backend's job directory). cleanup calls
// Forget once the job has ended and its record is about to go, so nothing
// of the job stays behind. A job that has not ended is left as it is (an
// error says so).
type Forgetter interface {
	Forget(ctx context.Context, id string) error
}

// EndWatcher is implemented by backends whose jobs announce their own end:
// a wrapper around the job's script leaves an end marker (Slurm over SSH),
// or the scheduler writes a job event log (HTCondor), where the backend can
// see it without asking the scheduler. WaitEnd returns nil once the job's
// end is announced, ctx's error when ctx ends first (it must then leave
// nothing running, here or remotely), and any other error when it cannot
// watch this job (the runner then relies on its polls alone). An end
// announced is only a hint to ask the scheduler at once: its answer stays
// the source of truth for the final state, and a job that never announces
// its end (its wrapper killed) is still found by the polls. WaitEnd runs
// in a goroutine of its own beside Status and Cancel.
type EndWatcher interface {
	WaitEnd(ctx context.Context, id string) error
}

// Validator is implemented by backends that can check a job before anything
// is submitted. Errors should wrap ErrInvalid and name the field.
type Validator interface {
	Validate(job Job) error
}

// LogReader is implemented by backends (and by the runner's own log
// sources: a shared file, an object a log shipper writes) that can read a
// job's output while it runs. ReadLogs writes the bytes from offset on to w
// and returns the next offset. It must return promptly (it reads what is
// there, it does not wait for more) and stream: memory must not grow with
// the log's size. The runner decides when to call it and where the bytes go.
type LogReader interface {
	ReadLogs(ctx context.Context, id string, offset int64, w io.Writer) (next int64, err error)
}

// TaskOutputLocator is an OutputLocator that also says where one task of
// an array writes its output (on a shared file system), so that the step
// can follow a task other than the lowest: task is the index in the native
// array arrayID (a chunk's, when the array was split). ErrNotFound: the
// task has not started (its file's name is not known yet).
type TaskOutputLocator interface {
	TaskOutputPath(ctx context.Context, arrayID string, task int) (string, error)
}

// TaskLogReader is implemented by backends that read the output of any
// task of an array themselves (Slurm over SSH and HTCondor, with the SSH
// session the invoke holds): task is the index in the native array
// arrayID (a chunk's, when the array was split). Like LogReader's, a read
// returns promptly and streams. ErrNotFound: the task has no output yet (it has not started).
// The runner follows one task with it and, at the end, uploads every
// task's output to S3, so that no credential has to reach the cluster.
type TaskLogReader interface {
	ReadTaskLogs(ctx context.Context, arrayID string, task int, offset int64, w io.Writer) (next int64, err error)
}

// TaskErrReader is implemented by TaskLogReaders whose tasks write their
// standard error to a file of its own (HTCondor's task-N.err), where
// Slurm writes both streams to one file. ReadTaskErrs reads it as
// ReadTaskLogs reads the output; the runner appends it to the task's log
// object after a marker line, so that a task's log is one object on every
// backend. The two files keep no order between them: they are appended,
// never interleaved.
type TaskErrReader interface {
	ReadTaskErrs(ctx context.Context, arrayID string, task int, offset int64, w io.Writer) (next int64, err error)
}

// LogShipper is implemented by backends whose API cannot read a job's
// output (Slurm's REST API has no file access) but whose jobs can send it
// out themselves: given Job.LogShip, Submit wraps the job so that it does.
// The runner then reads the object from S3.
type LogShipper interface {
	ShipsLogs() bool
}

// TimeLimiter is implemented by backends that can read a job's time limit
// from its description (Slurm's time_limit), so that what the job is given
// for its run, a log shipper's presigned URL, lives no longer than it
// needs. ok is false when the job has no limit of its own.
type TimeLimiter interface {
	TimeLimit(job Job) (limit time.Duration, ok bool)
}

// OutputLocator is implemented by backends that know the path, on the
// remote system, of the file a job's standard output goes to. The runner
// reads it where a shared file system makes it visible in the pod.
type OutputLocator interface {
	OutputPath(ctx context.Context, id string) (string, error)
}

// InputFile is an input file for the job (jobdata.additionalData), opened on
// demand so that large files stream.
type InputFile struct {
	Name string // base name the job sees
	Size int64
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// InputStager is implemented by backends that can make input files
// available to the job (LSF uploads them, Ray ships a working_dir, local
// copies them into the job's directory). Submit then receives them in
// Job.Inputs; for other backends additionalData is refused before submit.
type InputStager interface {
	StagesInputs() bool
}

// OutputFetcher is implemented by backends that can read a file the job
// wrote (s3upload.files), by its path as the user gave it.
type OutputFetcher interface {
	FetchOutput(ctx context.Context, id, path string, w io.Writer) error
}

// Upload is one file for a StageOuter to send: the path the job wrote it at
// and a presigned HTTP PUT URL for its object. The URL grants writing that
// one object for a short time; it is still treated as a secret.
type Upload struct {
	Path string
	URL  string
}

// StageOuter is implemented by backends whose API cannot read files (Slurm)
// but that can run a small job of their own beside the user's: after the
// job ended, StageOut starts one that uploads the files, and the job's own
// output when logURL is set, with plain HTTP PUTs. No S3 credential reaches
// the remote system. The returned id is followed with Status; DONE means
// every file that existed was uploaded (a missing file is not an error).
type StageOuter interface {
	StageOut(ctx context.Context, id string, uploads []Upload, logURL string) (string, error)
}

// Config is what a backend is constructed with.
type Config struct {
	// URL is resourceURL, the base URL of the remote API.
	URL string
	// Credentials reads the mounted credentials (re-read on each call, so a
	// rotated Secret is picked up).
	Credentials Credentials
	// HTTPClient is configured for TLS (CA bundle, verification) by the runner.
	HTTPClient *http.Client
	// DataDir is a local directory the backend may keep records in.
	DataDir string
	Logger  *slog.Logger
	// Secrets takes secret values the backend obtains itself (session and
	// bearer tokens), so they are scrubbed like the mounted ones. May be nil.
	Secrets Secrets
	// Commands counts the commands and transfers a backend reached over
	// SSH sends (the HTTP client counts the others' requests). May be nil.
	Commands *CommandCounts
}

// Secrets registers secret values for scrubbing.
type Secrets interface {
	Add(value string)
}

// AddSecret registers v with s; a nil s is fine.
func AddSecret(s Secrets, v string) {
	if s != nil {
		s.Add(v)
	}
}

// Credentials gives access to named secret values. Get returns the first of
// names that is present, trimmed of surrounding white space.
type Credentials interface {
	Get(names ...string) (string, error)
}
