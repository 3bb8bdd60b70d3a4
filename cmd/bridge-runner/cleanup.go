package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/bridge-runner/bridge-runner/runner"
)

// defaultRetryBudget bounds retries of transient faults in create-configmap and cleanup.
const defaultRetryBudget = 2 * time.Minute

type cleanupOptions struct {
	store   storeOptions
	backend backendOptions
	wait    time.Duration
}

func (a *app) newCleanupCmd() *cobra.Command {
	o := &cleanupOptions{}
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Cancel the remote job if it is still running, then delete the record",
		Long: `cleanup is the exit handler of a bridge job. If the job has not reached a final
state it sets kill=true in the record (so a live invoke stops and reports KILLED)
and cancels the remote job itself (in case no invoke is alive), then deletes the
record. It is idempotent: a missing record is success.`,
		Example: `  bridge-runner cleanup --job-name sim-42`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			code, err := a.runCleanup(cmd, o)
			if err != nil {
				a.log.Error("cleanup failed", "err", err)
			}
			return exitError{code}
		},
	}
	o.store.addFlags(cmd.Flags())
	o.backend.addFlags(cmd.Flags())
	cmd.Flags().DurationVar(&o.wait, "wait", 10*time.Second, "how long a running invoke is given to record the cancellation before the record is deleted")
	return cmd
}

func (a *app) runCleanup(cmd *cobra.Command, o *cleanupOptions) (int, error) {
	store, err := o.store.build()
	if err != nil {
		return exitCode(nil, err), err
	}
	cfg, err := o.backend.config(a, o.store.stateDir())
	if err != nil {
		return exitCode(nil, err), err
	}
	c := &runner.Cleaner{Store: store, Registry: a.registry, Backend: cfg, Log: a.log.With("job", o.store.JobName),
		RetryBudget: defaultRetryBudget, Wait: o.wait}
	cancelled, err := c.Run(cmd.Context())
	if err != nil {
		return exitCode(nil, err), err
	}
	out, _ := json.Marshal(map[string]any{"record": store.Describe(), "cancelled": cancelled, "deleted": true})
	fmt.Fprintln(a.stdout, string(out))
	return ExitDone, nil
}
