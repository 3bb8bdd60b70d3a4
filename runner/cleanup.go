package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Cleaner runs the cleanup step: cancel the remote job if it may still be
// running, then delete the record. Every part is idempotent, so cleanup can
// run in onExit whatever happened before, and again.
type Cleaner struct {
	Store    Store
	Registry *backends.Registry
	Backend  backends.Config
	Log      *slog.Logger
	// RetryBudget bounds retries of transient faults.
	RetryBudget time.Duration
	// Wait is how long a live invoker is given to report the cancellation
	// (it writes KILLED) before the record is deleted.
	Wait time.Duration
}

// Run performs cleanup. It reports whether a cancel was sent.
func (c *Cleaner) Run(ctx context.Context) (bool, error) {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Store = WithStatusKeys(c.Store, StatusKeysOurs, c.Log) // reads IBM's KILL as KILLED
	var rec *Record
	err := retryTransient(ctx, c.RetryBudget, func(ctx context.Context) (err error) {
		rec, err = c.Store.Get(ctx)
		return err
	})
	if errors.Is(err, ErrNoRecord) {
		c.Log.Info("nothing to clean up", "record", c.Store.Describe())
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", c.Store.Describe(), err)
	}
	cancelled := false
	if !backends.State(rec.Data[KeyJobStatus]).Final() {
		if cancelled, err = c.cancel(ctx, rec); err != nil {
			return cancelled, err
		}
	}
	if err := retryTransient(ctx, c.RetryBudget, func(ctx context.Context) error { return c.Store.Delete(ctx) }); err != nil {
		return cancelled, fmt.Errorf("deleting %s: %w", c.Store.Describe(), err)
	}
	c.Log.Info("deleted", "record", c.Store.Describe())
	return cancelled, nil
}

// cancel asks a live invoker to stop (kill=true) and cancels the remote job
// directly, in case no invoker is alive to do it.
func (c *Cleaner) cancel(ctx context.Context, rec *Record) (bool, error) {
	err := retryTransient(ctx, c.RetryBudget, func(ctx context.Context) error {
		for {
			if killRequested(rec.Data) {
				return nil
			}
			next := rec.Clone()
			next.Data[KeyKill] = "true"
			updated, err := c.Store.Update(ctx, next)
			if err == nil {
				rec = updated
				return nil
			}
			if !errors.Is(err, ErrConflict) {
				return err
			}
			if rec, err = c.Store.Get(ctx); err != nil {
				return err
			}
		}
	})
	if errors.Is(err, ErrNoRecord) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("setting kill=true in %s: %w", c.Store.Describe(), err)
	}
	desc, err := SpecFromData(rec.Data).Parse()
	if err != nil {
		c.Log.Warn("the record's job description is invalid, so nothing was submitted from it", "err", err)
		return false, nil
	}
	cfg := c.Backend
	cfg.URL = desc.ResourceURL
	cfg.Logger = c.Log.With("backend", desc.Backend)
	be, err := c.Registry.New(desc.Backend, cfg)
	if err != nil {
		return false, err
	}
	defer closeBackend(be, c.Log)
	if err := checkRecordedID(rec); err != nil {
		return false, err // never cancel a job this record did not submit
	}
	if r, ok := be.(backends.Rememberer); ok && rec.Data[KeyBackendMemo] != "" {
		r.Recall(rec.Data[KeyBackendMemo]) // no discovery before the cancel
	}
	id := rec.Data[KeyID]
	if id == "" {
		// A submit may have happened without the id being recorded.
		if f, ok := be.(backends.Finder); ok {
			_ = retryTransient(ctx, c.RetryBudget, func(ctx context.Context) (err error) {
				id, err = f.FindByKey(ctx, IdempotencyKey(rec.UID))
				return err
			})
		}
	}
	if id == "" {
		c.Log.Info("no remote job to cancel")
		return false, nil
	}
	err = retryTransient(ctx, c.RetryBudget, func(ctx context.Context) error {
		err := be.Cancel(ctx, id)
		if errors.Is(err, backends.ErrNotFound) {
			return nil // gone already
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("cancelling job %s: %w", id, err)
	}
	c.Log.Info("cancelled the remote job", "job_id", id)
	c.awaitInvoker(ctx, rec)
	return true, nil
}

// awaitInvoker gives a live invoker up to Wait to record the final state, so
// it is not left writing to a deleted record.
func (c *Cleaner) awaitInvoker(ctx context.Context, rec *Record) {
	if c.Wait <= 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, c.Wait)
	defer cancel()
	for r := range c.Store.Watch(wctx, rec) {
		if backends.State(r.Data[KeyJobStatus]).Final() {
			return
		}
	}
}
