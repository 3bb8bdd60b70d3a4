package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

type invokeOptions struct {
	store          storeOptions
	backend        backendOptions
	spec           record.Spec
	outputs        map[string]*string
	terminationLog string
	grace          time.Duration
	submitLease    time.Duration
	retryBudget    time.Duration
	followLogs     bool
	logInterval    time.Duration
	logDir         string
	logTask        string
	s3CredsDir     string
	statusKeys     string
	watcher        bool
	maxRPS         float64
	inputs         *invokeInputs
}

func (a *app) newInvokeCmd() *cobra.Command {
	o := &invokeOptions{outputs: map[string]*string{}}
	cmd := &cobra.Command{
		Use:   "invoke",
		Short: "Submit the job (or re-attach to it), follow it to its end, and exit with its outcome",
		Long: `invoke reads the job description from the record (the ConfigMap <job-name>-bridge-cm, or a file: see Record flags), submits the job to its backend exactly once, follows it to a final state, mirrors the state into the record, and exits with a code that says what happened.

Job flags (--backend, --script, ...) may be given to invoke too: the record is then created from them, or must already hold the same description. A first try refused for its input (exit 2) leaves no record behind.

A retried or restarted invoke never submits twice: it re-attaches to the job recorded in the record, or finds it by the idempotency key stamped into it. Setting kill=true in the record, or SIGTERM, cancels the remote job. Step outputs are written to the files given by --output-* whatever the exit code; logs go to stderr; stdout carries one JSON summary line. With --exit-zero true, a job that reached a final state exits 0 and its outcome is only in the status output (KFP and Argo DAGs publish outputs only of steps that succeed).`,
		Example: `  # Slurm's REST API (slurmrestd); ~/slurm-creds holds username and token:
  bridge-runner invoke --job-name sim-42 --backend slurm \
    --resource-url https://slurm.example.org:6820 \
    --credentials-dir ~/slurm-creds --script "$(cat job.sh)" \
    --job-properties '{"partition":"debug","time_limit":30}'

  # Slurm over SSH through a jump host (ssh-privatekey, known_hosts):
  bridge-runner invoke --job-name sim-43 --backend slurm \
    --resource-url 'ssh://alice@login.internal?proxyjump=alice@bastion.org' \
    --credentials-dir ~/ssh-creds --script "$(cat job.sh)"

  # HTCondor, on its submit host over SSH:
  bridge-runner invoke --job-name scan-7 --backend htcondor \
    --resource-url ssh://alice@submit.example.org \
    --credentials-dir ~/ssh-creds --script "$(cat job.sh)"

  # Ray's Jobs API (a token only when the dashboard wants one):
  bridge-runner invoke --job-name train-1 --backend ray \
    --resource-url http://ray-head.example.org:8265 --script "$(cat train.py)"

  # This machine, no cluster needed:
  bridge-runner invoke --job-name hello --backend local \
    --script 'echo hello from $BRIDGE_JOB_NAME'

  # A workflow step, after create-configmap:
  bridge-runner invoke --job-name "$JOBNAME" --output-status /tmp/outputs/status`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runInvoke(cmd, o)
		},
	}
	fs := cmd.Flags()
	o.store.addFlags(fs)
	o.backend.addFlags(fs)
	specFlags(fs, &o.spec)
	for _, out := range runner.OutputFields {
		o.outputs[out.Name] = fs.String(out.Flag(), "", "write the step output "+out.Name+" ("+out.Help+") to this file")
	}
	fs.StringVar(&o.terminationLog, "termination-log", "/dev/termination-log", "write the final message here when the file exists (Kubernetes shows it as the container's termination message)")
	fs.DurationVar(&o.grace, "grace-period", defaultGrace(), "after SIGTERM, how long cancelling the remote job may take; defaults to $ARGO_TERMINATION_GRACE_PERIOD_SECONDS minus 5s when that is set")
	fs.DurationVar(&o.submitLease, "submit-lease", runner.DefaultSubmitLease, "how long another invoker's unfinished submit is waited out before taking it over")
	fs.DurationVar(&o.retryBudget, "retry-budget", runner.DefaultRetryBudget, "how long transient faults of the backend or the Kubernetes API are retried before exiting 75")
	fs.StringVar(&o.s3CredsDir, "s3-credentials-dir", "/s3credentials", "directory of the mounted S3 credentials Secret (accesskey and secretkey)")
	fs.StringVar(&o.statusKeys, "status-keys", record.StatusKeysAuto, "also write the status keys and words IBM's Bridge Operator reads (KILL for KILLED, unprefixed jobStatus, ...): auto (when IBM's operator owns the record), ibm or ours")
	fs.BoolVar(&o.followLogs, "follow-logs", true, "copy the job's output to stderr while it runs, for backends that can read it")
	fs.DurationVar(&o.logInterval, "log-interval", runner.DefaultLogInterval, "how often a running job's output is read (and shipped, for Slurm with S3: at least every 5s); $BRIDGE_LOG_INTERVAL sets the default")
	fs.StringVar(&o.logDir, "log-dir", os.Getenv("BRIDGE_LOG_DIR"), "where a shared file system shows the job's output in this pod: POD_DIR (the output file by its base name) or REMOTE_DIR:POD_DIR; $BRIDGE_LOG_DIR sets the default")
	fs.StringVar(&o.logTask, "log-task", "", "for an array, the index of the task whose output the step's log follows (Slurm over REST, from the tasks' S3 logs or --log-dir; Slurm over SSH and HTCondor, read on the cluster); unset: the lowest index")
	fs.BoolVar(&o.watcher, "watcher", true, "share one batched status query per cluster with the other invokes of the namespace that use the same backend, URL and credentials (records in ConfigMaps only); false polls this job alone")
	fs.Float64Var(&o.maxRPS, "max-requests-per-second", 1, "the most batched status queries per second that the cluster's watcher sends to one cluster")
	o.inputs = bindInvokeInputs(cmd)
	_ = cmd.RegisterFlagCompletionFunc("backend", a.completeBackends)
	cmd.Annotations = map[string]string{helpCredentials: "true", helpExitCodes: "true"}
	groupFlags(cmd)
	return cmd
}

