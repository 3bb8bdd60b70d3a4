package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// defaultRetryBudget bounds retries of transient faults in create-configmap and cleanup.
const defaultRetryBudget = 2 * time.Minute

type cleanupOptions struct {
	store       storeOptions
	backend     backendOptions
	backendName string
	wait        time.Duration
	submitLease time.Duration
	retryBudget time.Duration
	force       bool
	anyOwner    bool
}

func (a *app) newCleanupCmd() *cobra.Command {
	o := &cleanupOptions{}
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Cancel the remote job if it is still running, then delete the record",
		Long: `cleanup is the exit handler of a bridge job. If the job has not ended it sets
kill=true in the record (so a live invoke stops and reports KILLED) and cancels
the remote job itself (in case no invoke is alive), with the backend invoke would
choose; a job the record does not name yet is found by its idempotency key. It
deletes the record only when the job is known to have ended, the backend accepted
the cancel, or nothing was submitted; otherwise the record stays and cleanup exits
75 (a retry finishes the cancel), unless --force. Inside a pod it acts only on a
record of its own run (the Argo Workflow or the Job): another run's record is left
alone and cleanup exits 0 saying so. It is idempotent: a missing record is success.
stdout carries one JSON summary line: record, id, cancelled, deleted, reason.`,
		Example: `  bridge-runner cleanup --job-name sim-42
  # IBM's records name no backend; cleanup infers it from the URL, as invoke:
  bridge-runner cleanup --configmap sim-42-slurm-cm --backend slurm`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exitError{a.runCleanup(cmd, o)}
		},
	}
	fs := cmd.Flags()
	o.store.addFlags(fs)
	o.backend.addFlags(fs)
	fs.StringVar(&o.backendName, "backend", "", "the backend of a record that names none (IBM's), as for invoke; the record's own backend key wins")
	fs.DurationVar(&o.wait, "wait", 10*time.Second, "how long a running invoke is given to record the cancellation before the record is deleted")
	fs.DurationVar(&o.submitLease, "submit-lease", runner.DefaultSubmitLease, "how long a live invoke's unfinished submit is waited out before cleanup concludes nothing was submitted")
	fs.DurationVar(&o.retryBudget, "retry-budget", defaultRetryBudget, "how long transient faults of the backend or the Kubernetes API are retried before exiting 75 (the record kept)")
	fs.BoolVar(&o.force, "force", false, "delete the record even when its job's end could not be confirmed (the job may run on, untracked)")
	fs.BoolVar(&o.anyOwner, "any-owner", false, "act on the record even when another run (Argo Workflow or Job) owns it")
	_ = cmd.RegisterFlagCompletionFunc("backend", a.completeBackends)
	cmd.Annotations = map[string]string{helpCredentials: "true"}
	groupFlags(cmd)
	return cmd
}

func (a *app) runCleanup(cmd *cobra.Command, o *cleanupOptions) int {
	res, err := a.cleanup(cmd, o)
	code := ExitDone
	if err != nil {
		code = exitCode(nil, err)
		a.log.Error("cleanup failed", "err", err, "exit", code)
		if res.Reason == "" {
			res.Reason = err.Error()
		}
	}
	res.Reason = a.secrets.Scrub(res.Reason)
	out, _ := json.Marshal(res)
	fmt.Fprintln(a.stdout, string(out))
	return code
}

func (a *app) cleanup(cmd *cobra.Command, o *cleanupOptions) (*runner.CleanupResult, error) {
	res := &runner.CleanupResult{}
	store, err := o.store.build(a)
	if err != nil {
		return res, err
	}
	res.Record = store.Describe()
	cfg, err := o.backend.config(a, o.store.stateDir())
	if err != nil {
		return res, err
	}
	c := &runner.Cleaner{Store: store, Registry: a.registry, Backend: cfg, Log: a.log.With("job", o.store.JobName),
		RetryBudget: o.retryBudget, Wait: o.wait, SubmitLease: o.submitLease, Force: o.force, AnyOwner: o.anyOwner}
	if cmd.Flags().Changed("backend") {
		c.BackendChoice = o.backendName
	}
	// In a pod, cleanup is a task of a run and acts on its run's record
	// only; outside one it is a person's explicit command.
	if c.Owner, err = runner.TaskOwner(cmd.Context(), store); err != nil {
		a.log.Warn("no check that the record is this run's", "err", err)
	}
	res, err = c.Run(cmd.Context())
	a.log.Info("requests sent", "backend", runner.RequestCount(cfg.HTTPClient), "kubernetes", record.KubeRequests(store))
	return res, err
}
