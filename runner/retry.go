package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Backoff yields exponentially growing, jittered delays from Initial to Max.
// The zero Factor means 2 and the zero Jitter means ±20 %.
type Backoff struct {
	Initial, Max time.Duration
	Factor       float64
	Jitter       float64
	next         time.Duration
}

// Next returns the next delay.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.Initial
	}
	d := b.next
	f := b.Factor
	if f == 0 {
		f = 2
	}
	b.next = min(time.Duration(float64(b.next)*f), b.Max)
	return jitter(d, b.Jitter)
}

// Reset starts the sequence again from Initial.
func (b *Backoff) Reset() { b.next = 0 }

func jitter(d time.Duration, j float64) time.Duration {
	if j == 0 {
		j = 0.2
	}
	return time.Duration(float64(d) * (1 + j*(2*rand.Float64()-1)))
}

// sleepCtx sleeps for d or until ctx ends; it reports whether it slept fully.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryTransient calls fn until it succeeds, fails with a non-transient
// error, or budget has passed since the first attempt began; the last error
// is returned. Budget is a ceiling on all of it, waiting and requests: each
// attempt gets a context that ends when the budget does (a request to a
// server that never answers would otherwise add its own timeout, and 30 s
// became 60), and an attempt cut off there is a transient error. Backoff
// runs from 200 ms to 10 s, and never sooner than the server's Retry-After.
func retryTransient(ctx context.Context, budget time.Duration, fn func(context.Context) error) error {
	b := Backoff{Initial: 200 * time.Millisecond, Max: 10 * time.Second}
	deadline := time.Now().Add(budget)
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		err := fn(actx)
		if err != nil && actx.Err() != nil && ctx.Err() == nil && !errors.Is(err, backends.ErrTransient) {
			err = backends.Transient(fmt.Errorf("no answer within the retry budget (%s): %w", budget, err))
		}
		if err == nil || !errors.Is(err, backends.ErrTransient) || Permanent(err) {
			return err
		}
		d, werr := retryDelay(&b, err, deadline)
		if werr != nil {
			return werr
		}
		if time.Now().Add(d).After(deadline) || !sleepCtx(ctx, d) {
			return err
		}
	}
}

// retryDelay is the wait before the retry of err: the backoff's next, or
// the server's Retry-After when longer. A Retry-After that ends after
// deadline gives up at once (no request before the server's time), with
// an error that names the wait.
func retryDelay(b *Backoff, err error, deadline time.Time) (time.Duration, error) {
	d := b.Next()
	ra := httpx.RetryAfterOf(err)
	if ra <= d {
		return d, nil
	}
	if time.Now().Add(ra).After(deadline) {
		return 0, fmt.Errorf("%w; the server asked to wait %s before trying again (Retry-After), longer than the %s left of the retry budget",
			err, ra, max(time.Until(deadline), 0).Round(time.Second))
	}
	return ra, nil
}

// kubeErr marks Kubernetes API errors that a retry may cure as transient:
// throttling, timeouts, server errors and a connection that failed.
func kubeErr(err error) error {
	if err == nil {
		return nil
	}
	if f := kubeFault(err); f != nil {
		return f
	}
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) ||
		isNetErr(err) {
		return backends.Transient(err)
	}
	return err
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, context.DeadlineExceeded)
}
