package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bridge-runner/bridge-runner/agent"
	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/metrics"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/operator"
	"github.com/bridge-runner/bridge-runner/record"
	"github.com/bridge-runner/bridge-runner/runner"
)

// agentOptions are the agent's flags: a contract with the operator, which
// builds each BridgeCluster's agent Deployment from them.
type agentOptions struct {
	cluster, backend, resourceURL, credentialsDir string
	namespaces                                    []string
	interval                                      time.Duration
	healthAddr, metricsAddr                       string
}

func (a *app) newAgentCmd() *cobra.Command {
	o := &agentOptions{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Serve one cluster: one batched status query per interval for every record that names it",
		Long: `agent is a cluster's long-lived watcher (the operator runs one per BridgeCluster).
It lists and watches the ConfigMap records labelled bridge-runner.io/cluster=<cluster>
in the given namespaces, asks the cluster for all their jobs in one batched query
per --query-interval (the site's budget, whatever the number of jobs), and writes
a sealed observation into a record when its job's state changed. A heartbeat
ConfigMap bridge-runner-agent-<cluster> per namespace tells the steps that it
works; while it does they neither poll nor elect a watcher of their own. It
never submits, cancels or writes a job's state: an observation makes the step
ask the backend for its own job. The Kubernetes API is reached in-cluster, else
through $KUBECONFIG.`,
		Example: `  bridge-runner agent --cluster hpc1 --backend slurm \
    --resource-url https://slurm.example.org:6820 \
    --credentials-dir /credentials --namespaces team-a,team-b \
    --query-interval 30s`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runAgent(cmd.Context(), o) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.cluster, "cluster", "", "the cluster served: the value of the label bridge-runner.io/cluster on its records (required)")
	fs.StringVar(&o.backend, "backend", "", "the cluster's backend, as the records name it (e.g. slurm)")
	fs.StringVar(&o.resourceURL, "resource-url", "", "the cluster's URL, exactly as the records' resourceURL")
	fs.StringVar(&o.credentialsDir, "credentials-dir", "", "directory of the cluster's mounted Secret (required: what the agent writes is authenticated with a key derived from it)")
	fs.StringSliceVar(&o.namespaces, "namespaces", nil, "namespaces whose records are served, comma-separated (default $POD_NAMESPACE)")
	fs.DurationVar(&o.interval, "query-interval", agent.DefaultInterval, fmt.Sprintf("the least time between two batched queries to the cluster, whatever the number of jobs or namespaces (%s to %s)", agent.MinInterval, agent.MaxInterval))
	fs.StringVar(&o.healthAddr, "health-addr", ":8081", "where to serve /healthz and /readyz (ready once a query answered)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "where to serve Prometheus metrics (/metrics)")
	return cmd
}

// config checks the flags (exit 2 naming the flag) and builds the agent's
// configuration, without its clients.
func (o *agentOptions) config(a *app) (agent.Config, error) {
	if len(o.namespaces) == 0 {
		if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
			o.namespaces = []string{ns}
		}
	}
	if o.cluster == "" {
		return agent.Config{}, backends.Invalid("cluster", "is empty; give the name of the cluster served (the value of the label %s on its records)", record.LabelCluster)
	}
	if err := record.CheckCluster(o.cluster); err != nil {
		return agent.Config{}, err
	}
	if o.credentialsDir == "" {
		return agent.Config{}, backends.Invalid("credentials-dir", "is empty; give the directory of the cluster's mounted Secret")
	}
	if fi, err := os.Stat(o.credentialsDir); err != nil || !fi.IsDir() {
		return agent.Config{}, backends.Invalid("credentials-dir", "%q is not a readable directory; mount the cluster's Secret there", o.credentialsDir)
	}
	if o.resourceURL == "" {
		return agent.Config{}, backends.Invalid("resource-url", "is empty; give the cluster's URL exactly as its records' resourceURL")
	}
	for _, f := range []struct{ name, addr string }{{"health-addr", o.healthAddr}, {"metrics-addr", o.metricsAddr}} {
		if _, port, err := net.SplitHostPort(f.addr); err != nil || port == "" {
			return agent.Config{}, backends.Invalid(f.name, "%q is not host:port (e.g. :8080)", f.addr)
		}
	}
	backend := o.backend
	if backend == "" {
		return agent.Config{}, backends.Invalid("backend", "is empty; give the cluster's backend: %s", strings.Join(a.registry.Names(), ", "))
	}
	cfg := agent.Config{Cluster: o.cluster, Backend: backend, ResourceURL: o.resourceURL, Namespaces: o.namespaces, Interval: o.interval,
		Key: runner.ClusterKey(backend, o.resourceURL, o.credentialsDir), ID: runner.DefaultHolder(), Log: a.log}
	return cfg, agent.Check(cfg)
}

