package watcher

import (
	"context"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// A step whose cluster has an agent follows two ConfigMaps for as long as
// its job runs: its record (for a kill, and the agent's observations) and
// the agent's heartbeat. Both carry record.LabelFollow, so one watch by
// that label brings both, where a watch of each was two requests (a lone
// job's step with the agent: 6 Kubernetes requests, now 5, its three
// transitions and two). The heartbeat view owns the watch and hands the
// record's versions to Carry; whatever keeps the label from bringing
// both (a Role that names its ConfigMaps, a heartbeat or record without
// the label) has each watched alone, as before.

// riding is the view's part for the record that rides in its watch.
type riding struct {
	rec  string               // the record's ConfigMap ("" none)
	in   chan *kube.ConfigMap // its newest version not yet taken (one)
	gone chan struct{}        // closed once it no longer rides

	mu       sync.Mutex
	on       bool // the view's watch selects the record (until drop)
	carried  bool // a Carry takes its versions
	viewHeld bool // the view is not stopped yet
	goneOnce sync.Once
}

func newRiding(rec string) riding {
	return riding{rec: rec, in: make(chan *kube.ConfigMap, 1), gone: make(chan struct{}), on: rec != "", viewHeld: true}
}

// riding reports whether the view's watch is to select the record.
func (r *riding) riding() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.on
}

// drop has the record no longer ride; false when it did not.
func (r *riding) drop() bool {
	r.mu.Lock()
	was := r.on
	r.on = false
	r.mu.Unlock()
	r.goneOnce.Do(func() { close(r.gone) })
	return was
}

// pass hands the record's version cm on (the newest replaces one not yet
// taken); false when the record left the label's sight (deleted, or its
// label taken off, which a label's watch cannot tell apart): it is then
// dropped, for its own watch to tell which.
func (r *riding) pass(t watch.EventType, cm *kube.ConfigMap) bool {
	if cm.Name != r.rec || !r.riding() {
		return true // another ConfigMap of the label's value: not ours
	}
	if t == watch.Deleted {
		r.drop()
		return false
	}
	select {
	case <-r.in: // the view's goroutine is the only sender
	default:
	}
	r.in <- cm
	return true
}

// release ends a hold on the view's watch (the view's own when view, else
// Carry's) and reports whether none is left, so the watch is to end.
func (r *riding) release(view bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if view {
		if !r.viewHeld {
			return false // stopped before
		}
		r.viewHeld = false
	} else {
		r.carried = false
	}
	return !r.viewHeld && !r.carried
}

// watch opens the view's watch: of the heartbeat and the record by their
// label while the record rides, else of the heartbeat by its name; from
// the apiserver's newest version either way (see run).
func (v *HeartbeatView) watch(ctx context.Context, name string) (watch.Interface, error) {
	if !v.ride.riding() {
		return v.c.WatchOne(ctx, kube.ConfigMaps, v.ns, name, "")
	}
	sel := record.LabelFollow + " in (" + record.FollowValue(name) + "," + record.FollowValue(v.ride.rec) + ")"
	return v.c.Watch(ctx, kube.ConfigMaps, v.ns, &metav1.ListOptions{LabelSelector: sel, AllowWatchBookmarks: true, Watch: true})
}

// Carry follows the step's record (the view's rec, whose store cs is) in
// the view's watch, from after version from on, as cs.Watch would; false
// when it cannot (the view carries no record, has stopped, or the record
// lacks its label): the caller watches the record itself. The channel
// closes once ctx ends. Should the record stop riding (see riding), it
// is watched by cs.Watch from the last version sent, and the view's
// watch goes back to the heartbeat alone.
func (v *HeartbeatView) Carry(ctx context.Context, cs *record.ConfigMapStore, from *record.Record) (<-chan *record.Record, bool) {
	if v == nil || cs.Name != v.ride.rec || !cs.Followed() || !v.hold() {
		return nil, false
	}
	out := make(chan *record.Record, 1)
	go func() {
		defer close(out)
		defer func() {
			if v.ride.release(false) {
				v.cancel()
				<-v.done
			}
		}()
		last := from.Version
		for {
			select {
			case <-ctx.Done():
				return
			case cm := <-v.ride.in:
				if !newerVersion(cm.ResourceVersion, last) {
					continue // the step's own write, or one it has
				}
				last = cm.ResourceVersion
				if !sendRecord(ctx, out, cs.Saw(cm)) {
					return
				}
			case <-v.ride.gone:
				for rec := range cs.Watch(ctx, &record.Record{UID: from.UID, Version: last}) {
					if !sendRecord(ctx, out, rec) {
						return
					}
				}
				return
			}
		}
	}()
	return out, true
}

// hold takes Carry's hold on the view's watch; false when it has ended
// or no record rides in it.
func (v *HeartbeatView) hold() bool {
	r := &v.ride
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.on || !r.viewHeld || r.carried {
		return false
	}
	r.carried = true
	return true
}

// newerVersion reports whether resource version a is after b. Versions
// are etcd's revisions, numbers that only grow; one that is not a number
// is newer when it differs.
func newerVersion(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x > y
}

func sendRecord(ctx context.Context, ch chan<- *record.Record, rec *record.Record) bool {
	select {
	case ch <- rec:
		return true
	case <-ctx.Done():
		return false
	}
}
