package runner

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/cluster"
	"github.com/bridge-runner/bridge-runner/record"
)

// ErrTerminated is the cause of the invoke context's cancellation when the
// process was asked to stop (SIGTERM: Argo stop or terminate, KFP terminate,
// activeDeadlineSeconds). The remote job is then cancelled within Grace.
var ErrTerminated = errors.New("terminated by signal")

// Defaults of the Invoker's durations: a zero (or negative) setting means
// the default, and the command's flags show the same values.
const (
	DefaultGrace       = 25 * time.Second
	DefaultSubmitLease = 30 * time.Second
	DefaultRetryBudget = 10 * time.Minute
	DefaultCancelWait  = 30 * time.Second
	DefaultMinPoll     = 200 * time.Millisecond
)

// Invoker runs the invoke step: submit the job (or re-attach to it), follow
// it to a final state, and report. It is fixed configuration: Run never
// changes it, and each Run keeps its own state in a run.
type Invoker struct {
	JobName  string
	Store    record.Store
	Registry *backends.Registry
	// Backend is the configuration every backend gets; URL is filled from
	// the job description.
	Backend backends.Config
	Secrets *Secrets
	Log     *slog.Logger
	// Spec, when set, is the job description given on the command line: the
	// record is created from it, or must already hold the same description.
	Spec *record.Spec
	// Holder names this invoker in the submit intent (host/pid/random).
	Holder string
	// Grace bounds how long invoke takes after SIGTERM: cancelling the job,
	// recording the outcome and writing the outputs (see run.stopping).
	Grace time.Duration
	// SubmitLease is how long a submit intent keeps other invokers waiting
	// (they adopt the job once it is recorded or found by key).
	SubmitLease time.Duration
	// RetryBudget is how long transient faults of the backend or the
	// Kubernetes API are ridden out before giving up with exit 75.
	RetryBudget time.Duration
	// CancelWait bounds the wait for the backend to confirm a cancellation.
	CancelWait time.Duration
	// LogOut receives the job's output for backends that can read it.
	LogOut io.Writer
	// LogInterval is how often a running job's output is read (see logs.go).
	LogInterval time.Duration
	// LogDir, when set, is where a shared file system shows the job's output
	// in this pod: POD_DIR or REMOTE_DIR:POD_DIR (see ParseLogDir).
	LogDir string
	// LogTask, for an array, is the index of the task whose output is the
	// step's live log; nil: the lowest index (see liveTask).
	LogTask *int
	// MinPoll is the first poll delay after a state change.
	MinPoll time.Duration
	// Watch shapes the cluster's watcher (watchgroup.go); the zero value
	// turns it on for records kept in ConfigMaps.
	Watch WatchConfig
	// Clusters, when the process runs many steps (invokes in goroutines),
	// is what they learnt of their clusters, shared: a cluster's array
	// limit is asked once for all of them. Nil: each step asks for itself.
	Clusters *cluster.Book
	// S3 is how to reach S3, for jobs that use it.
	S3 S3Access
	// Detach, when set, is asked after SIGTERM whether only this pod is going
	// away while its step goes on and will run invoke again (see
	// Disruption). When it says so, the job is left running and Run returns
	// a transient error (exit 75): the retry's new pod re-attaches. Otherwise,
	// and when it is not set, SIGTERM cancels the job.
	Detach func(ctx context.Context) (bool, string)
	// BackendChoice is the backend given on the command line or in the
	// environment; the record's own backend key wins (see SelectBackend).
	BackendChoice string
	// StatusKeys is auto, ibm or ours: whether IBM's status keys and words
	// are written too (see ibmcompat.go).
	StatusKeys string
	// Owner names the task this invoke runs for (StepOwner); the record is
	// refused if another task used it. Empty: no check.
	Owner string
	// Deadline is when the pod will be stopped; invoke stops before it.
	Deadline time.Time
	// Resubmit says when invoke, run on a record whose job ended, submits
	// a new attempt (see attempts.go): ResubmitInfrastructure (also when
	// empty), ResubmitFailed or ResubmitNever.
	Resubmit string

	last *run // the latest Run's state, for Result
}

// Result returns what the latest Run found out.
func (iv *Invoker) Result() *Result {
	if iv.last == nil {
		return &Result{}
	}
	return &iv.last.result
}

// Run executes invoke. It returns nil when the job reached a final state
// (DONE, FAILED, KILLED, UNKNOWN: see Result().Status); an error wrapping
// backends.ErrInvalid when nothing could be submitted because of the input;
// a *SubmittedFault when such a fault came once the job was submitted;
// any other error when the state could not be followed to its end (a retry
// of invoke re-attaches).
func (iv *Invoker) Run(ctx context.Context) error {
	for {
		// A job that moved (replace.go) is submitted again at its new
		// target by a fresh run on the record; moves are bounded.
		if err := iv.runOnce(ctx); !errors.Is(err, errMoved) {
			return err
		}
	}
}

