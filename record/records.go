package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
)

// Listed is one record as `bridge-runner status` sees it: the record and
// where it lives. Listing reads records only; it never asks a backend.
type Listed struct {
	Job       string // the job name: the record's name without -bridge-cm
	Name      string // the ConfigMap's name, or the state file's base name
	Namespace string // "" for a file record
	Where     string // configmap ns/name, or the state file's path
	Created   time.Time
	// Owners are the ConfigMap's owner references as Kind/name (a
	// BridgeJob controls the records it creates; a Workflow or Job owns
	// those its steps create).
	Owners []string
	Record *Record
}

// RecordEvent is a change seen by RecordLister.Watch.
type RecordEvent struct {
	Deleted bool
	Listed  Listed
}

// RecordLister lists the records of a namespace (ConfigMaps that
// bridge-runner created, by their label) or of a state directory.
type RecordLister interface {
	// Describe names what is listed, e.g. "configmaps in namespace ns".
	Describe() string
	// List returns the records sorted by namespace and job, and the version
	// to watch from.
	List(ctx context.Context) ([]Listed, string, error)
	// Watch sends every change after version until ctx ends, then closes the
	// channel. It rides over transient errors by itself.
	Watch(ctx context.Context, version string) <-chan RecordEvent
}

// OpenLister returns the lister for the options' store: the ConfigMaps of
// the namespace (all namespaces with allNamespaces), or the state
// directory's files. No job name is needed.
func (o *StoreOptions) OpenLister(allNamespaces bool) (RecordLister, error) {
	switch o.kind() {
	case "file":
		return &fileLister{Dir: o.Dir(), PollEvery: 2 * time.Second}, nil
	case "configmap":
		cfg, ns, err := o.kubeConfig()
		if err != nil {
			return nil, err
		}
		c, err := kube.New(cfg)
		if err != nil {
			return nil, backends.Invalid("kubeconfig", "%v", err)
		}
		if allNamespaces {
			ns = ""
		} else if err := ValidateNamespace(ns); err != nil {
			return nil, err
		}
		return &configMapLister{Client: c, Namespace: ns, Selector: managedBy}, nil
	}
	return nil, backends.Invalid("store", "%q is not a store; use auto, configmap or file", o.Kind)
}

// NewConfigMapLister lists the records of namespace ns ("" for all) that
// bridge-runner created (by their managed-by label).
func NewConfigMapLister(c *kube.Client, ns string) RecordLister {
	return &configMapLister{Client: c, Namespace: ns, Selector: managedBy}
}

// NewSelectedLister lists the ConfigMaps of namespace ns that selector (a
// label selector; "" for every one) selects, whoever created them: a
// watcher must see IBM's operator's and kubectl's records too, which carry
// no managed-by label (the watcher silently skipped them).
func NewSelectedLister(c *kube.Client, ns, selector string) RecordLister {
	return &configMapLister{Client: c, Namespace: ns, Selector: selector}
}

// configMapLister lists the ConfigMaps its label selector selects: by
// default (status) every record bridge-runner created (create-configmap,
// invoke, the operator).
type configMapLister struct {
	Client    *kube.Client
	Namespace string // "" for all namespaces
	Selector  string
}

var managedBy = labels.SelectorFromSet(labels.Set{LabelManagedBy: "bridge-runner"}).String()

func (l *configMapLister) Describe() string {
	if l.Namespace == "" {
		return "configmaps in all namespaces"
	}
	return "configmaps in namespace " + l.Namespace
}

func (l *configMapLister) List(ctx context.Context) ([]Listed, string, error) {
	list := &kube.ConfigMapList{}
	opts := &metav1.ListOptions{LabelSelector: l.Selector}
	err := l.Client.List(ctx, kube.ConfigMaps, l.Namespace, opts, list)
	if err != nil {
		return nil, "", KubeErr(err)
	}
	out := make([]Listed, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, cmListed(&list.Items[i]))
	}
	sortListed(out)
	return out, list.ResourceVersion, nil
}

