package record

import (
	"context"
	"errors"
	"maps"
)

// Record is the job's state record: the ConfigMap's data (job description
// and state keys) with its identity and version.
type Record struct {
	UID     string // stable for the record's life; the idempotency key derives from it
	Version string // changes on every write; Update succeeds only against the latest
	Data    map[string]string
	// Owner is the record's controlling owner as apiVersion/Kind (a
	// ConfigMap's controller ownerReference), "" when none.
	Owner string
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := *r
	c.Data = maps.Clone(r.Data)
	if c.Data == nil {
		c.Data = map[string]string{}
	}
	return &c
}

// Store errors.
var (
	ErrNoRecord     = errors.New("state record does not exist")
	ErrRecordExists = errors.New("state record already exists")
	ErrConflict     = errors.New("state record was changed by someone else")
)

// Store keeps one job's state record. Implementations: ConfigMapStore (the
// ConfigMap <job>-bridge-cm) and FileStore (a JSON file, for laptops and
// plain Jobs without Kubernetes API access).
type Store interface {
	// Describe names the record for messages, e.g. "configmap ns/x-bridge-cm".
	Describe() string
	Get(ctx context.Context) (*Record, error)
	Create(ctx context.Context, data map[string]string) (*Record, error)
	// Update writes rec.Data if rec.Version is still the latest; otherwise
	// it fails with ErrConflict and writes nothing.
	Update(ctx context.Context, rec *Record) (*Record, error)
	// Delete removes the record; a missing record is not an error.
	Delete(ctx context.Context) error
	// Watch sends the record each time it changes, from after `from` on,
	// until ctx ends; then it closes the channel. It rides over transient
	// errors by itself.
	Watch(ctx context.Context, from *Record) <-chan *Record
}

// State keys the runner writes. The job description keys are Spec's tags.
const (
	KeyID        = "id"   // remote job id
	KeyKill      = "kill" // "true" asks for cancellation
	KeyJobStatus = "status.jobStatus"
	KeyMessage   = "status.message"
	KeySubmit    = "status.submitTime"
	KeyStart     = "status.startTime"
	KeyEnd       = "status.endTime"
	KeyRawState  = "status.backendState" // the backend's own state, e.g. TIMEOUT
	KeyReason    = "status.reason"
	KeyExitCode  = "status.exitCode"
	KeyKey       = "status.idempotencyKey"
	KeyIntent    = "status.submitIntent" // holder@time while a submit is under way
	KeyLogOffset = "status.logOffset"    // bytes of job output already streamed
	KeyOutputs   = "status.outputs"      // uploaded output locations, one per line
	// KeyFailureCategory is whose doing a FAILED or KILLED end was: job,
	// infrastructure, timeout or cancelled (backends.Category).
	KeyFailureCategory = "status.failureCategory"
	// KeyWatchGroup names the cluster watcher group a followed job belongs
	// to (a digest of backend, URL and credentials; see cluster.Cluster.Group).
	KeyWatchGroup = "status.watchGroup"
	// KeyWatchObserved is what the group's watcher last saw of the job, as
	// "<job id> <state> <backend state> <RFC 3339 time>". It is a hint: the
	// job's own invoke confirms a change with the backend before acting.
	KeyWatchObserved = "status.watchObserved"
	// KeyWatchHandover is set by a watcher that stops while jobs remain:
	// the job's invoke takes over watching at once.
	KeyWatchHandover = "status.watchHandover"
	// A job array's tasks (see runner/array.go): their counts by state
	// ("DONE=950 FAILED=50"), the indexes of those that did not end DONE
	// as ranges, and the first few of their exit codes ("4:3 17:1").
	KeyArrayCounts    = "status.arrayCounts"
	KeyArrayFailed    = "status.arrayFailed"
	KeyArrayExitCodes = "status.arrayExitCodes"
	// KeyArrayChunks lists an array split past the cluster's limit into
	// native arrays (runner/arraychunks.go): "size N" (the most indexes
	// one chunk spans, fixed before the first chunk's submit), then one
	// line per chunk submitted, "<indexes> <job id>", indexes as the user
	// gave them.
	KeyArrayChunks = "status.arrayChunks"
	// KeyPlacement is where a job with targets was placed and why (Placed,
	// as JSON), written once, before the submit intent.
	KeyPlacement = "status.placement"
)

// StateKeys lists every key the runner owns; a new run starts without them.
var StateKeys = []string{KeyID, KeyJobStatus, KeyMessage, KeySubmit, KeyStart, KeyEnd, KeyRawState, KeyReason, KeyExitCode, KeyKey, KeyIntent, KeyLogOffset, KeyOutputs, KeyIDFingerprint, KeyOwner, KeyBackendMemo, KeyFailureCategory, KeyAttempt, KeyAttempts, KeyWatchGroup, KeyWatchObserved, KeyWatchHandover, KeyArrayCounts, KeyArrayFailed, KeyArrayExitCodes, KeyBackendRequests, KeyPlacement, KeyEfficiency, KeyArrayChunks, KeyStartEstimate, KeyMove, KeyMoves}

// KeyBackendMemo holds what a backends.Rememberer learnt about the remote
// side (e.g. "api=v0.0.42" for Slurm), so that a later invoke of the same
// job skips discovering it again.
const KeyBackendMemo = "status.backendMemo"

// KeyIDFingerprint records a fingerprint of the id the backend returned,
// bound to the record's UID, so that an id edited by hand (which would make
// invoke report, and cleanup cancel, some other job) is refused.
const KeyIDFingerprint = "status.idFingerprint"

// KeyOwner names, in the record, the workflow task or Job whose invoke first
// used it (see StepOwner). Another task's invoke refuses the record.
const KeyOwner = "status.owner"

// Set sets key k of record data d to v (deleting it for ""), and reports
// whether that changed d.
func Set(d map[string]string, k, v string) bool {
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

// CreatedUID is the UID of the record s created in this process, "" when
// it created none (the record was there before, or is not created yet).
func CreatedUID(s Store) string {
	switch st := s.(type) {
	case *ibmStatusStore:
		return CreatedUID(st.Store)
	case *FileStore:
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.created
	case *ConfigMapStore:
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.created
	}
	return ""
}

// DropUnsubmitted deletes the record s created in this process when nothing
// was ever submitted from it (no job id, no submit intent): a first try
// refused for its input is undone, and a corrected rerun under the same
// name starts afresh instead of being refused for a different description.
// kill=true is written first, against the version checked, so no invoker
// of the record starts a submit after the check. A record created by
// someone else, or one that records a submit, stays. It reports whether
// the record was deleted.
func DropUnsubmitted(ctx context.Context, s Store) (bool, error) {
	uid := CreatedUID(s)
	if uid == "" {
		return false, nil
	}
	rec, err := s.Get(ctx)
	if errors.Is(err, ErrNoRecord) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if rec.UID != uid || rec.Data[KeyID] != "" || rec.Data[KeyIntent] != "" {
		return false, nil
	}
	rec.Data[KeyKill] = "true"
	if _, err := s.Update(ctx, rec); err != nil {
		return false, err // written meanwhile: it stays
	}
	return true, s.Delete(ctx)
}
