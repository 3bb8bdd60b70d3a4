package watcher

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// leaseView follows a watch group's lease through one Kubernetes watch, so
// that an invoke learns of its renewals, handovers and lapses as they
// happen. Reading the lease instead, each time the renewal an invoke
// trusted would run out, cost a GET every 8-10 s per step for as long as
// its job runs: 450 for an hour-long job, 60 a second on the apiserver
// from 500 such steps, and twice polling alone's Kubernetes requests for
// 100 jobs of 5 s. The view is one watch from the member's first read,
// renewed when the apiserver ends it.
type leaseView struct {
	l      lease
	judge  func(leaseState) leaseState // the member's (see leaseJudge)
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	st leaseState
	// current: st is as the apiserver has it, give or take the watch's
	// delivery; false while the watch is down.
	current bool
	relist  chan struct{}
	// changed is signalled at every change of the view, for a member
	// waiting on its own poll to look again (a watcher distrusted).
	changed chan struct{}
}

// startLeaseView starts following lease l from its state as just read
// and judged (from), with no list first: a lease that exists is watched
// from that version on; an absent one by a watch from the apiserver's
// newest version, which brings a lease created since the read as a
// synthetic ADDED (a list for a version to watch from cost a request
// more). Every state it sees is judged by judge, in the order written.
func startLeaseView(ctx context.Context, l lease, from leaseState, judge func(leaseState) leaseState) *leaseView {
	ctx, cancel := context.WithCancel(ctx)
	v := &leaseView{l: l, judge: judge, cancel: cancel, done: make(chan struct{}), relist: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
	v.st, v.current = from, true
	go v.run(ctx, from.version)
	return v
}

// get returns the lease as last seen and whether that is current.
func (v *leaseView) get() (leaseState, bool) {
	if v == nil {
		return leaseState{}, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.st, v.current
}

// stale says the view was found behind (a conditional write at its
// version conflicted): it lists the lease again.
func (v *leaseView) stale() {
	if v == nil {
		return
	}
	v.set(leaseState{}, false)
	select {
	case v.relist <- struct{}{}:
	default:
	}
}

func (v *leaseView) stop() {
	if v != nil {
		v.cancel()
		<-v.done
	}
}

func (v *leaseView) set(st leaseState, current bool) {
	v.mu.Lock()
	v.st, v.current = st, current
	v.mu.Unlock()
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// changes is signalled when the view changed (nil for no view: a wait on
// it never ends).
func (v *leaseView) changes() <-chan struct{} {
	if v == nil {
		return nil
	}
	return v.changed
}

// run watches the lease from version rv on (from the newest at first
// when rv is empty: the lease was just read absent), again after the
// watch ends, from a list's version when the view lost track; it gives
// up when the Role denies the list (the member's reads then find that
// out and say it once).
func (v *leaseView) run(ctx context.Context, rv string) {
	defer close(v.done)
	back := record.Backoff{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Factor: 2, Jitter: 0.2}
	first := true
	for ctx.Err() == nil {
		// Past the first watch, a watch from the newest version could not
		// tell a lease deleted meanwhile: the view lists for the truth.
		if rv == "" && !first {
			var err error
			if rv, err = v.list(ctx); err != nil {
				v.set(leaseState{}, false)
				if apierrors.IsForbidden(err) {
					return
				}
				v.l.clock.SleepCtx(ctx, back.Next())
				continue
			}
		}
		first = false
		w, err := v.l.c.WatchOne(ctx, kube.ConfigMaps, v.l.ns, v.l.name, rv)
		if apierrors.IsForbidden(err) {
			v.set(leaseState{}, false)
			return
		}
		if err != nil {
			v.set(leaseState{}, false)
			rv = ""
			v.l.clock.SleepCtx(ctx, back.Next())
			continue
		}
		// A watch that ended as watches do resumes at once; one that failed
		// (an error event, the view found behind) lists again after a
		// back-off, so that an apiserver failing every watch is not asked
		// in a loop.
		if rv = v.follow(ctx, w, rv); rv != "" {
			back.Reset()
		} else {
			v.l.clock.SleepCtx(ctx, back.Next())
		}
	}
}

// list reads the lease (absent is a state too) and returns the version
// to watch from.
func (v *leaseView) list(ctx context.Context) (string, error) {
	list := &kube.ConfigMapList{}
	opts := &metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", v.l.name).String()}
	if err := v.l.c.List(ctx, kube.ConfigMaps, v.l.ns, opts, list); err != nil {
		return "", err
	}
	st := leaseState{}
	for i := range list.Items {
		st = v.l.stateOf(&list.Items[i])
	}
	v.set(v.judge(st), true)
	return list.ResourceVersion, nil
}

// follow applies the watch's events until it ends (or the view is found
// stale) and returns the version to resume from ("" to list again).
func (v *leaseView) follow(ctx context.Context, w watch.Interface, rv string) string {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv
		case <-v.relist:
			return ""
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			cm, isCM := ev.Object.(*kube.ConfigMap)
			switch {
			case ev.Type == watch.Error || !isCM:
				v.set(leaseState{}, false)
				return "" // expired or worse: list afresh
			case ev.Type == watch.Deleted:
				v.set(v.judge(leaseState{}), true)
			case ev.Type != watch.Bookmark:
				v.set(v.judge(v.l.stateOf(cm)), true)
			}
			rv = cm.ResourceVersion
		}
	}
}
