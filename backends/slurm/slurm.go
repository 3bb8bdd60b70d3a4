// Package slurm runs jobs on a Slurm cluster through slurmrestd's REST API,
// versions v0.0.38 (Slurm 22.05) to v0.0.46 (Slurm master, to be 26.11).
//
// resourceURL is slurmrestd's base URL (http://host:6820). The API version is
// found at run time with one GET /openapi/v3, taking the newest version both
// sides know (version.go), and kept in the job's record for later invokes; a URL that ends in
// /slurm/v0.0.NN/ pins that version instead (an older version in the URL, as
// in the Bridge Operator's samples, is ignored with a warning). Whatever the
// version, responses are decoded by their shape: job_state as a string or an
// array, exit_code as a wait status or an object, times as numbers or
// {set,infinite,number}, meta.Slurm or meta.slurm.
//
// Credentials: the Secret's username (or user) and token (or jwt, or
// password), a JWT from `scontrol token username=U lifespan=S`, sent as
// X-SLURM-USER-NAME and X-SLURM-USER-TOKEN and re-read on every request. The
// user name may be left out when the token names its user. A token past its
// exp claim is refused before submitting, and one that will expire within the
// job's time limit is warned about (rotate the Secret; the new token is used
// at the next request). slurmctld, not slurmrestd, checks the token, so a
// refused token arrives as an HTTP 500 whose error (-1 or 5005) a stopped
// slurmctld can also cause; an extra request tells them apart (see
// authProbe) and a refused token is reported as backends.ErrAuth.
//
// The job is the native Slurm job object: jobproperties is passed through
// as slurmrestd's "job" (partition, nodes, tasks, cpus_per_task,
// memory_per_node, time_limit, account, qos, standard_output, ...; Slurm
// rejects unknown keys, which is reported as invalid jobproperties with
// Slurm's words). The keys of IBM's Bridge Operator samples are accepted as
// aliases: NodesNumber, Queue, Tasks, slurmJobName, currentWorkingDir,
// envPath, envLibPath, ErrorFileName, OutputFileName. Beyond jobproperties:
//
//   - comment is the idempotency key (FindByKey lists jobs and matches it,
//     or a name "<key>-..." that older versions gave), and name is the
//     user's: jobproperties', else the script's #SBATCH --job-name, else the
//     step's, so that squeue -n finds the job;
//   - current_working_directory defaults to /tmp (slurmrestd would run the job
//     in /); set it to a shared directory on a real cluster, since relative
//     output paths and the default slurm-<id>.out land there;
//   - environment gets PATH=/usr/local/bin:/usr/bin:/bin unless given (a job
//     submitted over REST inherits nothing, and Slurm requires an environment),
//     plus BRIDGE_JOB_NAME, BRIDGE_JOB_KEY and, when set, BRIDGE_JOB_PARAMETERS
//     and BRIDGE_SCRIPT_METADATA; it is sent as an object to v0.0.38 and as a
//     "K=V" array to later versions;
//   - time_limit may be minutes, a Slurm time string ("1:30:00", "2-00:00:00",
//     "INFINITE") or {set,infinite,number}, and is sent in the version's shape.
//
// The script's #SBATCH lines, which slurmrestd ignores, are read as sbatch
// reads them and put into the job beneath jobproperties (directives.go);
// a directive with no job field is refused, so the job submitted over REST
// is the one sbatch would submit.
//
// The script is sent byte for byte, JSON-encoded. It must start with #!
// (Slurm accepts a script without one and then fails the job), so such a
// script is refused before submitting. A script at a path on the cluster
// (scriptLocation=remote) is run by a small wrapper script.
//
// States: PENDING, RUNNING, SUSPENDED map to themselves, COMPLETED to DONE,
// CANCELLED to KILLED; FAILED, TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL,
// DEADLINE and OUT_OF_MEMORY to FAILED with the raw state (or, for FAILED,
// Slurm's state_reason) as the reason. Flags: COMPLETING and STAGE_OUT keep
// an ended job RUNNING (not final yet); REQUEUED and REQUEUE_FED are PENDING;
// a held job (REQUEUE_HOLD, SPECIAL_EXIT, RESV_DEL_HOLD, or PENDING with
// reason JobHeldUser or JobHeldAdmin) and STOPPED are SUSPENDED; REVOKED
// (a federation sibling runs the job) is UNKNOWN; the others ride on the base
// state. The exit code is decoded from the wait status (128+n for signal n).
// A job slurmctld no longer knows (MinJobAge after it ended) is
// backends.ErrNotFound, whichever way the version says so (22.05: HTTP 500
// with error 2017; later: 404), and the runner makes that UNKNOWN.
//
// Cancel is DELETE job/{id}, which ends the whole job as scancel does
// (SIGTERM, then SIGKILL after KillWait); cancelling a job that has ended is
// not an error. There is no endpoint for files, so outputs leave the cluster
// through a stage-out job (see StageOut).
package slurm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/backends/sshexec"
)