// defaultGrace leaves 5 s of the pod's termination grace period for writing
// outputs and exiting.
func defaultGrace() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("ARGO_TERMINATION_GRACE_PERIOD_SECONDS")); err == nil && s > 0 {
		return max(time.Duration(min(s, int(maxGrace/time.Second))-5)*time.Second, time.Second)
	}
	return runner.DefaultGrace
}

func (a *app) runInvoke(cmd *cobra.Command, o *invokeOptions) error {
	res, err := a.invoke(cmd, o)
	res.Exit = o.inputs.exit(exitCode(res, err))
	unfinished(res)
	if err != nil {
		a.log.Error("invoke failed", "err", err, "exit", res.Exit)
	}
	paths := map[string]string{}
	for name, p := range o.outputs {
		paths[name] = *p
	}
	a.report(res, paths, o.terminationLog)
	return exitError{res.Exit}
}

// report writes what every end of invoke writes, whatever the exit code:
// the step outputs, the termination log and the one JSON summary line.
// Outputs that could not be written turn a success into exit 75: the
// workflow must not go on to tasks that read outputs that are not there
// (a retry of the step re-attaches to the record and writes them again;
// nothing is submitted twice). A failure's own code stays.
func (a *app) report(res *runner.Result, paths map[string]string, terminationLog string) {
	if werr := runner.WriteOutputs(res, paths); werr != nil {
		if res.Exit == ExitDone {
			res.Exit = record.ExitTempFail
		}
		if a.log != nil {
			a.log.Error("writing step outputs; the step fails so that no task reads outputs that are not there", "err", werr, "exit", res.Exit)
		} else { // logging is not set up when a flag was refused
			fmt.Fprintln(a.stderr, "Error: writing step outputs:", a.secrets.Scrub(werr.Error()))
		}
	}
	if _, serr := os.Stat(terminationLog); serr == nil && res.Message != "" {
		_ = os.WriteFile(terminationLog, []byte(res.Message), 0o644)
	}
	fmt.Fprintln(a.stdout, res.Summary())
}