func (iv *Invoker) runOnce(ctx context.Context) error {
	r := &run{Invoker: iv.withDefaults(), placing: true}
	iv.last = r
	ctx, stop := r.stopBeforeDeadline(ctx)
	defer stop()
	err := r.execute(ctx)
	err = r.afterSubmit(err)
	if err != nil {
		r.result.Message = r.Secrets.Scrub(err.Error())
		if r.rec != nil && !r.foreign {
			// Leave a note in the record; best effort, the outputs say it too.
			wctx, cancel := r.stopping(ctx, 5*time.Second)
			_ = r.update(wctx, func(d map[string]string) (bool, error) {
				return r.noteFailure(d, err), nil
			})
			cancel()
		}
	}
	return err
}

// noteFailure leaves the reason of a failed run in the record d. A job
// refused before it was submitted (input, credentials, or the backend
// refusing the submit) also gives up its submit intent, which would make
// the next invoke wait out the lease for a submit that never happened, and
// in IBM mode is FAILED: IBM's controller reads status.jobStatus before
// status.message and shows nothing of a record without it.
func (r *run) noteFailure(d map[string]string, err error) bool {
	c := record.Set(d, record.KeyMessage, r.result.Message)
	var sf *SubmittedFault
	invalid := errors.Is(err, backends.ErrInvalid) && !errors.As(err, &sf)
	var ns *notSubmitted
	if !invalid && !errors.As(err, &ns) || d[record.KeyID] != "" {
		return c
	}
	if cur, ok := parseIntent(d[record.KeyIntent]); ok && cur.holder == r.Holder {
		c = record.Set(d, record.KeyIntent, "") || c
		if !invalid && voidPlacement(d) {
			r.Log.Warn("the placed target could not be reached and nothing was submitted: a retry places the job anew")
			c = true
		}
	}
	if invalid && record.IBMMode(r.Store) && d[record.KeyJobStatus] == "" {
		c = record.Set(d, record.KeyJobStatus, string(backends.Failed)) || c
		c = record.Set(d, record.KeyEnd, time.Now().UTC().Format(time.RFC3339)) || c
	}
	return c
}

// withDefaults returns a copy of iv with every unset setting at its default.
func (iv *Invoker) withDefaults() *Invoker {
	c := *iv
	c.last = nil
	c.Log = cmp.Or(c.Log, slog.New(slog.DiscardHandler))
	c.Secrets = cmp.Or(c.Secrets, &Secrets{})
	c.Store = record.WithStatusKeys(c.Store, c.StatusKeys, c.Log)
	c.Holder = cmp.Or(c.Holder, DefaultHolder())
	c.Grace = positiveOr(c.Grace, DefaultGrace)
	c.SubmitLease = positiveOr(c.SubmitLease, DefaultSubmitLease)
	c.RetryBudget = positiveOr(c.RetryBudget, DefaultRetryBudget)
	c.CancelWait = positiveOr(c.CancelWait, DefaultCancelWait)
	c.MinPoll = positiveOr(c.MinPoll, DefaultMinPoll)
	c.LogInterval = positiveOr(c.LogInterval, DefaultLogInterval)
	if c.LogOut == nil {
		c.LogOut = io.Discard
	}
	if c.Backend.Commands == nil { // this run's own counts (backendRequests)
		c.Backend.Commands = &backends.CommandCounts{}
	}
	return &c
}

func positiveOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// DefaultHolder names this process: host, pid and a random suffix.
func DefaultHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano()%1_000_000)
}

// IdempotencyKey derives the key stamped into the remote job from the record's UID.
func IdempotencyKey(uid string) string {
	sum := sha256.Sum256([]byte("bridge-runner/" + uid))
	return "br-" + hex.EncodeToString(sum[:10])
}