// Name is the backend's registry name.
const Name = "slurm"

// RequestTimeout bounds each request to slurmrestd.
const RequestTimeout = 30 * time.Second

// Backend talks to one slurmrestd.
type Backend struct {
	base           string     // scheme://host[:port][/prefix], no trailing slash
	pinned         apiVersion // from resourceURL, or 0 to discover
	ver            versionState
	client         *http.Client
	creds          backends.Credentials
	log            *slog.Logger
	requestTimeout time.Duration
	noJobStates    atomic.Int32 // an API version whose jobs/state/ is not served (batch.go)
	noAccounting   atomic.Bool  // slurmrestd serves no slurmdb/ (array.go)
}

// defaultClient serves backends built without a client. It is one client,
// not one per backend, so that they share what the process learnt of each
// cluster (clusterVersion) and the memo gains no entry per backend.
var defaultClient = sync.OnceValue(httpx.DefaultClient)

// New builds the backend from cfg; it sends nothing until first used.
func New(cfg backends.Config) (backends.Backend, error) {
	if sshexec.IsSSH(cfg.URL) {
		return newSSH(cfg) // sbatch on a login node (ssh.go)
	}
	base, pinned, old, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	b := &Backend{base: base, pinned: pinned, client: cfg.HTTPClient, creds: cfg.Credentials,
		log: cfg.Logger, requestTimeout: RequestTimeout}
	if b.client == nil {
		b.client = defaultClient()
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if old != 0 {
		b.log.Warn("resourceURL names a slurmrestd API older than this backend speaks; ignoring it and finding the newest one served",
			"in_url", old.String(), "oldest_supported", minVersion.String())
	}
	return b, nil
}

// Validate checks the job and the credentials without contacting Slurm.
func (b *Backend) Validate(job backends.Job) error {
	if _, err := buildJob(job); err != nil {
		return err
	}
	if _, _, err := b.credentials(); err != nil {
		return err
	}
	_, _, err := b.authHeaders()
	return err
}

// submitResponse: job_id is top level in every version; v0.0.39-v0.0.41
// also have it in result.
type submitResponse struct {
	JobID  flexInt `json:"job_id"`
	Result struct {
		JobID flexInt `json:"job_id"`
	} `json:"result"`
	UserMsg string `json:"job_submit_user_msg"`
}

// Prepare implements backends.Preparer: it finds the API version to
// speak (see version) unless it is known, which every later request then
// uses.
func (b *Backend) Prepare(ctx context.Context) error {
	_, err := b.version(ctx)
	return err
}

var _ backends.Preparer = (*Backend)(nil)

// Submit submits the job and returns its Slurm job id.
func (b *Backend) Submit(ctx context.Context, job backends.Job) (string, error) {
	spec, err := buildJob(job)
	if err != nil {
		return "", err
	}
	if job.LogShip != nil {
		if err := spec.shipLogs(*job.LogShip, wrapping{}); err != nil {
			return "", err
		}
	}
	return b.submitSpec(ctx, spec)
}

// submitSpec sends the built job (Submit, SubmitArray) and returns its id.
func (b *Backend) submitSpec(ctx context.Context, spec *jobSpec) (string, error) {
	for _, n := range spec.notes {
		b.log.Info(n)
	}
	for _, w := range spec.warnings {
		b.log.Warn("the script's #SBATCH lines: " + w)
	}
	if err := b.checkToken(spec); err != nil {
		return "", err
	}
	v, err := b.version(ctx)
	if err != nil {
		return "", err
	}
	if err := spec.forVersion(v); err != nil {
		return "", err
	}
	r, err := b.do(ctx, http.MethodPost, b.apiPath("job/submit"), spec.body(v))
	if err != nil {
		return "", err
	}
	if r.status != http.StatusOK {
		if _, isArray := spec.fields["array"]; isArray && r.hasError(errInvalidArray) {
			return "", backends.Invalid("array", "Slurm refused the array %s: %s; its indexes must be below the cluster's MaxArraySize (1001 unless slurm.conf sets it; `scontrol show config` shows it): give the cluster's limit in the array key (0-4999/500 splits it into arrays of 500 indexes), or ask the cluster's administrators", spec.fields["array"], r.errorText())
		}
		return "", b.classify(ctx, r, "jobproperties")
	}
	var sr submitResponse
	if err := json.Unmarshal(r.body, &sr); err != nil {
		return "", fmt.Errorf("%s %s: cannot read the answer: %w", r.method, r.path, err)
	}
	id := sr.JobID.String()
	if !validID(id) {
		id = sr.Result.JobID.String()
	}
	if !validID(id) {
		// Never report a job that may not exist: the runner would follow
		// job 0 forever (what IBM's implementation did).
		return "", fmt.Errorf("%s %s: HTTP 200 without a job id: %s", r.method, r.path, r.errorText())
	}
	if msg := strings.TrimSpace(sr.UserMsg); msg != "" {
		b.log.Info("Slurm's job_submit message", "job_id", id, "message", msg)
	}
	for _, w := range r.env.Warnings {
		b.log.Warn("slurmrestd warning on submit", "job_id", id, "warning", w.text())
	}
	return id, nil
}

// checkToken refuses a token past its expiry and warns about one that will
// expire before the job's time limit runs out.
func (b *Backend) checkToken(spec *jobSpec) error {
	user, token, err := b.credentials()
	if err != nil {
		return err
	}
	c, ok := parseJWT(token)
	if !ok || c.Exp == 0 {
		return nil
	}
	exp := time.Unix(c.Exp, 0)
	now := time.Now()
	if !exp.After(now) {
		return fmt.Errorf("%w: the Slurm token of user %q expired at %s; mint a new one (scontrol token username=%s lifespan=SECONDS) and update the Secret",
			backends.ErrAuth, user, exp.UTC().Format(time.RFC3339), user)
	}
	left := exp.Sub(now).Round(time.Second)
	switch tl := spec.timeLimit; {
	case tl != nil && !tl.infinite && tl.minutes > 0 && exp.Before(now.Add(time.Duration(tl.minutes)*time.Minute)):
		b.log.Warn("the Slurm token expires before the job's time limit: following the job will fail then unless the Secret gets a new token",
			"expires", exp.UTC().Format(time.RFC3339), "in", left.String(), "time_limit_minutes", tl.minutes)
	case tl == nil || tl.infinite:
		b.log.Debug("the Slurm token expires; a job running longer needs a new token in the Secret by then",
			"expires", exp.UTC().Format(time.RFC3339), "in", left.String())
	}
	return nil
}

// jobsResponse is GET job/{id} and GET jobs/.
type jobsResponse struct {
	Jobs []jobInfo `json:"jobs"`
}

// Status reads the job's record.
func (b *Backend) Status(ctx context.Context, id string) (backends.Status, error) {
	j, err := b.getJob(ctx, id)
	if err != nil {
		return backends.Status{}, err
	}
	return j.status(), nil
}

// liveJob reads the job's record from slurmctld with GET job/{id}.
func (b *Backend) liveJob(ctx context.Context, id string) (*jobInfo, error) {
	jobs, path, err := b.liveRecords(ctx, id)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		if jobs[i].id() == id {
			return &jobs[i], nil
		}
	}
	if len(jobs) > 0 { // an array or het job answers with its parts
		return &jobs[0], nil
	}
	return nil, fmt.Errorf("GET %s: no such job: %w", path, backends.ErrNotFound)
}

