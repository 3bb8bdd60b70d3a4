package record

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bridge-runner/bridge-runner/kube"
)

// ConfigMapStore keeps the record in the ConfigMap <job>-bridge-cm.
// Optimistic concurrency is the ConfigMap's resourceVersion; the UID is the
// ConfigMap's own, so a deleted and recreated ConfigMap is a new run.
type ConfigMapStore struct {
	Client    *kube.Client
	Namespace string
	Name      string
	// Owners are the owner references a record created here gets (see
	// SetRecordOwner), so that it goes with the run that made it.
	Owners []metav1.OwnerReference
	// Run names the run creating the record ("Workflow wf (uid u)", see
	// SetRecordOwner): Create stamps it as status.owner, so the record is
	// its creator run's from its first moment, not only once an invoke of
	// the run claims it (another run's cleanup would delete it meanwhile).
	Run string
	// Server names the API server for messages: its address and where the
	// address came from ("https://h:6443 (from KUBECONFIG /p)").
	Server string
	// Log, when set, hears the store wait for an API server that does not
	// answer: one line when the wait begins, then every Heartbeat
	// (DefaultHeartbeat when zero), and one when it answers again.
	Log       *slog.Logger
	Heartbeat time.Duration
	wait      apiWait

	// created is the UID of the record this store created (CreatedUID).
	created string

	// last is the newest ConfigMap this store has seen: an Update against
	// its version needs no GET first (the server's resourceVersion check
	// still refuses a stale write), which halves the requests per write.
	mu   sync.Mutex
	last *kube.ConfigMap
}

// seen remembers cm as the newest version and returns its record.
func (s *ConfigMapStore) seen(cm *kube.ConfigMap) *Record {
	s.mu.Lock()
	s.last = cm
	s.mu.Unlock()
	return cmRecord(cm)
}

// base returns the cached ConfigMap if it is the version rec was read at.
func (s *ConfigMapStore) base(rec *Record) *kube.ConfigMap {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && string(s.last.UID) == rec.UID && s.last.ResourceVersion == rec.Version {
		return s.last.DeepCopy()
	}
	return nil
}

// stampRun returns data with run as its owner when it names none.
func stampRun(data map[string]string, run string) map[string]string {
	if run == "" || data[KeyOwner] != "" {
		return data
	}
	c := maps.Clone(data)
	c[KeyOwner] = run
	return c
}

// ConfigMapName is the ConfigMap name for a job, as IBM's Bridge Operator named it.
func ConfigMapName(job string) string { return job + "-bridge-cm" }

// Labels put on ConfigMaps that bridge-runner creates, so they can be listed.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelJob       = "bridge-runner.io/job"
)

func (s *ConfigMapStore) Describe() string {
	return fmt.Sprintf("configmap %s/%s", s.Namespace, s.Name)
}

func cmRecord(cm *kube.ConfigMap) *Record {
	rec := &Record{UID: string(cm.UID), Version: cm.ResourceVersion, Data: cm.Data}
	if o := metav1.GetControllerOf(cm); o != nil {
		rec.Owner = o.APIVersion + "/" + o.Kind
	}
	return rec.Clone()
}

func (s *ConfigMapStore) Get(ctx context.Context) (*Record, error) {
	cm := &kube.ConfigMap{}
	err := s.Client.Get(ctx, kube.ConfigMaps, s.Namespace, s.Name, cm)
	s.heard(ctx, err)
	if apierrors.IsNotFound(err) {
		return nil, ErrNoRecord
	}
	if err != nil {
		return nil, s.kubeErr(err)
	}
	return s.seen(cm), nil
}

func (s *ConfigMapStore) Create(ctx context.Context, data map[string]string) (*Record, error) {
	cm := &kube.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: map[string]string{
			LabelManagedBy: "bridge-runner",
			LabelJob:       labelValue(s.Name),
			LabelFollow:    FollowValue(s.Name), // one watch for it and the heartbeat
		}, OwnerReferences: s.Owners},
		Data: stampRun(data, s.Run),
	}
	if c := data[KeyCluster]; c != "" && CheckCluster(c) == nil {
		cm.Labels[LabelCluster] = c // the cluster's agent lists its records by it
	}
	out := &kube.ConfigMap{}
	err := s.Client.Create(ctx, kube.ConfigMaps, s.Namespace, cm, out)
	s.heard(ctx, err)
	if apierrors.IsAlreadyExists(err) {
		return nil, ErrRecordExists
	}
	if err != nil {
		return nil, s.kubeErr(err)
	}
	rec := s.seen(out)
	s.mu.Lock()
	s.created = rec.UID
	s.mu.Unlock()
	return rec, nil
}

func (s *ConfigMapStore) Update(ctx context.Context, rec *Record) (*Record, error) {
	cm := s.base(rec)
	if cm == nil {
		got := &kube.ConfigMap{}
		err := s.Client.Get(ctx, kube.ConfigMaps, s.Namespace, s.Name, got)
		s.heard(ctx, err)
		if apierrors.IsNotFound(err) {
			return nil, ErrNoRecord
		}
		if err != nil {
			return nil, s.kubeErr(err)
		}
		if string(got.UID) != rec.UID {
			return nil, ErrConflict
		}
		cm = got
	}
	cm.ResourceVersion = rec.Version // the server refuses the write if it is stale
	cm.Data = rec.Data
	out := &kube.ConfigMap{}
	return s.written(ctx, out, s.Client.Update(ctx, kube.ConfigMaps, s.Namespace, s.Name, cm, out))
}