// reportRefusedInvoke reports an invoke that ended before it ran (a bad
// flag, environment variable or duration), as runInvoke reports any other
// end: the flags that say where the outputs go are read again from args
// and the environment, leniently, since the parse that failed may have
// stopped before them.
func (a *app) reportRefusedInvoke(args []string, msg string, code int) {
	fs := pflag.NewFlagSet("invoke", pflag.ContinueOnError)
	fs.ParseErrorsWhitelist.UnknownFlags = true
	fs.SetOutput(io.Discard)
	names := []string{"job-name", "termination-log"}
	for _, out := range runner.OutputFields {
		names = append(names, out.Flag())
	}
	vals := map[string]*string{}
	for _, n := range names {
		vals[n] = fs.String(n, "", "")
	}
	_ = fs.Parse(args)
	for _, n := range names {
		if v, ok := os.LookupEnv(envName(n)); ok && !fs.Changed(n) {
			*vals[n] = v
		}
	}
	if !fs.Changed("termination-log") && os.Getenv(envName("termination-log")) == "" {
		*vals["termination-log"] = "/dev/termination-log"
	}
	if *vals["job-name"] == "" {
		*vals["job-name"] = os.Getenv("JOBNAME")
	}
	paths := map[string]string{}
	for _, out := range runner.OutputFields {
		paths[out.Name] = *vals[out.Flag()]
	}
	a.report(&runner.Result{Job: *vals["job-name"], Message: msg, Exit: code}, paths, *vals["termination-log"])
}

// unfinished makes a result that exits 75 say so: the step did not finish
// (a retry is to come), so its status names no state, even when the job
// reached one that could not be recorded or whose outputs did not upload;
// a summary never reads DONE or KILLED while invoke exits 75. The message
// keeps the job's state.
func unfinished(res *runner.Result) {
	if res.Exit != ExitTempFail || res.Status == "" {
		return
	}
	if !strings.Contains(res.Message, res.Status) {
		res.Message = "job " + res.Status + ", step not finished: " + res.Message
	}
	res.Status = ""
}

func (a *app) invoke(cmd *cobra.Command, o *invokeOptions) (*runner.Result, error) {
	res := &runner.Result{Job: o.store.JobName}
	fail := func(err error) (*runner.Result, error) {
		res.Message = a.secrets.Scrub(err.Error())
		return res, err
	}
	store, err := o.store.build(a)
	if err != nil {
		return fail(err)
	}
	cfg, err := o.backend.config(a, o.store.stateDir())
	if err != nil {
		return fail(err)
	}
	statusKeys, err := record.ParseStatusKeys(o.statusKeys)
	if err != nil {
		return fail(err)
	}
	// --backend alone names the backend of an existing record that has none
	// (IBM's records); with other description flags it is part of the description.
	var spec *record.Spec
	backendChoice := ""
	if cmd.Flags().Changed("backend") {
		backendChoice = o.spec.Backend
	}
	if specGiven(cmd, "backend") {
		if err := checkScriptFlag(cmd, &o.spec); err != nil {
			return fail(err)
		}
		if err := a.chooseBackend(cmd, &o.spec, cfg.HTTPClient); err != nil {
			return fail(err)
		}
		spec, backendChoice = &o.spec, o.spec.Backend
		a.recordOwner(cmd, store)
	}
	if err := o.checkLogFlags(cmd); err != nil {
		return fail(err)
	}
	iv := &runner.Invoker{
		JobName:     o.store.JobName,
		Store:       store,
		Registry:    a.registry,
		Backend:     cfg,
		Secrets:     a.secrets,
		Log:         a.log.With("job", o.store.JobName),
		Spec:        spec,
		Grace:       o.grace,
		SubmitLease: o.submitLease,
		RetryBudget: o.retryBudget,
		S3:          runner.S3Access{CredentialsDir: o.s3CredsDir, CAFile: o.backend.CAFile, Insecure: o.backend.Insecure},
	}
	iv.StatusKeys, iv.BackendChoice, iv.Resubmit = statusKeys, backendChoice, o.inputs.resubmit
	iv.Watch = runner.WatchConfig{Off: !o.watcher, MaxRequestsPerSecond: o.maxRPS}
	if o.followLogs {
		iv.LogOut, iv.LogInterval, iv.LogDir = a.stderr, o.logInterval, o.logDir
		iv.LogTask, _ = parseLogTask(o.logTask) // checked by checkLogFlags
	}
	if d := runner.DisruptionFor(store); d != nil {
		iv.Detach = d.Detach
		var ferr error
		if iv.Owner, iv.Deadline, ferr = runner.StepFacts(cmd.Context(), d.Client, d.Namespace, d.Pod); ferr != nil {
			a.log.Warn("no check that the record is this task's, no stop before the pod's deadline", "err", ferr)
		}
	} else {
		iv.Deadline = runner.ArgoDeadline()
		var ferr error
		if iv.Owner, ferr = runner.TaskOwner(cmd.Context(), store); ferr != nil {
			a.log.Warn("no check that the record is this task's", "err", ferr)
		}
	}
	err = iv.Run(cmd.Context())
	if err != nil && exitCode(nil, err) == ExitInvalid {
		a.dropRefused(cmd, store)
	}
	sent := []any{"backend", runner.RequestCount(cfg.HTTPClient), "kubernetes", record.KubeRequests(store)}
	if v := record.KubeRequestsByVerb(store); v != "" {
		sent = append(sent, "kubernetes_by_verb", v)
	}
	a.log.Info("requests sent", sent...)
	res = iv.Result()
	res.Job = o.store.JobName
	return res, err
}

