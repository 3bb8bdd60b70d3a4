package operator

import (
	"encoding/json"
	"net/url"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/metrics"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// recordMetrics turns the changes of records (BridgeJobs' and workflow
// steps'), which invoke writes, into counters: the operator never talks to a backend itself, so
// the records are where it learns what the jobs did there.
type recordMetrics struct {
	m *opMetrics

	mu sync.Mutex
	// last is each record's request counts as last counted, so that a
	// change adds only the difference (the counters must never go back).
	last map[types.UID]map[string]int64
}

// detectionBuckets span a job seen ending by a watch or a fast poll (under
// a second; the end time has whole seconds) to one found by a slow poll or
// after invoke was down (minutes).
var detectionBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600}

// watch counts from the record informer's events. The records of the
// first list are only taken as they are: what they did happened before
// this replica led (a restart must not count it again).
func (rm *recordMetrics) watch(inf cache.SharedIndexInformer) {
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if cm, ok := obj.(*kube.ConfigMap); ok {
				rm.changed(nil, cm, initial)
			}
		},
		UpdateFunc: func(o, n any) {
			old, ok1 := o.(*kube.ConfigMap)
			cm, ok2 := n.(*kube.ConfigMap)
			if ok1 && ok2 {
				rm.changed(old, cm, false)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if cm, ok := obj.(*kube.ConfigMap); ok {
				rm.mu.Lock()
				delete(rm.last, cm.UID)
				rm.mu.Unlock()
			}
		},
	})
}

// changed counts what differs from old (nil: a new record) to cm.
func (rm *recordMetrics) changed(old, cm *kube.ConfigMap, baselineOnly bool) {
	d := cm.Data
	backend, target := placedAt(cm)
	counts := record.ParseRequests(d[record.KeyBackendRequests])
	rm.mu.Lock()
	prev := rm.last[cm.UID]
	if rm.last == nil {
		rm.last = map[types.UID]map[string]int64{}
	}
	rm.last[cm.UID] = counts
	rm.mu.Unlock()
	if baselineOnly {
		return
	}
	var od map[string]string
	if old != nil {
		od = old.Data
	}
	for c, n := range prev {
		if counts[c] < n { // a new run started the counts again
			prev = nil
			break
		}
	}
	for c, n := range counts {
		if n > prev[c] {
			rm.m.backendRequests.Add(float64(n-prev[c]), backend, target, c)
		}
	}
	if id := d[record.KeyID]; id != "" && id != od[record.KeyID] {
		rm.m.submissions.Inc(backend)
	}
	rm.observeUse(od, d, backend, target)
	state := string(ourState(d[record.KeyJobStatus]))
	// A word that is no state (the record is user-editable) makes no
	// series: the label's values stay the seven states.
	if _, known := record.Facts(backends.State(state)); !known || ourState(od[record.KeyJobStatus]) == backends.State(state) {
		return
	}
	rm.m.transitions.Inc(backend, state)
	if end, err := time.Parse(time.RFC3339, d[record.KeyEnd]); err == nil && isFinal(state) && !isFinal(od[record.KeyJobStatus]) {
		rm.m.detection.Observe(max(0, time.Since(end).Seconds()), backend)
	}
}

// efficiencyBuckets span a job that used a tenth of what it asked to one
// that used all of it (a little more: memory may pass the request).
var efficiencyBuckets = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25}

// queueWaitBuckets span a job started at once to one that waited a day.
var queueWaitBuckets = []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400}

// observeUse observes what a record's job used when invoke writes it
// (status.efficiency, once per run) and its queue wait when its start is
// first recorded, whatever the backend (the record's own times).
func (rm *recordMetrics) observeUse(od, d map[string]string, backend, target string) {
	if v := d[record.KeyEfficiency]; v != "" && v != od[record.KeyEfficiency] {
		if e, err := record.ParseEfficiency(v); err == nil && e != nil {
			for h, r := range map[*metrics.Histogram]*float64{&rm.m.cpuEff: e.CPU, &rm.m.memEff: e.Memory, &rm.m.timeFrac: e.Time} {
				if r != nil {
					h.Observe(*r, backend, target)
				}
			}
		}
	}
	rm.observeStartError(od, d)
	if d[record.KeyStart] == "" || od[record.KeyStart] != "" {
		return
	}
	submit, err1 := time.Parse(time.RFC3339, d[record.KeySubmit])
	start, err2 := time.Parse(time.RFC3339, d[record.KeyStart])
	if w := record.QueueWait(submit, start); err1 == nil && err2 == nil && w != nil {
		rm.m.queueWait.Observe(float64(*w), backend, target, partitionOf(d))
	}
}

// partitionOf is the partition (Slurm) or queue (LSF) jobproperties names,
// "" for none.
func partitionOf(d map[string]string) string {
	var props map[string]any
	_ = json.Unmarshal([]byte(d["jobproperties"]), &props)
	for _, k := range []string{"partition", "queue"} {
		if v, ok := props[k].(string); ok && len(v) <= 64 {
			return v
		}
	}
	return ""
}

// placedAt is the backend and the target host a record's job runs at: the
// placed target's once its run placed it (status.placement; its URL as
// record.Description.Inherit gives it), else the record's own.
func placedAt(cm *kube.ConfigMap) (backend, target string) {
	backend, u := cm.Data["backend"], cm.Data["resourceURL"] // the keys the operator writes the spec's under
	p, err := record.ParsePlaced(cm.Data[record.KeyPlacement])
	if err != nil || p == nil {
		return backend, targetOf(u)
	}
	job := &record.Description{Backend: backend, ResourceURL: u}
	for _, t := range recordTargets(cm) {
		if t.Name == p.Target {
			u = job.Inherit(t).ResourceURL // the one rule of what a target inherits
		}
	}
	return p.Backend, targetOf(u)
}

// targetOf is the host (and port) of a resource URL: the remote system,
// without the path or any user name. "" for none (the local backend).
func targetOf(resourceURL string) string {
	u, err := url.Parse(resourceURL)
	if err != nil {
		return ""
	}
	return u.Host
}