func (a *app) runAgent(ctx context.Context, o *agentOptions) error {
	cfg, err := o.config(a)
	if err != nil {
		return usageError{err}
	}
	bcfg, err := (&backendOptions{CredentialsDir: o.credentialsDir}).config(a, "")
	if err != nil {
		return usageError{err}
	}
	bcfg.URL, bcfg.Logger = o.resourceURL, a.log.With("backend", cfg.Backend)
	be, err := a.registry.New(cfg.Backend, bcfg)
	if err != nil {
		return usageError{err}
	}
	sb, ok := be.(backends.StatusBatcher)
	if !ok {
		return usageError{backends.Invalid("backend", "%s has no batched status query; an agent serves only backends that have one", cfg.Backend)}
	}
	rc, err := operator.LoadConfig("", "bridge-runner-agent/"+versionString(), 50, 100)
	if err != nil {
		return usageError{err}
	}
	if cfg.Kube, err = kube.New(rc); err != nil {
		return usageError{backends.Invalid("kubeconfig", "%v", err)}
	}
	cfg.Batcher = sb
	cfg.Discoverer, _ = be.(backends.Discoverer)
	cfg.Limiter, _ = be.(backends.ArrayLimiter)
	cfg.Loader, _ = be.(backends.LoadPublisher)
	ag, err := agent.New(cfg)
	if err != nil {
		return usageError{err}
	}
	if err := serveAgent(ctx, o, ag); err != nil {
		return usageError{err}
	}
	a.log.Info("serving the cluster", "cluster", cfg.Cluster, "namespaces", strings.Join(cfg.Namespaces, ","), "query_interval", cfg.Interval)
	_ = ag.Run(ctx)
	if c, ok := be.(interface{ Close() error }); ok {
		_ = c.Close()
	}
	return nil
}

// serveAgent serves the probes and the metrics until ctx ends.
func serveAgent(ctx context.Context, o *agentOptions, ag *agent.Agent) error {
	text := "text/plain; charset=utf-8"
	ok := func() (int, string, string) { return http.StatusOK, text, "ok\n" }
	health := map[string]metrics.Route{
		"/healthz": ok,
		"/readyz": func() (int, string, string) {
			if !ag.Ready() {
				return http.StatusServiceUnavailable, text, "not ready: no batched query has answered yet\n"
			}
			return ok()
		},
	}
	routes := map[string]map[string]metrics.Route{o.healthAddr: health, o.metricsAddr: {"/metrics": ag.Metrics().Registry.Route()}}
	if o.healthAddr == o.metricsAddr {
		health["/metrics"] = ag.Metrics().Registry.Route()
		delete(routes, o.metricsAddr)
		routes[o.healthAddr] = health
	}
	for addr, r := range routes {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return backends.Invalid(flagOf(o, addr), "cannot listen on %s: %v", addr, err)
		}
		go metrics.Serve(ctx, l, r)
	}
	return nil
}

func flagOf(o *agentOptions, addr string) string {
	if addr == o.healthAddr {
		return "health-addr"
	}
	return "metrics-addr"
}