// liveRecords is GET job/{id}: the job's record, or every record of an
// array (each task's, and one for the tasks not started yet) or het job.
func (b *Backend) liveRecords(ctx context.Context, id string) ([]jobInfo, string, error) {
	if !validID(id) {
		return nil, "", fmt.Errorf("Slurm job id %q is not a number: %w", id, backends.ErrNotFound)
	}
	if _, err := b.version(ctx); err != nil {
		return nil, "", err
	}
	r, err := b.do(ctx, http.MethodGet, b.apiPath("job/"+id), nil)
	if err != nil {
		return nil, "", err
	}
	if r.status != http.StatusOK {
		return nil, r.path, b.classify(ctx, r, "")
	}
	var jr jobsResponse
	if err := json.Unmarshal(r.body, &jr); err != nil {
		return nil, r.path, fmt.Errorf("%s %s: cannot read the answer: %w", r.method, r.path, err)
	}
	return jr.Jobs, r.path, nil
}

// cancelResponse: v0.0.42+ report per-job results in status.
type cancelResponse struct {
	Status []struct {
		Error struct {
			String  string  `json:"string"`
			Code    flexInt `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	} `json:"status"`
}

// Cancel ends the job with DELETE job/{id}, as scancel does (a ?signal=
// would only signal it). A job that has already ended is fine.
func (b *Backend) Cancel(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("Slurm job id %q is not a number: %w", id, backends.ErrNotFound)
	}
	if _, err := b.version(ctx); err != nil {
		return err
	}
	r, err := b.do(ctx, http.MethodDelete, b.apiPath("job/"+id), nil)
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		if r.hasError(errAlreadyDone) {
			return nil
		}
		return b.classify(ctx, r, "")
	}
	var cr cancelResponse
	if json.Unmarshal(r.body, &cr) == nil {
		for _, s := range cr.Status {
			code := s.Error.Code.String()
			if code == "" || code == "0" || code == strconv.Itoa(errAlreadyDone) {
				continue
			}
			if code == strconv.Itoa(errInvalidJobID) {
				return fmt.Errorf("%s %s: %s: %w", r.method, r.path, s.Error.Message, backends.ErrNotFound)
			}
			return fmt.Errorf("%s %s: Slurm could not cancel the job: %s (error %s)", r.method, r.path, cmp.Or(s.Error.Message, s.Error.String), code)
		}
	}
	return nil
}

// FindByKey lists the jobs slurmctld knows and returns the one whose comment
// is key ("" if none). Jobs that ended more than MinJobAge ago are not listed.
func (b *Backend) FindByKey(ctx context.Context, key string) (string, error) {
	if key == "" {
		return "", nil
	}
	if _, err := b.version(ctx); err != nil {
		return "", err
	}
	r, err := b.do(ctx, http.MethodGet, b.apiPath("jobs/"), nil)
	if err != nil {
		return "", err
	}
	if r.status != http.StatusOK {
		return "", b.classify(ctx, r, "")
	}
	var jr jobsResponse
	if err := json.Unmarshal(r.body, &jr); err != nil {
		return "", fmt.Errorf("%s %s: cannot read the answer: %w", r.method, r.path, err)
	}
	var found []string
	for i := range jr.Jobs {
		if carriesKey(jr.Jobs[i].Comment, jr.Jobs[i].Name, key) {
			// An array's tasks carry its key too: they are the array.
			if id := jr.Jobs[i].baseID(); validID(id) && !slices.Contains(found, id) {
				found = append(found, id)
			}
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	// Should not happen (the runner submits once); take the first submitted.
	sort.Slice(found, func(i, j int) bool {
		return len(found[i]) < len(found[j]) || (len(found[i]) == len(found[j]) && found[i] < found[j])
	})
	b.log.Warn("several Slurm jobs carry this idempotency key; adopting the first", "key", key, "jobs", strings.Join(found, ","), "adopted", found[0])
	return found[0], nil
}

// validID: Slurm job ids are numbers; anything else must not reach a URL.
func validID(id string) bool {
	if id == "" || len(id) > 10 || strings.Trim(id, "0") == "" {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
