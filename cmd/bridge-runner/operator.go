package main

import (
	"cmp"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/quantum"
	"github.com/bridge-runner/bridge-runner/operator"
	"github.com/bridge-runner/bridge-runner/record"
)

type operatorOptions struct {
	kubeconfig string
	qps        float32
	burst      int
	o          operator.Options
}

func (a *app) newOperatorCmd() *cobra.Command {
	opts := &operatorOptions{}
	o := &opts.o
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Reconcile BridgeJobs (IBM's bridgejob.ibm.com/v1alpha1): a record and an invoke Job for each",
		Long: `operator runs the BridgeJob controller. For each BridgeJob it checks the spec
and its Secrets, creates the record ConfigMap <name>-bridge-cm and a Job whose pod
runs bridge-runner invoke (credentials at /credentials, S3 ones at /s3credentials),
and mirrors the record's state into the BridgeJob's status. spec.kill: true and
deleting the BridgeJob cancel the remote job. BridgeClusters a BridgeJob lists in
spec.clusters become its record's targets (each cluster's Secret at
/targets/<name>); their status is the load the BridgeJobs' placements saw (the
operator probes no cluster itself). Install it with
kubectl apply -k deploy/operator (every namespace) or deploy/operator-namespaced.

What a BridgeJob may reach is the admin's choice (README, Security): the
operator's image (--allowed-images adds others), Secrets that carry the label
bridge-runner.io/allow-bridgejobs=true (or --allowed-secrets), no local backend
(--allow-local), and pods that run as the BridgeJob's own ServiceAccount.`,
		Example: `  # In its Deployment (deploy/operator):
  bridge-runner operator --job-image ghcr.io/bridge-runner/bridge-runner:v0.1.0

  # From a laptop, for one namespace, without leader election:
  bridge-runner operator --kubeconfig ~/.kube/config --namespace dev \
    --leader-elect=false --job-image my/bridge-runner:dev --allow-local`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := record.ParseStatusKeys(o.StatusKeys); err != nil {
				return usageError{err}
			}
			if a := o.MetricsAddr; a != "0" && a != "" {
				if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
					return usageError{backends.Invalid("metrics-bind-address", "%q is not host:port (e.g. :8080); give \"0\" to serve no metrics and probes", a)}
				}
			}
			if o.JobImage == "" {
				return usageError{backends.Invalid("job-image", "is empty; give the bridge-runner image the jobs' pods run")}
			}
			if p := o.JobImagePullPolicy; p != "" && !slices.Contains([]string{"Always", "IfNotPresent", "Never"}, p) {
				return usageError{backends.Invalid("job-image-pull-policy", "%q is not a pull policy; give Always, IfNotPresent or Never", p)}
			}
			if b := o.DefaultBackend; b != "" && !slices.Contains(a.registry.Names(), b) {
				return usageError{backends.Invalid("backend", "unknown backend %q; use one of: %s", b, strings.Join(a.registry.Names(), ", "))}
			}
			cfg, err := operator.LoadConfig(opts.kubeconfig, "bridge-runner-operator/"+versionString(), opts.qps, opts.burst)
			if err != nil {
				return usageError{err}
			}
			o.Config, o.Log, o.Backends, o.Registry = cfg, a.log, a.registry.Names(), a.registry
			o.SpecChecks = map[string]func(backends.Job) error{quantum.Name: quantum.CheckSpec}
			if err := operator.Run(cmd.Context(), *o); err != nil {
				a.log.Error("operator stopped", "err", err)
				return exitError{ExitTempFail}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, else $KUBECONFIG)")
	fs.Float32Var(&opts.qps, "kube-qps", 200, "requests a second to the Kubernetes API, sustained")
	fs.IntVar(&opts.burst, "kube-burst", 400, "requests to the Kubernetes API in a burst")
	fs.StringVar(&o.Namespace, "namespace", "", "watch BridgeJobs in this namespace only (default: every namespace)")
	fs.StringVar(&o.JobImage, "job-image", "", "image of the jobs' pods: the operator's own (a BridgeJob's spec.image is ignored unless --allowed-images lists it)")
	fs.StringVar(&o.JobImagePullPolicy, "job-image-pull-policy", "", "how the jobs' pods pull --job-image: Always, IfNotPresent or Never (default: Kubernetes' default for its tag); a BridgeJob's imagepullpolicy applies only to an image --allowed-images lets it name")
	fs.StringSliceVar(&o.AllowedImages, "allowed-images", nil, "images a BridgeJob's spec.image may name besides --job-image (comma-separated; an entry ending in * is a prefix)")
	fs.StringSliceVar(&o.AllowedSecrets, "allowed-secrets", nil, "Secrets BridgeJobs may mount without the opt-in label: name (any namespace) or namespace/name, comma-separated")
	fs.StringVar(&o.SecretOptIn, "secret-opt-in-label", operator.SecretOptInLabel, "the label (value \"true\") by which a Secret lets BridgeJobs of its namespace mount it; empty: the operator reads no Secret and only --allowed-secrets count")
	fs.BoolVar(&o.AllowLocal, "allow-local", false, "let BridgeJobs use the local backend, which runs their script inside the Job's pod")
	fs.StringVar(&o.DefaultBackend, "backend", "", "backend of a BridgeJob that names none and whose resourceURL does not say (as invoke's --backend)")
	fs.StringVar(&o.JobServiceAccount, "job-service-account", "", "one ServiceAccount for every job's pods (default: each BridgeJob gets its own, allowed only its record)")
	fs.StringVar(&o.StatusKeys, "status-keys", record.StatusKeysAuto, "IBM's status words too (KILL for KILLED in status.jobstatus and the record): auto (IBM's, as the record is a BridgeJob's), ibm or ours")
	fs.IntVar(&o.Workers, "workers", 4, "BridgeJobs reconciled at once")
	fs.DurationVar(&o.Resync, "resync", 10*time.Minute, "how often every BridgeJob is reconciled even without a change")
	fs.DurationVar(&o.DeleteTimeout, "delete-timeout", 2*time.Minute, "how long a deleted BridgeJob waits for its cancelled job to report a final state")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "where to serve Prometheus metrics (/metrics) and the probes (/healthz, /readyz); \"0\" for nowhere")
	fs.BoolVar(&o.LeaderElection, "leader-elect", true, "hold a Lease so that one of several replicas reconciles")
	fs.StringVar(&o.LeaseNamespace, "lease-namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), ""), "namespace of the leader election Lease (default $POD_NAMESPACE)")
	fs.StringVar(&o.LeaseName, "lease-name", "bridge-runner-operator", "name of the leader election Lease")
	fs.StringVar(&o.Identity, "identity", os.Getenv("POD_NAME"), "this replica's name in the Lease (default $POD_NAME, else host_pid)")
	return cmd
}