// execute loads the record, submits or adopts the job, follows it to its
// end, records that, and uploads the outputs.
func (r *run) execute(ctx context.Context) error {
	defer r.stopEarlyView() // unless followAgent took it
	desc, be, err := r.setUp(ctx)
	if err != nil {
		return err
	}
	defer closeBackend(be, r.Log)
	if r.early == nil {
		r.startEarlyView(desc) // a record read, not created: its view carries it too (watchRecord)
	}
	r.result.Job, r.result.Target = r.JobName, r.targetOf(desc)
	// The job of the record's current attempt, with that attempt's key.
	jobOf := func() (backends.Job, func() (backends.Job, error)) {
		base := backends.Job{Name: r.JobName, Key: jobKey(r.rec.UID, r.rec.Data), Properties: desc.Properties}
		return base, r.preparer(ctx, desc, be, base)
	}
	base, prepare := jobOf()
	if in := r.rec.Data[record.KeyIntent]; r.rec.Data[record.KeyID] == "" && (in == "" || in == r.ownIntent) && !killRequested(r.rec.Data) {
		// A fresh run: refuse bad input before anything is recorded.
		if _, err := prepare(); err != nil {
			return err
		}
	}
	if err := r.claim(ctx); err != nil {
		return err
	}
	// The record's full name is said once, at start (the command's "the
	// job's record" line); each line names the job by its short name.
	log := r.Log.With("backend", desc.Backend)
	if err := r.newAttempt(ctx, r.Resubmit, log); err != nil {
		return err
	}
	if n := attemptOf(r.rec.Data); n > 1 {
		base, prepare = jobOf()
		r.logSrc = r.logSource(desc, unwrapArray(be)) // the attempt's own live log
	}
	r.result.Attempt = strconv.Itoa(attemptOf(r.rec.Data))

	// Watch the record from here on: a kill may come at any time.
	watch, stopWatch := r.watchRecord(context.WithoutCancel(ctx))
	defer stopWatch()
	r.followAgent(ctx, desc, be)
	defer func() { r.takeAgentView().Stop() }() // unless the watch member took it

	id, err := r.submitOrAdopt(ctx, be, base.Key, prepare, watch, log)
	if err != nil {
		return err
	}
	if id == "" { // killed before anything was submitted
		r.result.Status, r.result.Message = string(backends.Killed), "kill requested before the job was submitted; nothing was submitted"
		return r.final(ctx, backends.Status{State: backends.Killed, Message: r.result.Message})
	}
	r.result.ID = id
	log = log.With("job_id", id)
	r.w = r.newWatchMember(desc, be, id)
	st, err := r.follow(ctx, be, id, desc.UpdateInterval, watch, log)
	if err == nil {
		r.peekEfficiency(ctx, be, id, st)
		// The job's end is recorded before a watcher this invoke runs hands
		// its lease on: the handover waits for the others' news to be written.
		err = r.final(ctx, st)
	}
	data := r.rec.Data
	r.withinGrace(ctx, "handing on the cluster's watcher", func() { r.w.Close(ctx, data) })
	if err == nil && st.State.Final() {
		// After the handover: the accounting may take seconds to know the
		// job's end, and a lease handed meanwhile to a member that ended
		// in those seconds would outlive the group.
		r.recordEfficiency(ctx, be, id, st, log)
	}
	if err != nil {
		return err
	}
	if desc.UploadBucket == "" {
		return nil
	}
	return r.upload(ctx, desc, be, id, base.Key, log)
}

// setUp reads (or creates) the record and builds the backend and, when the
// job uses S3, the S3 client.
func (r *run) setUp(ctx context.Context) (*record.Description, backends.Backend, error) {
	if err := r.loadRecord(ctx); err != nil {
		return nil, nil, err
	}
	desc, err := r.description(ctx)
	if err != nil {
		return nil, nil, err
	}
	be, err := r.newBackend(desc)
	if err != nil {
		return nil, nil, err
	}
	r.arr, _ = be.(*arrayBackend)
	if desc.UsesS3() {
		r.s3, err = NewS3Store(S3Config{Endpoint: desc.S3.Endpoint, Secure: desc.S3.Secure, Region: desc.S3.Region,
			Credentials: DirCredentials{Dir: r.S3.CredentialsDir, Secrets: r.Secrets}, CAFile: r.S3.CAFile, Insecure: r.S3.Insecure})
		if err != nil {
			closeBackend(be, r.Log)
			return nil, nil, err
		}
	}
	r.logSrc = r.logSource(desc, unwrapArray(be))
	if err := r.checkLogTask(desc); err != nil {
		closeBackend(be, r.Log)
		return nil, nil, err
	}
	return desc, be, nil
}

// closeBackend releases what a backend holds (the SSH backends' connection)
// once the run or cleanup is done with it.
func closeBackend(be backends.Backend, log *slog.Logger) {
	if c, ok := be.(io.Closer); ok {
		if err := c.Close(); err != nil {
			log.Debug("closing the backend", "err", err)
		}
	}
}

