package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// storeOptions select and address the state record; every step has them.
// record.StoreOptions.Open builds the store and its client from them.
type storeOptions struct {
	record.StoreOptions
}

func (o *storeOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.JobName, "job-name", "", "the job's name; its record is the ConfigMap <job-name>-bridge-cm (env JOBNAME too)")
	fs.StringVar(&o.ConfigMap, "configmap", "", "name of the record's ConfigMap, when it is not <job-name>-bridge-cm (e.g. IBM's <name>-slurm-cm); the job name then defaults to it")
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the ConfigMap (env NAMESPACE too; default: the pod's namespace, else the kubeconfig's)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig to reach the Kubernetes API outside a cluster (default $KUBECONFIG)")
	fs.StringVar(&o.StateDir, "state-dir", "", "keep the record in a file in this directory instead of a ConfigMap (default outside a cluster: $XDG_STATE_HOME/bridge-runner, else ~/.local/state/bridge-runner)")
	fs.StringVar(&o.Kind, "store", "auto", "where the record is kept: auto, configmap or file (auto: file with --state-dir or outside a cluster, else configmap)")
}

// build returns the store the options select, and says first where the
// record is kept and why: a record sent to a ConfigMap because KUBECONFIG
// happens to be set is otherwise a surprise.
func (o *storeOptions) build(a *app) (record.Store, error) {
	o.UserAgent = "bridge-runner/" + versionString()
	o.Log = a.log
	s, err := o.Open()
	if err != nil {
		return nil, err
	}
	where := []any{"record", s.Describe(), "why", o.Why()}
	if cm := record.ConfigMapOf(s); cm != nil {
		where = append(where, "server", cm.Server)
	}
	a.log.Info("the job's record", where...)
	return s, nil
}

func (o *storeOptions) stateDir() string { return o.Dir() }

// recordOwner gives a record the step may create its run as owner
// (runner.SetRecordOwner); a pod that cannot be read leaves it without one.
func (a *app) recordOwner(cmd *cobra.Command, store record.Store) {
	owner, err := record.SetRecordOwner(cmd.Context(), store)
	if err != nil {
		a.log.Warn("the record, if created now, has no owner: it stays after the run", "err", err)
	} else if owner != "" {
		a.log.Debug("a record created now goes with its run", "owner", owner)
	}
}

// backendOptions configure how backends are reached (invoke, cleanup).
type backendOptions struct {
	CredentialsDir string
	CAFile         string
	Insecure       bool
}

func (o *backendOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CredentialsDir, "credentials-dir", "/credentials", "directory of the mounted credentials Secret (one file per key, e.g. username and password)")
	o.addTLSFlags(fs)
}

// addTLSFlags binds the flags of how the backend's TLS is verified (also
// create-configmap's, whose probe of a resourceURL reaches the backend).
func (o *backendOptions) addTLSFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM CA bundle to verify the backend's TLS certificate with (in addition to the system roots)")
	fs.BoolVar(&o.Insecure, "insecure-skip-tls-verify", false, "do not verify the backend's TLS certificate (insecure; prefer --ca-file)")
}

func (o *backendOptions) config(a *app, dataDir string) (backends.Config, error) {
	hc, err := runner.NewHTTPClient(o.CAFile, o.Insecure)
	if err != nil {
		return backends.Config{}, err
	}
	if o.Insecure {
		a.log.Warn("TLS verification of the backend is off (--insecure-skip-tls-verify)")
	}
	return backends.Config{
		Credentials: runner.DirCredentials{Dir: o.CredentialsDir, Secrets: a.secrets},
		HTTPClient:  hc,
		DataDir:     dataDir,
		Secrets:     a.secrets,
	}, nil
}

// specFlags binds every job-description field to its flag.
func specFlags(fs *pflag.FlagSet, s *record.Spec) {
	for _, f := range record.Fields {
		fs.StringVar(f.Ptr(s), f.Flag, f.Default, f.Help+" [ConfigMap key "+f.Key+"]")
	}
}

// specGiven reports whether any job-description flag was set (on the
// command line or from the environment), not counting the flags in except.
func specGiven(cmd *cobra.Command, except ...string) bool {
	for _, f := range record.Fields {
		if cmd.Flags().Changed(f.Flag) && !slices.Contains(except, f.Flag) {
			return true
		}
	}
	return false
}

// checkScriptFlag refuses an inline --script whose whole text is one word
// that names a file here or looks like a path (./myjob.sh): the value is the
// script's text, so that would run the text "./myjob.sh" where the job runs
// (exit 127 there, or a #! refusal), not the file the person meant.
func checkScriptFlag(cmd *cobra.Command, s *record.Spec) error {
	v := s.JobScript
	if !cmd.Flags().Changed("script") || !strings.EqualFold(strings.TrimSpace(s.ScriptLocation), record.Inline) || !looksLikePath(v) {
		return nil
	}
	return backends.Invalid("script", "is %q, which is the script's text, not a file to read (%s). "+
		"Pass the file's contents: --script \"$(cat %s)\"; for a script that is already on the remote system add --script-location remote; "+
		"to run that command as the whole script, write it as --script 'exec %s'", v, pathWhy(v), v, v)
}

// looksLikePath: one word, and a file here, or a path's shape (a slash, a
// leading ~, or a script's extension).
func looksLikePath(v string) bool {
	if v == "" || strings.ContainsAny(v, " \t\r\n;|&$`'\"") {
		return false
	}
	if fi, err := os.Stat(v); err == nil && fi.Mode().IsRegular() {
		return true
	}
	return strings.Contains(v, "/") || strings.HasPrefix(v, "~") || slices.Contains(scriptExts, filepath.Ext(v))
}

var scriptExts = []string{".sh", ".bash", ".py", ".slurm", ".sbatch", ".sub", ".job"}

func pathWhy(v string) string {
	if fi, err := os.Stat(v); err == nil && fi.Mode().IsRegular() {
		return "it names a file in this directory"
	}
	return "it looks like a path"
}

// completeBackends completes --backend with the registered names.
func (a *app) completeBackends(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return a.registry.Names(), cobra.ShellCompDirectiveNoFileComp
}

// chooseBackend settles the backend of a description given by flags before
// anything is written: --backend (or BRIDGE_BACKEND) if given, else local
// without a resource URL, else what the URL says (record.SelectBackend).
func (a *app) chooseBackend(cmd *cobra.Command, s *record.Spec, hc *http.Client) error {
	given := ""
	if cmd.Flags().Changed("backend") {
		given = s.Backend
	}
	name, why, err := record.SelectBackend(cmd.Context(), "", given, s.ResourceURL, a.registry.Names(), hc)
	if err != nil {
		return err
	}
	if given == "" {
		a.log.Info("backend chosen", "backend", name, "why", why)
	}
	s.Backend = name
	return nil
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments, got %q; job settings are flags (see --help)", cmd.CommandPath(), args)}
	}
	return nil
}
