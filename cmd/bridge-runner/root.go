package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/builtin"
	"github.com/bridge-runner/bridge-runner/runner"
)

// Stamped by the Makefile with -ldflags -X.
var (
	version = ""
	commit  = ""
)

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// app carries what every command shares: streams, logging, the registry.
type app struct {
	stdout, stderr io.Writer
	registry       *backends.Registry
	secrets        *runner.Secrets
	log            *slog.Logger

	logFormat, logLevel string
}

// Main runs the CLI and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, registry: builtin.Registry(), secrets: &runner.Secrets{}}
	if len(args) == 0 {
		var ok bool
		if args, ok = defaultCommand(stderr); !ok {
			return ExitInvalid
		}
	}
	root := a.newRootCmd()
	root.SetArgs(args)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	go func() {
		if s, ok := <-sigs; ok {
			cancel(fmt.Errorf("%w (%s)", runner.ErrTerminated, s))
		}
	}()
	cmd, err := root.ExecuteContextC(ctx)
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case err != nil:
		msg := a.secrets.Scrub(err.Error())
		fmt.Fprintln(stderr, "Error:", msg)
		code := exitCode(nil, usageError{err})
		// The commands that print a summary on every other end print one
		// for a refused flag too.
		short := strings.TrimSpace(strings.Split(msg, "\nSee '")[0])
		switch {
		case cmd != nil && cmd.Name() == "invoke":
			a.reportRefusedInvoke(args, short, code)
		case cmd != nil && cmd.Name() == "cleanup":
			out, _ := json.Marshal(runner.CleanupResult{Reason: short})
			fmt.Fprintln(stdout, string(out))
		}
		return code
	}
	return ExitDone
}

// podContractVars name the job in the environment of a pod started with an
// image and environment only: IBM's Bridge Operator (and IBM's KFP
// components) set JOBNAME and NAMESPACE, our own pods may set BRIDGE_JOB_NAME.
var podContractVars = []string{"JOBNAME", "BRIDGE_JOB_NAME"}

// defaultCommand is what bridge-runner runs without arguments. IBM's
// controller starts its pod image with no arguments, so with a job named in
// the environment that is invoke; otherwise it says what it needs and the
// caller exits 2: printing help and exiting 0 would show a pod Succeeded
// with nothing submitted.
func defaultCommand(stderr io.Writer) ([]string, bool) {
	for _, v := range podContractVars {
		if os.Getenv(v) != "" {
			fmt.Fprintf(stderr, "bridge-runner: no command given and %s is set (a pod started with environment only, as IBM's Bridge Operator starts it): running invoke\n", v)
			return []string{"invoke"}, true
		}
	}
	fmt.Fprint(stderr, `Error: no command given. bridge-runner needs either
  a command:  bridge-runner invoke --job-name NAME --backend slurm --resource-url URL --script "$(cat job.sh)"
              (or create-configmap, cleanup, status, operator, version), or
  a pod's environment naming the job (IBM's Bridge Operator contract): JOBNAME, and NAMESPACE,
              which runs invoke on the record <JOBNAME>-bridge-cm.
See 'bridge-runner --help'.
`)
	return nil, false
}

// exitError carries a command's exit code out of cobra after the command
// has already reported what happened.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func (a *app) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "bridge-runner",
		Short: "Run a workflow step's job on Slurm, LSF, Ray, the IBM Quantum Compute service or this machine",
		Long: `bridge-runner turns a job on a system that Kubernetes does not manage into an
ordinary workflow step. It submits the job over the system's HTTP API, follows it
to its end, mirrors its state into a ConfigMap (or a file), and exits with a code
that tells the workflow what happened:

  0 DONE   1 FAILED   2 invalid input (nothing submitted)   3 KILLED
  4 UNKNOWN (lost track of the job)   5 FAILED by the infrastructure (a retry
  submits anew)   75 temporary failure (a retry re-attaches)

Every flag can also be given as an environment variable: BRIDGE_ and the flag's
name in upper case with - as _ (--resource-url is BRIDGE_RESOURCE_URL).`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			if err := checkDurations(cmd); err != nil {
				return err
			}
			return a.setupLogging()
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("bridge-runner {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nSee '%s --help'.", err, c.CommandPath())}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text or json")
	pf.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.AddCommand(a.newCreateCmd(), a.newInvokeCmd(), a.newCleanupCmd(), a.newOperatorCmd(), a.newAgentCmd(), a.newStatusCmd(), a.newVersionCmd())
	wrappedHelp(root) // every command's help, the root's too, fits the terminal
	return root
}

func (a *app) setupLogging() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level: %q is not a level; use debug, info, warn or error", a.logLevel)}
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch a.logFormat {
	case "text":
		h = slog.NewTextHandler(terminalLog(a.stderr, opts))
	case "json":
		h = slog.NewJSONHandler(a.stderr, opts)
	default:
		return usageError{fmt.Errorf("--log-format: %q is not a format; use text or json", a.logFormat)}
	}
	a.log = slog.New(runner.NewScrubHandler(h, a.secrets))
	// client-go logs through klog; send it to the same place, scrubbed.
	// Its verbose levels (klog.V(n), n ≥ 1: feature gates, request
	// tracing) are its developers', not ours: --log-level debug shows
	// bridge-runner's own detail, not ten lines of client-go's defaults.
	klog.SetSlogLogger(slog.New(infoAndUp{a.log.Handler()}).With("source", "client-go"))
	return nil
}

// infoAndUp passes only records at Info or above (klog's V(0) and its
// errors) to h.
type infoAndUp struct{ slog.Handler }

func (h infoAndUp) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo && h.Handler.Enabled(ctx, l)
}

func (h infoAndUp) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h infoAndUp) WithAttrs(as []slog.Attr) slog.Handler { return infoAndUp{h.Handler.WithAttrs(as)} }
func (h infoAndUp) WithGroup(g string) slog.Handler       { return infoAndUp{h.Handler.WithGroup(g)} }

// envAliases are IBM Bridge Operator's variables, honoured for compatibility.
var envAliases = map[string][]string{
	"job-name":  {"JOBNAME"},
	"namespace": {"NAMESPACE"},
}

// envName is the BRIDGE_* variable for a flag.
func envName(flag string) string {
	return "BRIDGE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// noEnv annotates a flag that no environment variable sets.
const noEnv = "bridge-runner/no-env"

// applyEnv sets every flag not given on the command line from its
// environment variable, if set. Flags win over the environment.
func applyEnv(cmd *cobra.Command) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" || f.Name == "version" || f.Annotations[noEnv] != nil {
			return
		}
		for _, name := range append([]string{envName(f.Name)}, envAliases[f.Name]...) {
			if v, ok := os.LookupEnv(name); ok {
				if err := cmd.Flags().Set(f.Name, v); err != nil {
					errs = append(errs, usageError{fmt.Errorf("environment variable %s for --%s: %w", name, f.Name, err)})
				}
				return
			}
		}
	})
	return errors.Join(errs...)
}