// written is the record a conditional write left (out), or the write's
// error in the store's terms.
func (s *ConfigMapStore) written(ctx context.Context, out *kube.ConfigMap, err error) (*Record, error) {
	s.heard(ctx, err)
	switch {
	case apierrors.IsConflict(err):
		return nil, ErrConflict
	case apierrors.IsNotFound(err):
		return nil, ErrNoRecord
	case err != nil:
		return nil, s.kubeErr(err)
	}
	return s.seen(out), nil
}

// EnsureLabel puts the label key=value on the record's ConfigMap when the
// copy this store last read lacks it, in one merge patch: a record that
// IBM's operator or kubectl made may name its cluster in its data but
// carry no label, by which the cluster's agent lists its records.
func (s *ConfigMapStore) EnsureLabel(ctx context.Context, key, value string) error {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if last != nil && last.Labels[key] == value {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	out := &kube.ConfigMap{}
	_, err = s.written(ctx, out, s.Client.MergePatch(ctx, kube.ConfigMaps, s.Namespace, s.Name, patch, out))
	return err
}

// PatchData sets the data keys of keys in the record as it was at rec's
// version, in one request that leaves every other field as it is: a
// writer that holds the record from a list or watch, not from this store
// (the cluster's watcher, writing another job's record), needs no read
// first. A record changed since is ErrConflict.
func (s *ConfigMapStore) PatchData(ctx context.Context, rec *Record, keys map[string]string) (*Record, error) {
	patch, err := json.Marshal(map[string]any{
		// The version alone is the precondition: a record deleted and made
		// again has another (versions only grow).
		"metadata": map[string]any{"resourceVersion": rec.Version},
		"data":     keys,
	})
	if err != nil {
		return nil, err
	}
	out := &kube.ConfigMap{}
	return s.written(ctx, out, s.Client.MergePatch(ctx, kube.ConfigMaps, s.Namespace, s.Name, patch, out))
}

func (s *ConfigMapStore) Delete(ctx context.Context) error {
	err := s.Client.Delete(ctx, kube.ConfigMaps, s.Namespace, s.Name, "")
	s.heard(ctx, err)
	if err != nil && !apierrors.IsNotFound(err) {
		return s.kubeErr(err)
	}
	return nil
}

// Watch uses a Kubernetes watch on the one ConfigMap (a field selector on
// its name), re-established from the last seen resourceVersion whenever the
// server closes it, and from a fresh Get when that version has expired.
func (s *ConfigMapStore) Watch(ctx context.Context, from *Record) <-chan *Record {
	ch := make(chan *Record, 1)
	go func() {
		defer close(ch)
		rv := ""
		if from != nil {
			rv = from.Version
		}
		backoff := Backoff{Initial: 200 * time.Millisecond, Max: 5 * time.Second}
		for ctx.Err() == nil {
			if rv == "" {
				rec, err := s.Get(ctx)
				if err != nil {
					SleepCtx(ctx, backoff.Next())
					continue
				}
				rv = rec.Version
				if !send(ctx, ch, rec) {
					return
				}
			}
			w, err := s.Client.WatchOne(ctx, kube.ConfigMaps, s.Namespace, s.Name, rv)
			if ctx.Err() == nil {
				s.heard(ctx, err) // the watch's retries are said as every request's
			}
			if err != nil {
				if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
					rv = ""
				}
				SleepCtx(ctx, backoff.Next())
				continue
			}
			rv = s.drain(ctx, w, ch, rv, &backoff)
		}
	}()
	return ch
}

// drain forwards events until the watch ends and returns the version to
// resume from ("" to start over with a Get).
func (s *ConfigMapStore) drain(ctx context.Context, w watch.Interface, ch chan<- *Record, rv string, backoff *Backoff) string {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			switch ev.Type {
			case watch.Error:
				if st := apierrors.FromObject(ev.Object); apierrors.IsGone(st) || apierrors.IsResourceExpired(st) {
					return ""
				}
				SleepCtx(ctx, backoff.Next())
				return rv
			case watch.Deleted:
				if cm, ok := ev.Object.(*kube.ConfigMap); ok {
					rv = cm.ResourceVersion
				}
			case watch.Bookmark, watch.Added, watch.Modified:
				cm, ok := ev.Object.(*kube.ConfigMap)
				if !ok {
					continue
				}
				rv = cm.ResourceVersion
				backoff.Reset()
				if ev.Type != watch.Bookmark && !send(ctx, ch, s.seen(cm)) {
					return rv
				}
			}
		}
	}
}

func send(ctx context.Context, ch chan<- *Record, rec *Record) bool {
	select {
	case ch <- rec:
		return true
	case <-ctx.Done():
		return false
	}
}

// labelValue shortens v to a valid label value (63 characters).
func labelValue(v string) string {
	if len(v) > 63 {
		v = v[:63]
	}
	return v
}