func cmListed(cm *kube.ConfigMap) Listed {
	l := Listed{Job: strings.TrimSuffix(cm.Name, "-bridge-cm"), Name: cm.Name, Namespace: cm.Namespace,
		Where: "configmap " + cm.Namespace + "/" + cm.Name, Created: cm.CreationTimestamp.Time, Record: cmRecord(cm)}
	for _, o := range cm.OwnerReferences {
		l.Owners = append(l.Owners, o.Kind+"/"+o.Name)
	}
	return l
}

// Watch watches the labelled ConfigMaps from version on, and lists afresh
// (sending what changed meanwhile as events) when the version has expired.
func (l *configMapLister) Watch(ctx context.Context, version string) <-chan RecordEvent {
	ch := make(chan RecordEvent, 16)
	go func() {
		defer close(ch)
		backoff := Backoff{Initial: 200 * time.Millisecond, Max: 5 * time.Second}
		rv := version
		for ctx.Err() == nil {
			opts := &metav1.ListOptions{LabelSelector: l.Selector, ResourceVersion: rv, AllowWatchBookmarks: true, Watch: true}
			w, err := l.Client.Watch(ctx, kube.ConfigMaps, l.Namespace, opts)
			if err == nil {
				rv = l.drain(ctx, w, ch, rv, &backoff)
			} else if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				rv = ""
			}
			if rv == "" {
				// The version expired: a fresh list, every record sent
				// again (a consumer that compares rows prints only changes).
				rv = l.relist(ctx, ch)
			}
			if err != nil || rv == "" {
				SleepCtx(ctx, backoff.Next())
			}
		}
	}()
	return ch
}

func (l *configMapLister) relist(ctx context.Context, ch chan<- RecordEvent) string {
	items, rv, err := l.List(ctx)
	if err != nil {
		return ""
	}
	for _, it := range items {
		if !sendEvent(ctx, ch, RecordEvent{Listed: it}) {
			return rv
		}
	}
	return rv
}

// drain forwards events until the watch ends and returns the version to
// resume from ("" to list afresh).
func (l *configMapLister) drain(ctx context.Context, w watch.Interface, ch chan<- RecordEvent, rv string, backoff *Backoff) string {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			if ev.Type == watch.Error {
				if st := apierrors.FromObject(ev.Object); apierrors.IsGone(st) || apierrors.IsResourceExpired(st) {
					return ""
				}
				SleepCtx(ctx, backoff.Next())
				return rv
			}
			cm, ok := ev.Object.(*kube.ConfigMap)
			if !ok {
				continue
			}
			rv = cm.ResourceVersion
			backoff.Reset()
			if ev.Type == watch.Bookmark {
				continue
			}
			if !sendEvent(ctx, ch, RecordEvent{Deleted: ev.Type == watch.Deleted, Listed: cmListed(cm)}) {
				return rv
			}
		}
	}
}

func sendEvent(ctx context.Context, ch chan<- RecordEvent, ev RecordEvent) bool {
	select {
	case ch <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// fileLister lists the state files (*.json) of a directory. A file store
// has no watch to ride, so Watch polls (a directory read and a stat per
// file; a file is read only when it changed).
type fileLister struct {
	Dir       string
	PollEvery time.Duration

	// listed is what the last List returned, what Watch starts from: a
	// change between the List and the Watch is then seen as a change.
	listed []Listed
}

func (l *fileLister) Describe() string { return "state files in " + l.Dir }

func (l *fileLister) List(context.Context) ([]Listed, string, error) {
	ents, err := os.ReadDir(l.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fileFault(l.Dir, err)
	}
	var out []Listed
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if it, ok := l.read(filepath.Join(l.Dir, e.Name())); ok {
			out = append(out, it)
		}
	}
	sortListed(out)
	l.listed = out
	return out, "", nil
}

// read returns the record in path; false for a file that is not a record
// (other JSON, or one being replaced right now).
func (l *fileLister) read(path string) (Listed, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Listed{}, false
	}
	var fr fileRecord
	if json.Unmarshal(b, &fr) != nil || fr.UID == "" {
		return Listed{}, false
	}
	job := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".json"), "-bridge-cm")
	return Listed{Job: job, Name: filepath.Base(path), Where: "state file " + path, Created: fileCreated(path), Record: fr.record()}, true
}

