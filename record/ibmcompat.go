package record

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/bridge-runner/bridge-runner/backends"
)

// IBM-compatible status keys. IBM's Bridge Operator, when installed, reads
// the record its pod image writes: status.jobStatus (with KILL, not KILLED,
// for a cancelled job), status.submitTime (its start time),
// status.endTime and status.message, times as 2006-01-02T15:04:05Z (our
// RFC 3339 in UTC is exactly that). IBM's LSF and Slurm pods wrote the same
// state unprefixed (jobStatus, submitTime, startTime, endTime, message),
// which other IBM tooling reads. In IBM mode bridge-runner writes all of
// them beside its own keys, so an installed operator can use bridge-runner
// as its pod image; and whatever the mode, a KILL read back is our KILLED.

// Status key modes (--status-keys).
const (
	StatusKeysAuto = "auto" // IBM's too when IBM's operator owns the record
	StatusKeysIBM  = "ibm"  // always IBM's too
	StatusKeysOurs = "ours" // ours only
)

// ParseStatusKeys checks a --status-keys value.
func ParseStatusKeys(v string) (string, error) {
	switch v = strings.ToLower(strings.TrimSpace(v)); v {
	case "", StatusKeysAuto:
		return StatusKeysAuto, nil
	case StatusKeysIBM, StatusKeysOurs:
		return v, nil
	}
	return "", backends.Invalid("status-keys", "is %q; use auto, ibm or ours", v)
}

// ibmOwned reports whether a record's owner is IBM's BridgeJob resource
// (group bridgejob.ibm.com; some of IBM's samples say bridgeoperator.ibm.com).
func ibmOwned(owner string) bool {
	return strings.HasSuffix(owner, "/BridgeJob") && strings.Contains(owner, ".ibm.com/")
}

// WithStatusKeys wraps a store so that, in IBM mode, every write of the
// record also carries IBM's status keys and words, and every read turns
// IBM's words back into ours. mode is a ParseStatusKeys value.
func WithStatusKeys(s Store, mode string, log *slog.Logger) Store {
	if _, ok := s.(*ibmStatusStore); ok {
		return s
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if mode == "" {
		mode = StatusKeysAuto
	}
	return &ibmStatusStore{Store: s, mode: mode, on: mode == StatusKeysIBM, log: log}
}

type ibmStatusStore struct {
	Store
	mode string
	log  *slog.Logger

	mu     sync.Mutex
	on     bool
	logged bool
}

// seen turns IBM mode on for a record IBM's operator owns (auto mode), and
// turns IBM's words in rec back into ours.
func (s *ibmStatusStore) seen(rec *Record) *Record {
	if rec == nil {
		return nil
	}
	s.mu.Lock()
	if s.mode == StatusKeysAuto && ibmOwned(rec.Owner) && !s.on {
		s.on = true
		s.log.Info("the record belongs to IBM's Bridge Operator: writing its status keys and words too", "owner", rec.Owner)
	}
	s.mu.Unlock()
	if st := rec.Data[KeyJobStatus]; st != "" {
		rec.Data[KeyJobStatus] = string(StateOf(st))
	}
	return rec
}

// ConfigMapOf returns the ConfigMap store s is, under any status-keys
// wrapper, or nil for another kind of store.
func ConfigMapOf(s Store) *ConfigMapStore {
	if is, ok := s.(*ibmStatusStore); ok {
		s = is.Store
	}
	cs, _ := s.(*ConfigMapStore)
	return cs
}

// IBMMode reports whether s writes IBM's status keys (IBM mode is on).
func IBMMode(s Store) bool {
	is, ok := s.(*ibmStatusStore)
	if !ok {
		return false
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.on
}

func (s *ibmStatusStore) Get(ctx context.Context) (*Record, error) {
	rec, err := s.Store.Get(ctx)
	return s.seen(rec), err
}

func (s *ibmStatusStore) Create(ctx context.Context, data map[string]string) (*Record, error) {
	rec, err := s.Store.Create(ctx, data)
	return s.seen(rec), err
}

func (s *ibmStatusStore) Update(ctx context.Context, rec *Record) (*Record, error) {
	s.mu.Lock()
	on := s.on
	s.mu.Unlock()
	if on {
		rec = rec.Clone()
		toIBMStatus(rec.Data)
	}
	got, err := s.Store.Update(ctx, rec)
	return s.seen(got), err
}

func (s *ibmStatusStore) Watch(ctx context.Context, from *Record) <-chan *Record {
	in := s.Store.Watch(ctx, from)
	out := make(chan *Record)
	go func() {
		// out closes only once the inner watch has ended: whoever waits for
		// out to close (a run's stop) may then delete what the inner watch
		// reads, and a file store's read takes the record's lock again.
		defer close(out)
		for rec := range in {
			if !send(ctx, out, s.seen(rec)) {
				break
			}
		}
		for range in { // ctx is done: the inner watch ends soon
		}
	}()
	return out
}

// toIBMStatus adds IBM's status keys and words to record data d.
func toIBMStatus(d map[string]string) {
	st := d[KeyJobStatus]
	if st == "" {
		return
	}
	st = IBMWord(backends.State(st))
	d[KeyJobStatus] = st
	for ibm, ours := range map[string]string{"jobStatus": KeyJobStatus, "submitTime": KeySubmit, "startTime": KeyStart, "endTime": KeyEnd, "message": KeyMessage} {
		Set(d, ibm, d[ours])
	}
}