// upload uploads the outputs after the job's end and records where they went.
func (r *run) upload(ctx context.Context, desc *record.Description, be backends.Backend, id, key string, log *slog.Logger) error {
	// Uploads run after SIGTERM too, within the grace period.
	uctx, cancel := r.stopping(ctx, r.RetryBudget)
	defer cancel()
	locs, notes, uerr := r.uploadOutputs(uctx, desc, be, id, key)
	r.result.Outputs = locs
	msg := r.result.Message
	if len(notes) > 0 {
		msg += "; " + strings.Join(notes, "; ")
	}
	if uerr != nil {
		msg += "; " + uerr.Error()
	}
	r.result.Message = truncate(r.Secrets.Scrub(msg), 4096)
	wctx, wcancel := r.stopping(ctx, 0)
	defer wcancel()
	werr := retryTransient(wctx, r.RetryBudget, func(wctx context.Context) error {
		return r.update(wctx, func(d map[string]string) (bool, error) {
			c := record.Set(d, record.KeyOutputs, strings.Join(locs, "\n"))
			return record.Set(d, record.KeyMessage, r.result.Message) || c, nil
		})
	})
	if uerr != nil {
		return uerr
	}
	if werr != nil && !errors.Is(werr, record.ErrNoRecord) {
		return backends.Transient(fmt.Errorf("recording the output locations: %w", werr))
	}
	log.Info("outputs uploaded", "locations", len(locs))
	return nil
}

// loadRecord reads the state record, or creates it from r.Spec when given.
func (r *run) loadRecord(ctx context.Context) error {
	if r.Spec != nil {
		return r.createRecord(ctx)
	}
	var rec *record.Record
	err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) (err error) {
		rec, err = r.Store.Get(ctx)
		return err
	})
	switch {
	case errors.Is(err, record.ErrNoRecord):
		return backends.Invalid("configmap", "%s does not exist; run create-configmap first, or give the job's flags to invoke; if the ConfigMap has another name (IBM's samples: <job>-slurm-cm, <job>-lsf-cm, ...), name it with --configmap or BRIDGE_CONFIGMAP", r.Store.Describe())
	case err != nil:
		return fmt.Errorf("reading %s: %w", r.Store.Describe(), err)
	}
	r.observe(rec)
	return nil
}

// createRecord creates the record from r.Spec with this invoke's submit
// intent already in it, or accepts an existing record with the same job
// description (whose intent, if it has none, is then taken by claimIntent's
// fenced update, as for a record create-configmap or the operator wrote).
// It creates before it reads: a step given the job's flags usually finds
// no record, and the read that would say so costs a request.
//
// Why this stays exactly-once: a create is fenced by the record's name.
// Of any number of invokers only one create succeeds; every other one
// gets ErrRecordExists and reads a record that holds the winner's intent
// from its first version on, just as if it had lost claimIntent's
// compare-and-swap. And nothing can have been submitted under a record's
// UID before the record existed, so the creator submits without looking
// for an earlier job by its key (submitOwnIntent).
func (r *run) createRecord(ctx context.Context) error {
	desc, perr := r.Spec.Parse()
	if perr != nil {
		return perr
	}
	r.startEarlyView(desc) // in parallel with the create
	crashPoint("before-intent")
	data := r.Spec.WithDefaults().Data()
	in := intent{holder: r.Holder, at: time.Now()}
	data[record.KeyIntent] = in.String()
	rec, created, err := ensureRecord(ctx, r.Store, *r.Spec, data, r.RetryBudget)
	if err != nil {
		return err
	}
	if created {
		r.ownIntent, r.ownIntentAt = in.String(), time.Now()
	}
	r.observe(rec)
	return nil
}

// EnsureRecord creates the record from spec, or accepts an existing record
// with the same job description; a different one is an ErrInvalid naming the
// keys that differ.
func EnsureRecord(ctx context.Context, store record.Store, spec record.Spec, budget time.Duration) (*record.Record, error) {
	rec, _, err := ensureRecord(ctx, store, spec, spec.WithDefaults().Data(), budget)
	return rec, err
}

