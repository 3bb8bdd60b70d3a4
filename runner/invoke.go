package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// ErrTerminated is the cause of the invoke context's cancellation when the
// process was asked to stop (SIGTERM: Argo stop or terminate, KFP terminate,
// activeDeadlineSeconds). The remote job is then cancelled within Grace.
var ErrTerminated = errors.New("terminated by signal")

// Invoker runs the invoke step: submit the job (or re-attach to it), follow
// it to a final state, and report.
type Invoker struct {
	JobName  string
	Store    Store
	Registry *backends.Registry
	// Backend is the configuration every backend gets; URL is filled from
	// the job description.
	Backend backends.Config
	Secrets *Secrets
	Log     *slog.Logger
	// Spec, when set, is the job description given on the command line: the
	// record is created from it, or must already hold the same description.
	Spec *Spec
	// Holder names this invoker in the submit intent (host/pid/random).
	Holder string
	// Grace bounds how long cancelling may take after SIGTERM.
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
	// MinPoll is the first poll delay after a state change.
	MinPoll time.Duration
	// S3 is how to reach S3, for jobs that use it.
	S3 S3Access
	// Detach, when set, is asked after SIGTERM whether only this pod is going
	// away while its step goes on and will run invoke again (see
	// Disruption). When it says so, the job is left running and Run returns
	// a transient error (exit 75): the retry's new pod re-attaches. Otherwise,
	// and when it is not set, SIGTERM cancels the job.
	Detach func(ctx context.Context) (bool, string)

	rec     *Record
	written map[string]string // status keys as last written
	logOff  int64             // bytes of job output already copied to LogOut
	s3      *S3Store          // set when the job uses S3
	result  Result
}

// Result returns what invoke has found out so far.
func (iv *Invoker) Result() *Result { return &iv.result }

// Run executes invoke. It returns nil when the job reached a final state
// (DONE, FAILED, KILLED, UNKNOWN: see Result().Status); an error wrapping
// backends.ErrInvalid when nothing could be submitted because of the input;
// any other error when the state could not be followed to its end (a retry
// of invoke re-attaches).
func (iv *Invoker) Run(ctx context.Context) error {
	iv.defaults()
	err := iv.run(ctx)
	if err != nil {
		iv.result.Message = iv.Secrets.Scrub(err.Error())
		if iv.rec != nil {
			// Leave a note in the record; best effort, the outputs say it too.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = iv.update(wctx, func(d map[string]string) (bool, error) {
				return set(d, KeyMessage, iv.result.Message), nil
			})
			cancel()
		}
	}
	return err
}

