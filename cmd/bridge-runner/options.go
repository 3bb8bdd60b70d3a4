package main

import (
	"cmp"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/runner"
)

// storeOptions select and address the state record; every step has them.
type storeOptions struct {
	// kubeRequests reports the requests sent to the Kubernetes API.
	kubeRequests func() int64
	// kube is the API server's configuration once a ConfigMap store is built.
	kube *rest.Config

	JobName    string
	ConfigMap  string
	Namespace  string
	Kubeconfig string
	StateDir   string
	Store      string
}

func (o *storeOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.JobName, "job-name", "", "the job's name; its record is the ConfigMap <job-name>-bridge-cm (env JOBNAME too)")
	fs.StringVar(&o.ConfigMap, "configmap", "", "name of the record's ConfigMap, when it is not <job-name>-bridge-cm (e.g. IBM's <name>-slurm-cm); the job name then defaults to it")
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the ConfigMap (env NAMESPACE too; default: the pod's namespace, else the kubeconfig's)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig to reach the Kubernetes API outside a cluster (default $KUBECONFIG)")
	fs.StringVar(&o.StateDir, "state-dir", "", "keep the record in a file in this directory instead of a ConfigMap (default outside a cluster: "+defaultStateDir()+")")
	fs.StringVar(&o.Store, "store", "auto", "where the record is kept: auto, configmap or file (auto: file with --state-dir or outside a cluster, else configmap)")
}

func inCluster() bool {
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token")
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && err == nil
}

// build returns the store the options select.
func (o *storeOptions) build() (runner.Store, error) {
	if o.ConfigMap != "" && len(validation.IsDNS1123Subdomain(o.ConfigMap)) > 0 {
		return nil, backends.Invalid("configmap", "%q is not a valid ConfigMap name: use lower-case letters, digits, '-' and '.', a letter or digit at both ends and around every '.', at most 253 characters", o.ConfigMap)
	}
	if o.JobName == "" && o.ConfigMap != "" {
		o.JobName = strings.TrimSuffix(o.ConfigMap, "-bridge-cm")
	}
	if o.JobName == "" {
		return nil, backends.Invalid("job-name", "is empty; pass --job-name (or set JOBNAME), or --configmap")
	}
	if err := runner.ValidateJobName(o.JobName); err != nil {
		return nil, err
	}
	kind := o.Store
	if kind == "auto" {
		switch {
		case o.StateDir != "":
			kind = "file"
		case inCluster() || o.Kubeconfig != "" || os.Getenv("KUBECONFIG") != "":
			kind = "configmap"
		default:
			kind = "file"
		}
	}
	switch kind {
	case "file":
		fs := runner.NewFileStore(o.stateDir(), o.JobName)
		if o.ConfigMap != "" {
			fs.Path = filepath.Join(o.stateDir(), o.ConfigMap+".json")
		}
		return fs, nil
	case "configmap":
		cfg, ns, err := o.kubeConfig()
		if err != nil {
			return nil, err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, backends.Invalid("kubeconfig", "%v", err)
		}
		if err := runner.ValidateNamespace(ns); err != nil {
			return nil, err
		}
		o.kube = cfg
		return &runner.ConfigMapStore{Client: cs, Namespace: ns, Name: o.configMapName()}, nil
	}
	return nil, backends.Invalid("store", "%q is not a store; use auto, configmap or file", o.Store)
}

// configMapName is --configmap, else <job-name>-bridge-cm.
func (o *storeOptions) configMapName() string {
	if o.ConfigMap != "" {
		return o.ConfigMap
	}
	return runner.ConfigMapName(o.JobName)
}

// stateDir is absolute: a local job's supervisor runs in its job
// directory, where a relative path would name nothing.
func (o *storeOptions) stateDir() string {
	d := o.StateDir
	if d == "" {
		d = defaultStateDir()
	}
	if abs, err := filepath.Abs(d); err == nil {
		return abs
	}
	return d
}

// kubeConfig finds the API server: in-cluster config inside a pod, else the
// kubeconfig. The namespace comes from the flag, the pod, or the kubeconfig.
func (o *storeOptions) kubeConfig() (*rest.Config, string, error) {
	if o.Kubeconfig == "" && inCluster() {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", backends.Invalid("kubeconfig", "in-cluster configuration: %v", err)
		}
		ns := o.Namespace
		if ns == "" {
			ns = podNamespace()
		}
		return o.tune(cfg), cmp.Or(ns, "default"), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", backends.Invalid("kubeconfig", "%v; pass --kubeconfig, or --state-dir to keep state in a file", err)
	}
	ns := o.Namespace
	if ns == "" {
		ns, _, _ = cc.Namespace()
	}
	return o.tune(cfg), cmp.Or(ns, "default"), nil
}

func (o *storeOptions) tune(cfg *rest.Config) *rest.Config {
	// client-go builds a transport for each client made from cfg; the count
	// is the sum over all of them.
	var counters []func() int64
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		counted := runner.CountRequests(rt)
		counters = append(counters, runner.RequestCounter(counted))
		return counted
	})
	o.kubeRequests = func() (n int64) {
		for _, c := range counters {
			n += c()
		}
		return n
	}
	cfg.UserAgent = "bridge-runner/" + versionString()
	// One job's few requests never need client-side throttling.
	cfg.QPS, cfg.Burst = 20, 40
	return cfg
}

// podNamespace is the namespace of the pod this runs in.
func podNamespace() string {
	b, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return strings.TrimSpace(string(b))
}

// backendOptions configure how backends are reached (invoke, cleanup).
type backendOptions struct {
	CredentialsDir string
	CAFile         string
	Insecure       bool
}

func (o *backendOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.CredentialsDir, "credentials-dir", "/credentials", "directory of the mounted credentials Secret (one file per key, e.g. username and password)")
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
func specFlags(fs *pflag.FlagSet, s *runner.Spec) {
	for _, f := range runner.Fields {
		fs.StringVar(f.Ptr(s), f.Flag, f.Default, f.Help+" [ConfigMap key "+f.Key+"]")
	}
}

// specGiven reports whether any job-description flag was set (on the
// command line or from the environment), not counting the flags in except.
func specGiven(cmd *cobra.Command, except ...string) bool {
	for _, f := range runner.Fields {
		if cmd.Flags().Changed(f.Flag) && !slices.Contains(except, f.Flag) {
			return true
		}
	}
	return false
}

// completeBackends completes --backend with the registered names.
func (a *app) completeBackends(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return a.registry.Names(), cobra.ShellCompDirectiveNoFileComp
}

// chooseBackend settles the backend of a description given by flags before
// anything is written: --backend (or BRIDGE_BACKEND) if given, else local
// without a resource URL, else what the URL says (runner.SelectBackend).
func (a *app) chooseBackend(cmd *cobra.Command, s *runner.Spec, hc *http.Client) error {
	given := ""
	if cmd.Flags().Changed("backend") {
		given = s.Backend
	}
	name, why, err := runner.SelectBackend(cmd.Context(), "", given, s.ResourceURL, a.registry.Names(), hc)
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