// ensureRecord is EnsureRecord creating the record with data (spec's own,
// and what invoke adds to it); created says whether this call created it.
func ensureRecord(ctx context.Context, store record.Store, spec record.Spec, data map[string]string, budget time.Duration) (*record.Record, bool, error) {
	var rec *record.Record
	created := false
	err := retryTransient(ctx, budget, func(ctx context.Context) (err error) {
		rec, err = store.Create(ctx, data)
		created = err == nil
		if errors.Is(err, record.ErrRecordExists) {
			rec, err = store.Get(ctx)
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("creating %s: %w", store.Describe(), err)
	}
	if diff := record.Diff(record.SpecFromData(rec.Data), spec); len(diff) > 0 {
		return nil, false, backends.Invalid(diff[0], "%s already exists with a different %s; delete it (bridge-runner cleanup) or use another job name: one per run and per loop item (e.g. {{workflow.name}}-{{item}})",
			store.Describe(), strings.Join(diff, ", "))
	}
	return rec, created, nil
}

func killRequested(d map[string]string) bool {
	return strings.EqualFold(strings.TrimSpace(d[record.KeyKill]), "true")
}

// intent is a record's submit intent: who is submitting and since when.
type intent struct {
	holder string
	at     time.Time
}

func parseIntent(v string) (intent, bool) {
	h, at, ok := strings.Cut(v, "@")
	if !ok {
		return intent{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	// Year 0000 with a positive offset is year -1 in UTC, which RFC 3339
	// cannot write back: such an intent is as unreadable as a malformed one.
	if err != nil || t.UTC().Year() < 1 || t.UTC().Year() > 9999 {
		return intent{}, false
	}
	return intent{holder: h, at: t}, true
}

func (i intent) String() string { return i.holder + "@" + i.at.UTC().Format(time.RFC3339Nano) }

// holderGone reports whether the intent's holder is a process on this host
// that no longer exists, so its intent need not be waited out.
func holderGone(holder string) bool {
	parts := strings.Split(holder, "/")
	host, _ := os.Hostname()
	if len(parts) != 3 || parts[0] != host {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid == os.Getpid() {
		return false
	}
	_, err = os.Stat("/proc/" + parts[1])
	return errors.Is(err, os.ErrNotExist)
}

// submitOrAdopt returns the job's id: the recorded one, the one found by the
// idempotency key, or a new submission. Exactly one invoker submits: it first
// records its intent with a compare-and-swap on the record's version; others
// wait for the id to appear (or find the job by key). A crash between submit
// and recording the id is healed by finding the job by its key. It returns
// "" when a kill was requested before anything was submitted.
func (r *run) submitOrAdopt(ctx context.Context, be backends.Backend, key string, prepare func() (backends.Job, error),
	watch <-chan *record.Record, log *slog.Logger) (string, error) {
	finder, _ := be.(backends.Finder)
	if finder == nil {
		log.Warn("this backend cannot find jobs by key: a crash between submit and recording the id could submit twice")
	}
	findAny, find := r.findersByKey(finder, key)
	for {
		if id := r.rec.Data[record.KeyID]; id != "" {
			if err := r.checkID(ctx, be, id); err != nil {
				return "", err
			}
			log.Info("re-attaching to the recorded job", "job_id", id)
			return id, nil
		}
		if killRequested(r.rec.Data) {
			return r.killedBeforeID(ctx, findAny, key, log)
		}
		own := r.takeOwnIntent()
		cur, hasIntent := parseIntent(r.rec.Data[record.KeyIntent])
		if hasIntent && cur.holder != r.Holder {
			// Someone submitted or is submitting. Whatever state it is in,
			// a job carrying our key is the job.
			id, waited, err := r.othersIntent(ctx, cur, find, watch, log)
			switch {
			case err != nil:
				return "", err
			case id != "":
				log.Info("adopting the job found by its idempotency key", "job_id", id, "key", key)
				return id, r.recordID(ctx, id, nil)
			case waited:
				continue
			}
		}
		if !hasIntent || cur.holder != r.Holder || own {
			if ok, err := r.discoverAndClaim(ctx, be, key, own); err != nil || !ok {
				if err != nil {
					return "", err
				}
				continue // changed under us: look again
			}
		}
		return r.submitClaimed(ctx, be, key, hasIntent && !own, prepare, find, log)
	}
}

// findersByKey look for the job by its key: any job (findAny), and the
// job to adopt (find). Only a whole array is adopted: the chunks an
// invoker that died left unsubmitted are submitted by submitChunks.
func (r *run) findersByKey(finder backends.Finder, key string) (findAny, find func(context.Context) (string, error)) {
	findAny = func(ctx context.Context) (string, error) { return r.findByKey(ctx, finder, key) }
	find = func(ctx context.Context) (string, error) {
		id, err := findAny(ctx)
		if err == nil && r.arr != nil && !r.arr.complete(ctx, id) {
			id = ""
		}
		return id, err
	}
	return findAny, find
}

// takeOwnIntent reports whether the record still holds the intent this
// invoke created it with (createRecord). Used once: after a lost stamp or
// a change, the record is looked at again as any record.
func (r *run) takeOwnIntent() bool {
	own := r.ownIntent != "" && r.rec.Data[record.KeyIntent] == r.ownIntent
	r.ownIntent = ""
	return own
}

// discoverAndClaim readies the submit: discovery first, then the intent
// claimed by its fenced update (false: the record changed under us).
// The intent the record was created with (own) needs no claim, unless the
// set-up since the create took more than a fifth of SubmitLease: a waiter
// counts the lease from when it first saw the intent and the submit takes
// up to four fifths of it (submit), so the intent is then stamped again,
// by the same fenced update, for the lease to cover the whole submit.
func (r *run) discoverAndClaim(ctx context.Context, be backends.Backend, key string, own bool) (bool, error) {
	if err := r.discover(ctx, be); err != nil {
		return false, err
	}
	if own && time.Since(r.ownIntentAt) <= r.SubmitLease/5 {
		return true, nil
	}
	return r.claimIntent(ctx, key)
}

// discover asks the backend what it must know before a submit (see
// backends.Preparer), within the retry budget and before the submit
// intent is claimed, so that the submit's window holds the submit alone.
// Only a transient fault that outlasts the budget (or our own end) stops
// the step here, with nothing claimed nor submitted; an answer that
// refuses is left for the submit, which meets it again and says it in its
// words (a bad token names the credentials).
func (r *run) discover(ctx context.Context, be backends.Backend) error {
	p, ok := unwrapArray(be).(backends.Preparer)
	if !ok {
		return nil
	}
	start := time.Now()
	err := retryTransient(ctx, r.RetryBudget, p.Prepare)
	switch {
	case err == nil || ctx.Err() != nil && !budgetSpent(ctx):
		return err
	case errors.Is(err, backends.ErrTransient):
		return fmt.Errorf("before submitting: the backend could not be reached within %s (the last failure: %w)",
			time.Since(start).Round(time.Second), unanswered(err))
	}
	return nil
}

// killedBeforeID handles kill=true in a record without an id. Without a
// submit intent nothing was submitted (""). With one, an invoker may have
// submitted and died before recording the id (cleanup sets kill=true on such
// a record when it cannot reach the backend): the job found by key is
// adopted, so that follow cancels it, instead of being reported KILLED
// while it runs. A failed lookup is an error (a retry looks again).
func (r *run) killedBeforeID(ctx context.Context, find func(context.Context) (string, error), key string, log *slog.Logger) (string, error) {
	if r.rec.Data[record.KeyIntent] == "" {
		return "", nil
	}
	id, err := find(ctx)
	if err != nil {
		return "", fmt.Errorf("kill requested, and a submit intent is recorded, but looking for its job by key failed: %w", err)
	}
	if id == "" {
		return "", nil
	}
	log.Info("kill requested: adopting the job found by its idempotency key to cancel it", "job_id", id, "key", key)
	return id, r.recordID(ctx, id, nil)
}

// findByKey looks for the job by its idempotency key, within the retry
// budget; "" when there is none or the backend cannot look.
func (r *run) findByKey(ctx context.Context, finder backends.Finder, key string) (string, error) {
	if finder == nil {
		return "", nil
	}
	var id string
	err := retryTransient(ctx, r.RetryBudget, func(ctx context.Context) (err error) {
		id, err = finder.FindByKey(ctx, key)
		return err
	})
	return id, err
}

// othersIntent deals with another invoker's submit intent: it returns the
// job when one with our key exists, or waits a little (waited) while the
// holder's lease lasts. Neither means the intent is stale: take it over.
func (r *run) othersIntent(ctx context.Context, cur intent, find func(context.Context) (string, error),
	watch <-chan *record.Record, log *slog.Logger) (id string, waited bool, err error) {
	id, err = find(ctx)
	if err != nil || id != "" {
		if err != nil {
			err = fmt.Errorf("looking for an earlier submission: %w", err)
		}
		return id, false, err
	}
	if left := r.leaseLeft(cur); left > 0 && !holderGone(cur.holder) {
		log.Info("another invoker is submitting; waiting for it", "holder", cur.holder)
		return "", true, r.waitChange(ctx, watch, min(left, time.Second))
	}
	log.Info("taking over a stale submit intent", "holder", cur.holder, "since", cur.at)
	return "", false, nil
}

// leaseLeft is how much longer the intent cur keeps us waiting: SubmitLease
// from the moment this process first saw it, on this process's monotonic
// clock. The intent's own time comes from another machine's clock (or a
// hand edit): compared with ours, one running ahead would make us wait
// forever, one running behind would take over a live holder's submit.
func (r *run) leaseLeft(cur intent) time.Duration {
	if v := cur.String(); v != r.intentSeen {
		r.intentSeen, r.intentSeenAt = v, time.Now()
	}
	return r.SubmitLease - time.Since(r.intentSeenAt)
}

// claimIntent records this invoker's submit intent, unless the record
// changed since it was read (then ok is false: look again).
func (r *run) claimIntent(ctx context.Context, key string) (ok bool, err error) {
	crashPoint("before-intent")
	seen := r.rec.Data[record.KeyIntent]
	err = r.update(ctx, func(d map[string]string) (bool, error) {
		if d[record.KeyID] != "" || d[record.KeyIntent] != seen || killRequested(d) {
			return false, nil // changed under us: look again
		}
		d[record.KeyIntent] = intent{holder: r.Holder, at: time.Now()}.String()
		d[record.KeyKey] = key
		return true, nil
	})
	if err != nil {
		return false, fmt.Errorf("recording the submit intent in %s: %w", r.Store.Describe(), err)
	}
	cur, _ := parseIntent(r.rec.Data[record.KeyIntent])
	return cur.holder == r.Holder, nil
}

// submitClaimed submits the job once this invoker holds the intent, and
// records its id. A job with our key may still exist if we took over from a
// crashed holder that got as far as submitting (tookOver).
func (r *run) submitClaimed(ctx context.Context, be backends.Backend, key string, tookOver bool,
	prepare func() (backends.Job, error), find func(context.Context) (string, error), log *slog.Logger) (string, error) {
	if tookOver {
		if id, err := find(ctx); err != nil {
			return "", err
		} else if id != "" {
			log.Info("adopting the job found by its idempotency key", "job_id", id, "key", key)
			return id, r.recordID(ctx, id, nil)
		}
	}
	crashPoint("after-intent")
	job, err := prepare()
	if err != nil {
		return "", err
	}
	id, err := r.submitJob(ctx, be, job, find, log)
	if err != nil {
		return "", err
	}
	r.submittedAt = time.Now()
	crashPoint("after-submit")
	if err := r.recordID(ctx, id, r.pendingWithID(id)); err != nil {
		return "", err
	}
	crashPoint("after-id")
	return id, nil
}

// submit submits the job, retrying transient faults within the submit lease
// and the retry budget, whichever is shorter, lookups included; before each
// retry it looks for the job by key, because a request that timed out may
// still have been accepted, and so it does before giving up (a fifth of
// the time is kept for that last look).
func (r *run) submit(ctx context.Context, be backends.Backend, job backends.Job, find func(context.Context) (string, error), log *slog.Logger) (string, error) {
	total := min(r.SubmitLease-r.SubmitLease/5, r.RetryBudget)
	lastLook := total / 5
	sctx, cancel := context.WithTimeout(ctx, total-lastLook)
	defer cancel()
	sent := newSendTracker(r.Backend.HTTPClient)
	giveUp := func(err error) (string, error) {
		id, gerr := r.lookBeforeGivingUp(ctx, job.Key, find, lastLook, err, log)
		if gerr != nil && !sent.reached() {
			gerr = &notSubmitted{gerr}
		}
		return id, gerr
	}
	b := record.Backoff{Initial: 200 * time.Millisecond, Max: 5 * time.Second}
	start := time.Now()
	var cause error // the last failure that says more than "deadline exceeded"
	for attempt := 1; ; attempt++ {
		id, err := be.Submit(sctx, job)
		cause = telling(cause, err)
		sent.saw(err)
		switch {
		case err == nil:
			log.Info("submitted", "job_id", id, "key", job.Key, "took", time.Since(start).Round(time.Millisecond))
			return id, nil
		case errors.Is(err, backends.ErrExists):
			if id, ferr := find(ctx); ferr == nil && id != "" {
				return id, nil
			}
			return "", fmt.Errorf("the backend has a job with key %s but cannot find it: %w", job.Key, err)
		case errors.Is(err, backends.ErrInvalid):
			return "", err
		case errors.Is(err, backends.ErrAuth):
			return "", &backends.FieldError{Field: "credentials", Msg: err.Error() + "; check the Secret mounted as the credentials directory"}
		case sctx.Err() != nil && ctx.Err() == nil:
			// Nothing refused the job: the backend did not answer in time.
			return giveUp(backends.Transient(fmt.Errorf("submit: the backend could not be reached within %s (%d attempts; the last failure: %w)",
				time.Since(start).Round(time.Second), attempt, unanswered(cause))))
		case !errors.Is(err, backends.ErrTransient) && !record.Unreachable(err) && ctx.Err() == nil:
			// Only an answer refuses a job: a request that got none (its
			// own timeout, a refused connection) is retried above.
			return "", fmt.Errorf("submit refused: %w", err)
		}
		deadline, _ := sctx.Deadline()
		d, werr := retryDelay(&b, err, deadline)
		if werr != nil {
			return "", fmt.Errorf("submit: %w", werr)
		}
		if ctx.Err() != nil || !record.SleepCtx(sctx, d) {
			return giveUp(backends.Transient(fmt.Errorf("submit: the backend could not be reached (%d attempts): %w", attempt, err)))
		}
		log.Warn("submit failed; retrying", "attempt", attempt, "err", err)
		if id, ferr := find(sctx); ferr == nil && id != "" {
			return id, nil
		}
	}
}

// lookBeforeGivingUp looks for the job by its key once more, within d
// (after SIGTERM, within the grace period), before the submit gives up
// with giveUp: a request whose answer was lost may have been accepted, and
// no job may run that no record follows. A job found is the submit's; when
// none is found, or the lookup fails too, the submit intent stays in the
// record and the next invoke or cleanup looks again.
func (r *run) lookBeforeGivingUp(ctx context.Context, key string, find func(context.Context) (string, error), d time.Duration,
	giveUp error, log *slog.Logger) (string, error) {
	lctx, cancel := r.stopping(ctx, d)
	defer cancel()
	if id, err := find(lctx); err == nil && id != "" {
		log.Info("the submit got no answer, but the job is found by its idempotency key", "job_id", id, "key", key)
		return id, nil
	}
	return "", giveUp
}

// notSubmitted is a submit that gave up without any of its requests
// reaching the backend: nothing can have been submitted, so the record's
// intent is let go of (noteFailure), and cleanup deletes the record at once
// instead of looking for a job on a URL that never answered.
type notSubmitted struct{ error }

func (e *notSubmitted) Unwrap() error { return e.error }

// sendTracker tells whether a submit's attempts may have got a request to
// the backend: while none did, nothing was submitted, provably, and giving
// up lets go of the intent (notSubmitted). Over HTTP that is exact: no
// request of the process got a connection; otherwise (SSH), every attempt
// failed to connect.
type sendTracker struct {
	hc            *http.Client
	reqs0, conns0 int64
	otherThanDial bool
}

func newSendTracker(hc *http.Client) *sendTracker {
	return &sendTracker{hc: hc, reqs0: RequestCount(hc), conns0: connectedCount(hc)}
}

// saw notes an attempt's failure.
func (s *sendTracker) saw(err error) {
	s.otherThanDial = s.otherThanDial || err != nil && !neverConnected(err)
}

func (s *sendTracker) reached() bool {
	if RequestCount(s.hc) > s.reqs0 {
		return connectedCount(s.hc) > s.conns0
	}
	return s.otherThanDial
}

// neverConnected reports whether err is a failure to open a connection
// (refused, unreachable, no route, a connect timeout): no byte of the
// request was sent. Anything else may have reached the backend.
func neverConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// telling keeps the failure that says most: err, unless it is only
// "deadline exceeded" and an earlier one said more.
func telling(earlier, err error) error {
	if earlier == nil || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	return earlier
}

// unanswered says "no answer" for a request that timed out, where Go
// says "context deadline exceeded", which reads as our own fault.
func unanswered(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer in time (%w)", err)
	}
	return err
}

// recordID writes the job id into the record right away, clearing the
// intent, and with it the status keys of status (nil: none).
func (r *run) recordID(ctx context.Context, id string, status map[string]string) error {
	r.result.ID = id // the job is on the cluster from here on, recorded or not (see afterSubmit)
	// The id must land even during SIGTERM, within the grace period.
	wctx, cancel := r.stopping(ctx, 0)
	defer cancel()
	err := retryTransient(wctx, r.RetryBudget, func(wctx context.Context) error {
		return r.update(wctx, func(d map[string]string) (bool, error) {
			if d[record.KeyID] != "" && d[record.KeyID] != id {
				return false, fmt.Errorf("%s records job %s, but this invoker has job %s", r.Store.Describe(), d[record.KeyID], id)
			}
			c := record.Set(d, record.KeyID, id)
			c = record.Set(d, record.KeyIDFingerprint, idFingerprint(r.rec.UID, id)) || c
			if d[record.KeyKey] == "" { // an intent made with the record's create has no key: its UID came with the answer
				c = record.Set(d, record.KeyKey, jobKey(r.rec.UID, d)) || c
			}
			c = record.Set(d, record.KeyIntent, "") || c
			for k, v := range status {
				c = record.Set(d, k, v) || c
			}
			return c, nil
		})
	})
	if err != nil {
		return fmt.Errorf("recording job id %s in %s (a retry will find it by key): %w", id, r.Store.Describe(), err)
	}
	if status != nil {
		r.written, r.offsetWritten = status, time.Now()
	}
	return nil
}

// pendingWithID is the status a step assumes for the job it has just
// submitted while its cluster's agent serves it (PENDING, see follow), to
// be written with the job's id: one record write where the id and the
// PENDING state were two, as the first state of each job (nil when the
// agent does not serve it, and the step's first poll tells the state).
func (r *run) pendingWithID(id string) map[string]string {
	if !r.agentView.Serves() {
		return nil
	}
	r.result.ID = id // the status message names it
	d := r.statusData(assumedPending(r.submittedAt))
	d[record.KeyWatchGroup] = r.agentCluster.Group() // the watch member's (newWatchMember), made next
	return d
}

// waitChange waits for a record change or d, whichever is first.
func (r *run) waitChange(ctx context.Context, watch <-chan *record.Record, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case rec, ok := <-watch:
		if ok {
			r.observeWatched(rec)
		}
	case <-t.C:
		fresh, err := r.Store.Get(ctx)
		if err == nil {
			r.observe(fresh)
		}
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}