func (iv *Invoker) defaults() {
	if iv.Log == nil {
		iv.Log = slog.New(slog.DiscardHandler)
	}
	if iv.Secrets == nil {
		iv.Secrets = &Secrets{}
	}
	if iv.Holder == "" {
		iv.Holder = DefaultHolder()
	}
	if iv.Grace <= 0 {
		iv.Grace = 25 * time.Second
	}
	if iv.SubmitLease <= 0 {
		iv.SubmitLease = 30 * time.Second
	}
	if iv.RetryBudget <= 0 {
		iv.RetryBudget = 10 * time.Minute
	}
	if iv.CancelWait <= 0 {
		iv.CancelWait = 30 * time.Second
	}
	if iv.MinPoll <= 0 {
		iv.MinPoll = 200 * time.Millisecond
	}
	if iv.LogOut == nil {
		iv.LogOut = io.Discard
	}
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

func (iv *Invoker) run(ctx context.Context) error {
	if err := iv.loadRecord(ctx); err != nil {
		return err
	}
	desc, err := SpecFromData(iv.rec.Data).Parse()
	if err != nil {
		return err
	}
	cfg := iv.Backend
	cfg.URL = desc.ResourceURL
	cfg.Logger = iv.Log.With("backend", desc.Backend)
	be, err := iv.Registry.New(desc.Backend, cfg)
	if err != nil {
		return err
	}
	if desc.UsesS3() {
		iv.s3, err = NewS3Store(S3Config{Endpoint: desc.S3.Endpoint, Secure: desc.S3.Secure, Region: desc.S3.Region,
			Credentials: DirCredentials{Dir: iv.S3.CredentialsDir, Secrets: iv.Secrets}, CAFile: iv.S3.CAFile, Insecure: iv.S3.Insecure})
		if err != nil {
			return err
		}
	}
	iv.result.Job = iv.JobName
	base := backends.Job{Name: iv.JobName, Key: IdempotencyKey(iv.rec.UID), Properties: desc.Properties}
	prepare := iv.preparer(ctx, desc, be, base)
	if iv.rec.Data[KeyID] == "" && iv.rec.Data[KeyIntent] == "" && !killRequested(iv.rec.Data) {
		// A fresh run: refuse bad input before anything is recorded.
		if _, err := prepare(); err != nil {
			return err
		}
	}
	log := iv.Log.With("backend", desc.Backend, "record", iv.Store.Describe())

	// Watch the record from here on: a kill may come at any time.
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	watch := iv.Store.Watch(wctx, iv.rec)

	id, err := iv.submitOrAdopt(ctx, be, base.Key, prepare, watch, log)
	if err != nil {
		return err
	}
	if id == "" { // killed before anything was submitted
		iv.result.Status, iv.result.Message = string(backends.Killed), "kill requested before the job was submitted; nothing was submitted"
		return iv.final(ctx, backends.Status{State: backends.Killed, Message: iv.result.Message})
	}
	iv.result.ID = id
	log = log.With("job_id", id)
	st, err := iv.follow(ctx, be, id, desc.UpdateInterval, watch, log)
	if err != nil {
		return err
	}
	if err := iv.final(ctx, st); err != nil {
		return err
	}
	if desc.UploadBucket == "" {
		return nil
	}
	// Uploads run after SIGTERM too, within the grace period.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), iv.uploadTime(ctx))
	defer cancel()
	locs, notes, uerr := iv.uploadOutputs(uctx, desc, be, id, base.Key)
	iv.result.Outputs = locs
	msg := iv.result.Message
	if len(notes) > 0 {
		msg += "; " + strings.Join(notes, "; ")
	}
	if uerr != nil {
		msg += "; " + uerr.Error()
	}
	iv.result.Message = truncate(iv.Secrets.Scrub(msg), 4096)
	werr := retryTransient(context.WithoutCancel(ctx), iv.RetryBudget, func() error {
		return iv.update(context.WithoutCancel(ctx), func(d map[string]string) (bool, error) {
			c := set(d, KeyOutputs, strings.Join(locs, "\n"))
			return set(d, KeyMessage, iv.result.Message) || c, nil
		})
	})
	if uerr != nil {
		return uerr
	}
	if werr != nil && !errors.Is(werr, ErrNoRecord) {
		return backends.Transient(fmt.Errorf("recording the output locations: %w", werr))
	}
	log.Info("outputs uploaded", "locations", len(locs))
	return nil
}

// uploadTime is how long uploads may take: the grace period after SIGTERM,
// else the retry budget.
func (iv *Invoker) uploadTime(ctx context.Context) time.Duration {
	if ctx.Err() != nil {
		return iv.Grace
	}
	return iv.RetryBudget
}

// loadRecord reads the state record, creating it from iv.Spec when given.
func (iv *Invoker) loadRecord(ctx context.Context) error {
	var rec *Record
	err := retryTransient(ctx, iv.RetryBudget, func() (err error) {
		rec, err = iv.Store.Get(ctx)
		return err
	})
	switch {
	case errors.Is(err, ErrNoRecord) && iv.Spec != nil:
		if _, perr := iv.Spec.Parse(); perr != nil {
			return perr
		}
		rec, err = EnsureRecord(ctx, iv.Store, *iv.Spec, iv.RetryBudget)
		if err != nil {
			return err
		}
	case errors.Is(err, ErrNoRecord):
		return backends.Invalid("configmap", "%s does not exist; run create-configmap first, or give the job's flags to invoke", iv.Store.Describe())
	case err != nil:
		return fmt.Errorf("reading %s: %w", iv.Store.Describe(), err)
	case iv.Spec != nil:
		if diff := Diff(SpecFromData(rec.Data), *iv.Spec); len(diff) > 0 {
			return backends.Invalid(diff[0], "%s already exists with a different %s; delete it (bridge-runner cleanup) or use another job name",
				iv.Store.Describe(), strings.Join(diff, ", "))
		}
	}
	iv.rec = rec
	return nil
}

// EnsureRecord creates the record from spec, or accepts an existing record
// with the same job description; a different one is an ErrInvalid naming the
// keys that differ.
func EnsureRecord(ctx context.Context, store Store, spec Spec, budget time.Duration) (*Record, error) {
	var rec *Record
	err := retryTransient(ctx, budget, func() (err error) {
		rec, err = store.Create(ctx, spec.WithDefaults().Data())
		if errors.Is(err, ErrRecordExists) {
			rec, err = store.Get(ctx)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", store.Describe(), err)
	}
	if diff := Diff(SpecFromData(rec.Data), spec); len(diff) > 0 {
		return nil, backends.Invalid(diff[0], "%s already exists with a different %s; delete it (bridge-runner cleanup) or use another job name",
			store.Describe(), strings.Join(diff, ", "))
	}
	return rec, nil
}

// update applies mutate to the latest record and writes it, re-reading and
// re-applying on conflict. mutate reports whether it changed anything.
func (iv *Invoker) update(ctx context.Context, mutate func(d map[string]string) (bool, error)) error {
	for {
		next := iv.rec.Clone()
		changed, err := mutate(next.Data)
		if err != nil || !changed {
			return err
		}
		rec, err := iv.Store.Update(ctx, next)
		if err == nil {
			iv.rec = rec
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return err
		}
		fresh, err := iv.Store.Get(ctx)
		if err != nil {
			return err
		}
		iv.rec = fresh
	}
}

func set(d map[string]string, k, v string) bool {
	if d[k] == v {
		return false
	}
	if v == "" {
		delete(d, k)
	} else {
		d[k] = v
	}
	return true
}

func killRequested(d map[string]string) bool {
	return strings.EqualFold(strings.TrimSpace(d[KeyKill]), "true")
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
	if err != nil {
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
func (iv *Invoker) submitOrAdopt(ctx context.Context, be backends.Backend, key string, prepare func() (backends.Job, error),
	watch <-chan *Record, log *slog.Logger) (string, error) {
	finder, _ := be.(backends.Finder)
	if finder == nil {
		log.Warn("this backend cannot find jobs by key: a crash between submit and recording the id could submit twice")
	}
	find := func() (string, error) {
		if finder == nil {
			return "", nil
		}
		var id string
		err := retryTransient(ctx, iv.RetryBudget, func() (err error) {
			id, err = finder.FindByKey(ctx, key)
			return err
		})
		return id, err
	}
	for {
		if id := iv.rec.Data[KeyID]; id != "" {
			log.Info("re-attaching to the recorded job", "job_id", id)
			return id, nil
		}
		if killRequested(iv.rec.Data) {
			return "", nil
		}
		cur, hasIntent := parseIntent(iv.rec.Data[KeyIntent])
		if hasIntent && cur.holder != iv.Holder {
			// Someone submitted or is submitting. Whatever state it is in,
			// a job carrying our key is the job.
			id, err := find()
			if err != nil {
				return "", fmt.Errorf("looking for an earlier submission: %w", err)
			}
			if id != "" {
				log.Info("adopting the job found by its idempotency key", "job_id", id, "key", key)
				return id, iv.recordID(ctx, id)
			}
			if age := time.Since(cur.at); age < iv.SubmitLease && !holderGone(cur.holder) {
				log.Info("another invoker is submitting; waiting for it", "holder", cur.holder)
				if err := iv.waitChange(ctx, watch, min(iv.SubmitLease-age, time.Second)); err != nil {
					return "", err
				}
				continue
			}
			log.Info("taking over a stale submit intent", "holder", cur.holder, "since", cur.at)
		}
		if !hasIntent || cur.holder != iv.Holder {
			crashPoint("before-intent")
			seen := iv.rec.Data[KeyIntent]
			err := iv.update(ctx, func(d map[string]string) (bool, error) {
				if d[KeyID] != "" || d[KeyIntent] != seen || killRequested(d) {
					return false, nil // changed under us: look again
				}
				d[KeyIntent] = intent{holder: iv.Holder, at: time.Now()}.String()
				d[KeyKey] = key
				return true, nil
			})
			if err != nil {
				return "", fmt.Errorf("recording the submit intent in %s: %w", iv.Store.Describe(), err)
			}
			if cur2, _ := parseIntent(iv.rec.Data[KeyIntent]); cur2.holder != iv.Holder {
				continue
			}
		}
		// We hold the intent. A job with our key may still exist if we took
		// over from a crashed holder that got as far as submitting.
		if hasIntent {
			if id, err := find(); err != nil {
				return "", err
			} else if id != "" {
				log.Info("adopting the job found by its idempotency key", "job_id", id, "key", key)
				return id, iv.recordID(ctx, id)
			}
		}
		crashPoint("after-intent")
		job, err := prepare()
		if err != nil {
			return "", err
		}
		id, err := iv.submit(ctx, be, job, find, log)
		if err != nil {
			return "", err
		}
		crashPoint("after-submit")
		if err := iv.recordID(ctx, id); err != nil {
			return "", err
		}
		crashPoint("after-id")
		return id, nil
	}
}

// submit submits the job, retrying transient faults within the submit lease;
// before each retry it looks for the job by key, because a request that
// timed out may still have been accepted.
func (iv *Invoker) submit(ctx context.Context, be backends.Backend, job backends.Job, find func() (string, error), log *slog.Logger) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, iv.SubmitLease-iv.SubmitLease/5)
	defer cancel()
	b := Backoff{Initial: 200 * time.Millisecond, Max: 5 * time.Second}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		id, err := be.Submit(sctx, job)
		switch {
		case err == nil:
			log.Info("submitted", "job_id", id, "key", job.Key, "took", time.Since(start).Round(time.Millisecond))
			return id, nil
		case errors.Is(err, backends.ErrExists):
			if id, ferr := find(); ferr == nil && id != "" {
				return id, nil
			}
			return "", fmt.Errorf("the backend has a job with key %s but cannot find it: %w", job.Key, err)
		case errors.Is(err, backends.ErrInvalid):
			return "", err
		case errors.Is(err, backends.ErrAuth):
			return "", &backends.FieldError{Field: "credentials", Msg: err.Error() + "; check the Secret mounted as the credentials directory"}
		case !errors.Is(err, backends.ErrTransient) && ctx.Err() == nil:
			return "", fmt.Errorf("submit refused: %w", err)
		}
		d := b.Next()
		if ctx.Err() != nil || sctx.Err() != nil || !sleepCtx(sctx, d) {
			return "", backends.Transient(fmt.Errorf("submit did not succeed after %d attempts: %w", attempt, err))
		}
		log.Warn("submit failed; retrying", "attempt", attempt, "err", err)
		if id, ferr := find(); ferr == nil && id != "" {
			return id, nil
		}
	}
}

// recordID writes the job id into the record right away, clearing the intent.
func (iv *Invoker) recordID(ctx context.Context, id string) error {
	wctx := context.WithoutCancel(ctx) // the id must land even during SIGTERM
	err := retryTransient(wctx, iv.RetryBudget, func() error {
		return iv.update(wctx, func(d map[string]string) (bool, error) {
			if d[KeyID] != "" && d[KeyID] != id {
				return false, fmt.Errorf("%s records job %s, but this invoker has job %s", iv.Store.Describe(), d[KeyID], id)
			}
			c := set(d, KeyID, id)
			c = set(d, KeyIntent, "") || c
			return c, nil
		})
	})
	if err != nil {
		return fmt.Errorf("recording job id %s in %s (a retry will find it by key): %w", id, iv.Store.Describe(), err)
	}
	return nil
}

// waitChange waits for a record change or d, whichever is first.
func (iv *Invoker) waitChange(ctx context.Context, watch <-chan *Record, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case rec, ok := <-watch:
		if ok && rec.UID == iv.rec.UID {
			iv.rec = rec
		}
	case <-t.C:
		fresh, err := iv.Store.Get(ctx)
		if err == nil {
			iv.rec = fresh
		}
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}