// dropRefused undoes a refused first try: the record this invoke created
// goes when nothing was submitted from it, so the corrected command runs
// under the same name (see record.DropUnsubmitted).
func (a *app) dropRefused(cmd *cobra.Command, store record.Store) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 10*time.Second)
	defer cancel()
	dropped, err := record.DropUnsubmitted(ctx, store)
	switch {
	case err != nil:
		a.log.Warn("the refused job's record stays; delete it with cleanup before a rerun under the same name", "record", store.Describe(), "err", err)
	case dropped:
		a.log.Info("nothing was submitted: the record this invoke created is removed, so the corrected command can run under the same name", "record", store.Describe())
	}
}

// checkLogFlags checks --log-dir and --log-interval (or the environment
// variables that set their defaults, for pods whose arguments are fixed).
func (o *invokeOptions) checkLogFlags(cmd *cobra.Command) error {
	if v := os.Getenv("BRIDGE_LOG_INTERVAL"); v != "" && !cmd.Flags().Changed("log-interval") {
		d, err := time.ParseDuration(v)
		if err != nil {
			return backends.Invalid("log-interval", "$BRIDGE_LOG_INTERVAL is %q; give a duration such as 2s", v)
		}
		o.logInterval = d
	}
	if o.maxRPS < 0.01 || o.maxRPS > 100 {
		return backends.Invalid("max-requests-per-second", "is %g; give a rate from 0.01 to 100 (queries per second to one cluster)", o.maxRPS)
	}
	if o.logInterval < 100*time.Millisecond || o.logInterval > time.Hour {
		return backends.Invalid("log-interval", "is %s; give a duration from 100ms to 1h", o.logInterval)
	}
	if _, err := parseLogTask(o.logTask); err != nil {
		return err
	}
	if o.logDir != "" {
		_, err := runner.ParseLogDir(o.logDir)
		return err
	}
	return nil
}

// parseLogTask reads --log-task: nil when unset (the array's lowest index).
func parseLogTask(v string) (*int, error) {
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > backends.MaxArrayIndex {
		return nil, backends.Invalid("log-task", "is %q; give the index of one of the array's tasks (0 to %d), or leave it unset for the lowest", v, backends.MaxArrayIndex)
	}
	return &n, nil
}
