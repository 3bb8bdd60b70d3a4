package operator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/kube"
)

// elector holds a Lease so that one of several replicas reconciles. It
// follows client-go's leaderelection (whose package would link the whole
// clientset): a holder renews every RetryPeriod; another replica takes the
// Lease when it has not seen it change for LeaseDuration by its own clock
// (so clocks need not agree), and a holder that could not renew for
// RenewDeadline stops leading.
type elector struct {
	c         *kube.Client
	namespace string
	name      string
	identity  string
	log       *slog.Logger

	leaseDuration, renewDeadline, retryPeriod time.Duration

	// what this replica last saw of the Lease, and when (its own clock)
	observed     *kube.Lease
	observedTime time.Time
}

// run blocks until ctx ends or leadership is lost; lead runs with a
// context that ends at either. It returns an error when leadership was
// lost (the process should exit and start over), nil when ctx ended.
func (e *elector) run(ctx context.Context, lead func(context.Context)) error {
	if !e.acquire(ctx) {
		return nil
	}
	e.log.Info("leading", "lease", e.namespace+"/"+e.name, "identity", e.identity)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx)
	}()
	lost := e.renew(lctx)
	cancel()
	<-done
	if lost {
		return fmt.Errorf("lost the lease %s/%s", e.namespace, e.name)
	}
	e.release()
	return nil
}

// acquire tries every RetryPeriod until it holds the Lease or ctx ends.
func (e *elector) acquire(ctx context.Context) bool {
	t := time.NewTicker(e.retryPeriod)
	defer t.Stop()
	for {
		if ok, err := e.tryAcquireOrRenew(ctx); ok {
			return true
		} else if err != nil {
			e.log.Debug("lease not acquired", "err", err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// renew keeps the Lease until ctx ends (false) or a renewal has failed for
// RenewDeadline (true: leadership lost).
func (e *elector) renew(ctx context.Context) bool {
	t := time.NewTicker(e.retryPeriod)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, e.renewDeadline)
		ok, err := e.tryAcquireOrRenew(rctx)
		cancel()
		if ok {
			last = time.Now()
			continue
		}
		if ctx.Err() != nil {
			return false
		}
		e.log.Warn("renewing the lease failed", "err", err)
		if time.Since(last) > e.renewDeadline {
			return true
		}
	}
}

func (e *elector) tryAcquireOrRenew(ctx context.Context) (bool, error) {
	now := metav1.NewMicroTime(time.Now())
	cur := &kube.Lease{}
	err := e.c.Get(ctx, kube.Leases, e.namespace, e.name, cur)
	if apierrors.IsNotFound(err) {
		l := &kube.Lease{}
		l.APIVersion, l.Kind = kube.CoordV1.String(), "Lease"
		l.Name, l.Namespace = e.name, e.namespace
		e.fill(l, now, true)
		out := &kube.Lease{}
		if err := e.c.Create(ctx, kube.Leases, e.namespace, l, out); err != nil {
			return false, err
		}
		e.see(out)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if e.observed == nil || e.observed.ResourceVersion != cur.ResourceVersion {
		e.see(cur)
	}
	held := cur.Spec.HolderIdentity
	if held != "" && held != e.identity && time.Since(e.observedTime) < e.leaseDuration {
		return false, nil // another replica holds a live lease
	}
	next := cur.DeepCopyObject().(*kube.Lease)
	e.fill(next, now, held != e.identity)
	out := &kube.Lease{}
	if err := e.c.Update(ctx, kube.Leases, e.namespace, e.name, next, out); err != nil {
		return false, err
	}
	e.see(out)
	return true, nil
}

func (e *elector) fill(l *kube.Lease, now metav1.MicroTime, taking bool) {
	l.Spec.HolderIdentity = e.identity
	l.Spec.LeaseDurationSeconds = int32(e.leaseDuration / time.Second)
	l.Spec.RenewTime = &now
	if taking {
		l.Spec.AcquireTime = &now
		l.Spec.LeaseTransitions++
	}
}

func (e *elector) see(l *kube.Lease) { e.observed, e.observedTime = l, time.Now() }

// release gives the Lease up at a graceful stop, so that another replica
// takes over at once instead of after LeaseDuration.
func (e *elector) release() {
	if e.observed == nil || e.observed.Spec.HolderIdentity != e.identity {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := e.observed.DeepCopyObject().(*kube.Lease)
	l.Spec.HolderIdentity = ""
	l.Spec.LeaseDurationSeconds = 1
	if err := e.c.Update(ctx, kube.Leases, e.namespace, e.name, l, &kube.Lease{}); err != nil {
		e.log.Warn("releasing the lease failed", "err", err)
	}
}
