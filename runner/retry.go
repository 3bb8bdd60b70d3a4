package runner

import (
	"context"
	"errors"
	"fmt"

	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/record"
)

// retryTransient calls fn until it succeeds, fails with a non-transient
// error, or budget has passed since the first attempt began; the last error
// is returned. Budget is a ceiling on all of it, waiting and requests: each
// attempt gets a context that ends when the budget does (a request to a
// server that never answers would otherwise add its own timeout, and 30 s
// became 60), and an attempt cut off there is a transient error. Backoff
// runs from 200 ms to 10 s, and never sooner than the server's Retry-After.
func retryTransient(ctx context.Context, budget time.Duration, fn func(context.Context) error) error {
	b := record.Backoff{Initial: 200 * time.Millisecond, Max: 10 * time.Second}
	deadline := time.Now().Add(budget)
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		err := fn(actx)
		if err != nil && actx.Err() != nil && (ctx.Err() == nil || budgetSpent(ctx)) && !errors.Is(err, backends.ErrTransient) {
			err = backends.Transient(fmt.Errorf("no answer within the retry budget (%s): %w", budget, err))
		}
		if err == nil || !errors.Is(err, backends.ErrTransient) || record.Permanent(err) {
			return err
		}
		d, werr := retryDelay(&b, err, deadline)
		if werr != nil {
			return werr
		}
		if time.Now().Add(d).After(deadline) || !record.SleepCtx(ctx, d) {
			return err
		}
	}
}

// errBudgetSpent is the cause of a step's context that ended with its
// retry budget (withBudget).
var errBudgetSpent = errors.New("the retry budget is spent")

// withBudget returns ctx ending after budget: a ceiling on a whole step
// (cleanup), each of whose calls may retry under a budget of its own and
// would otherwise add their budgets and timeouts up (2 min became 150 s).
// Every blocking call under it ends with the step's budget.
func withBudget(ctx context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, budget, errBudgetSpent)
}

// budgetSpent reports whether ctx ended with its step's budget (not with
// SIGTERM): what was cut off there is a transient fault.
func budgetSpent(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errBudgetSpent)
}

// retryDelay is the wait before the retry of err: the backoff's next, or
// the server's Retry-After when longer. A Retry-After that ends after
// deadline gives up at once (no request before the server's time), with
// an error that names the wait.
func retryDelay(b *record.Backoff, err error, deadline time.Time) (time.Duration, error) {
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