// fileCreated is when the record was created: its lock file is made by the
// first write and never written to, so its mtime stays the creation time
// (the record itself is replaced on every write).
func fileCreated(path string) time.Time {
	if fi, err := os.Stat(path + ".lock"); err == nil {
		return fi.ModTime()
	}
	if fi, err := os.Stat(path); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

func (l *fileLister) Watch(ctx context.Context, _ string) <-chan RecordEvent {
	ch := make(chan RecordEvent, 16)
	go func() {
		defer close(ch)
		seen := map[string]Listed{}
		start := l.listed
		if start == nil {
			start, _, _ = l.List(ctx)
		}
		for _, it := range start {
			seen[it.Where] = it
		}
		t := time.NewTicker(l.PollEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			items, _, err := l.List(ctx)
			if err != nil {
				continue
			}
			if !l.diff(ctx, ch, seen, items) {
				return
			}
		}
	}()
	return ch
}

// diff sends what changed between seen and now, and updates seen.
func (l *fileLister) diff(ctx context.Context, ch chan<- RecordEvent, seen map[string]Listed, now []Listed) bool {
	cur := map[string]bool{}
	for _, it := range now {
		cur[it.Where] = true
		old, ok := seen[it.Where]
		if ok && old.Record.UID == it.Record.UID && old.Record.Version == it.Record.Version {
			continue
		}
		seen[it.Where] = it
		if !sendEvent(ctx, ch, RecordEvent{Listed: it}) {
			return false
		}
	}
	for k, old := range seen {
		if !cur[k] {
			delete(seen, k)
			if !sendEvent(ctx, ch, RecordEvent{Deleted: true, Listed: old}) {
				return false
			}
		}
	}
	return true
}

func sortListed(ls []Listed) {
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].Namespace != ls[j].Namespace {
			return ls[i].Namespace < ls[j].Namespace
		}
		return ls[i].Job < ls[j].Job
	})
}

// TargetHost is the host (and port) a resourceURL names, never its user
// or password: "" for none. An SSH target written user@host:port keeps
// only host:port.
func TargetHost(raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		raw = raw[i+1:]
	}
	if i := strings.IndexAny(raw, "/?#"); i >= 0 {
		raw = raw[:i]
	}
	return raw
}

// RecordOwner names whom a record belongs to, for people: the BridgeJob
// that controls it, else the workflow step or Job whose invoke used it
// (status.owner, without the uid), else the record's owner reference.
func RecordOwner(l Listed) string {
	for _, o := range l.Owners {
		if strings.HasPrefix(o, "BridgeJob/") {
			return o
		}
	}
	if s := l.Record.Data[KeyOwner]; s != "" {
		return stepOwnerShort(s)
	}
	if len(l.Owners) > 0 {
		return l.Owners[0]
	}
	return ""
}

// stepOwnerShort turns StepOwner's "Workflow wf (uid u) node n" or "Job j
// (uid u) index i" into "Workflow/wf node n" and "Job/j index i".
func stepOwnerShort(s string) string {
	kind, rest, ok := strings.Cut(s, " ")
	if !ok {
		return s
	}
	name, rest, _ := strings.Cut(rest, " ")
	if i := strings.Index(rest, ")"); strings.HasPrefix(rest, "(uid ") && i >= 0 {
		rest = strings.TrimSpace(rest[i+1:])
	}
	out := fmt.Sprintf("%s/%s", kind, name)
	if rest != "" {
		out += " " + rest
	}
	return out
}
