package record

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
)

// StoreOptions select and address a job's state record; every step has
// them (as flags). Open turns them into a Store.
type StoreOptions struct {
	JobName    string
	ConfigMap  string // the record's name when it is not <job>-bridge-cm (e.g. IBM's <name>-slurm-cm)
	Namespace  string // of the ConfigMap; default the pod's, else the kubeconfig's
	Kubeconfig string // default $KUBECONFIG, or the in-cluster config inside a pod
	StateDir   string // a file record in this directory; default DefaultStateDir()
	Kind       string // auto, configmap or file
	UserAgent  string // sent to the Kubernetes API
	// Log, when set, hears a ConfigMap store wait for an API server that
	// does not answer (see ConfigMapStore.Log).
	Log *slog.Logger
}

// Open returns the store the options select: a file with a state
// directory or outside a cluster, else the ConfigMap (ConfigMap, or
// <job>-bridge-cm). A JobName left empty is taken from ConfigMap.
func (o *StoreOptions) Open() (Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	switch o.kind() {
	case "file":
		fs := NewFileStore(o.Dir(), o.JobName)
		if o.ConfigMap != "" {
			fs.Path = filepath.Join(o.Dir(), o.ConfigMap+".json")
		}
		return fs, nil
	case "configmap":
		cfg, ns, err := o.kubeConfig()
		if err != nil {
			return nil, err
		}
		c, err := kube.New(cfg)
		if err != nil {
			return nil, backends.Invalid("kubeconfig", "%v", err)
		}
		if err := ValidateNamespace(ns); err != nil {
			return nil, err
		}
		return &ConfigMapStore{Client: c, Namespace: ns, Name: o.configMapName(), Log: o.Log,
			Server: strings.TrimSpace(cfg.Host + " " + o.serverSource())}, nil
	}
	return nil, backends.Invalid("store", "%q is not a store; use auto, configmap or file", o.Kind)
}

// check validates the names and fills JobName from ConfigMap.
func (o *StoreOptions) check() error {
	if o.ConfigMap != "" && len(validation.IsDNS1123Subdomain(o.ConfigMap)) > 0 {
		return backends.Invalid("configmap", "%q is not a valid ConfigMap name: use lower-case letters, digits, '-' and '.', a letter or digit at both ends and around every '.', at most 253 characters", o.ConfigMap)
	}
	if o.JobName == "" && o.ConfigMap != "" {
		o.JobName = strings.TrimSuffix(o.ConfigMap, "-bridge-cm")
	}
	if o.JobName == "" {
		return backends.Invalid("job-name", "is empty; pass --job-name (or set JOBNAME), or --configmap")
	}
	return ValidateJobName(o.JobName)
}

// configMapName is ConfigMap, else <job>-bridge-cm.
func (o *StoreOptions) configMapName() string {
	if o.ConfigMap != "" {
		return o.ConfigMap
	}
	return ConfigMapName(o.JobName)
}

func (o *StoreOptions) kind() string {
	k, _ := o.kindWhy()
	return k
}

// Why says why the record is kept where it is, for the line every step
// logs first: a record sent to a ConfigMap because KUBECONFIG happens to be
// set is a surprise on a laptop, and the fix is one flag away.
func (o *StoreOptions) Why() string {
	_, why := o.kindWhy()
	return why
}

func (o *StoreOptions) kindWhy() (kind, why string) {
	if o.Kind != "auto" && o.Kind != "" {
		return o.Kind, "--store " + o.Kind
	}
	switch {
	case o.StateDir != "":
		return "file", "--state-dir is given"
	case o.Kubeconfig == "" && InCluster():
		return "configmap", "this runs in a pod; --state-dir keeps the record in a file instead"
	case o.Kubeconfig != "":
		return "configmap", "--kubeconfig is given; --state-dir keeps the record in a file instead"
	case os.Getenv("KUBECONFIG") != "":
		return "configmap", "KUBECONFIG is set (" + os.Getenv("KUBECONFIG") + "); --store file or --state-dir keeps the record in a file instead"
	}
	return "file", "outside a cluster, with no KUBECONFIG"
}

// serverSource says where the API server's address came from.
func (o *StoreOptions) serverSource() string {
	switch {
	case o.Kubeconfig != "":
		return "(from --kubeconfig " + o.Kubeconfig + ")"
	case InCluster():
		return "(in-cluster)"
	case os.Getenv("KUBECONFIG") != "":
		return "(from KUBECONFIG " + os.Getenv("KUBECONFIG") + ")"
	}
	return "(from ~/.kube/config)"
}

// Dir is the directory of the file record (and of local jobs' data). It is
// absolute: a local job's supervisor runs in its job directory, where a
// relative path would name nothing.
func (o *StoreOptions) Dir() string {
	d := cmp.Or(o.StateDir, DefaultStateDir())
	if abs, err := filepath.Abs(d); err == nil {
		return abs
	}
	return d
}

// DefaultStateDir is where the file store and local jobs live when no
// state directory is given: $XDG_STATE_HOME/bridge-runner, else in a pod
// $TMPDIR/bridge-runner (the image's home is read-only, and the templates
// mount a writable /tmp), else ~/.local/state/bridge-runner when this user
// may create it there, else $TMPDIR/bridge-runner: a container started
// outside a pod as another user than the image's (docker run --user, KFP's
// local DockerRunner(user=...)) has a home it cannot write.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "bridge-runner")
	}
	tmp := filepath.Join(os.TempDir(), "bridge-runner")
	if InCluster() {
		return tmp
	}
	if home, err := os.UserHomeDir(); err == nil {
		d := filepath.Join(home, ".local", "state", "bridge-runner")
		if mayCreate(d) {
			return d
		}
	}
	return tmp
}

// mayCreate reports whether this process could create (or write in) dir:
// its nearest existing ancestor is a directory this user may write. It
// creates nothing, since help texts show the default.
func mayCreate(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			return fi.IsDir() && syscall.Access(d, 2 /* W_OK */) == nil
		}
		if !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d) {
			return false
		}
	}
}

// InCluster reports whether this process runs in a pod with a service
// account token.
func InCluster() bool {
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token")
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && err == nil
}

// PodNamespace is the namespace of the pod this runs in ("" outside one).
func PodNamespace() string {
	b, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return strings.TrimSpace(string(b))
}

// maxKubeconfigBytes caps a kubeconfig (client-go reads it whole): a
// kubeconfig with many contexts and inline certificates is some KiB.
const maxKubeconfigBytes = 16 << 20

// kubeConfig finds the API server: in-cluster config inside a pod, else the
// kubeconfig. The namespace comes from the options, the pod, or the
// kubeconfig.
func (o *StoreOptions) kubeConfig() (*rest.Config, string, error) {
	if o.Kubeconfig == "" && InCluster() {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", backends.Invalid("kubeconfig", "in-cluster configuration: %v", err)
		}
		ns := o.Namespace
		if ns == "" {
			ns = PodNamespace()
		}
		return o.tune(cfg), cmp.Or(ns, "default"), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	for _, p := range append([]string{rules.ExplicitPath}, rules.Precedence...) {
		if err := checkLocalFile(p, maxKubeconfigBytes); p != "" && err != nil {
			return nil, "", backends.Invalid("kubeconfig", "%v; pass --kubeconfig naming a kubeconfig file", err)
		}
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

func (o *StoreOptions) tune(cfg *rest.Config) *rest.Config {
	cfg.UserAgent = o.UserAgent
	// One job's few requests never need client-side throttling.
	cfg.QPS, cfg.Burst = 20, 40
	return cfg
}

// SetRecordOwner makes the run this step belongs to the owner of a record
// the store creates (its owner reference, and status.owner from the first
// moment: ConfigMapStore.Run), so that Kubernetes deletes the record with the run
// (argo terminate, kubectl delete workflow, a Job's TTL) and a re-run under
// the same name starts afresh. The run is this pod's controller: the Argo
// Workflow (KFP's runs are Argo Workflows too) or the Job; never the pod,
// whose retries must find the record. It reads this pod (the pod that
// ARGO_POD_NAME or POD_NAME names, else this one inside a cluster), which
// the shipped Role allows; it returns the owner ("" for none: a bare pod,
// outside a pod, a pod of another namespace) and an error when the pod
// could not be read, and the record is then created without an owner.
func SetRecordOwner(ctx context.Context, s Store) (string, error) {
	cm, ok := s.(*ConfigMapStore)
	if !ok {
		return "", nil
	}
	name := cmp.Or(os.Getenv("ARGO_POD_NAME"), os.Getenv("POD_NAME"))
	if name == "" && InCluster() && PodNamespace() == cm.Namespace {
		name = PodName()
	}
	if name == "" {
		return "", nil
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pod := &kube.Pod{}
	if err := cm.Client.Get(rctx, kube.Pods, cm.Namespace, name, pod); err != nil {
		return "", fmt.Errorf("reading this pod %s/%s for the record's owner: %w", cm.Namespace, name, err)
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "", nil
	}
	// Not the controller, and not blocking the owner's deletion: the
	// record only goes with it (blocking would need update on the owner's
	// finalizers, which the Role does not grant).
	cm.Owners = []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}}
	// The run as runner.RunOf names it: the task's owner without its node.
	cm.Run = fmt.Sprintf("%s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
	return cm.Run, nil
}

// KubeRequests reports the requests a ConfigMap store's client sent (0 for
// other stores).
func KubeRequests(s Store) int64 {
	if cm := ConfigMapOf(s); cm != nil && cm.Client != nil {
		return cm.Client.Requests()
	}
	return 0
}

// KubeRequestsByVerb is KubeRequests by verb ("get=3 watch=1 update=5"),
// or "" for a record that is not a ConfigMap.
func KubeRequestsByVerb(s Store) string {
	if cm := ConfigMapOf(s); cm != nil && cm.Client != nil {
		return cm.Client.RequestsByVerb()
	}
	return ""
}

// PodName is this process's pod as Kubernetes names it: Argo's ARGO_POD_NAME,
// else POD_NAME (downward API), else the host name, which Kubernetes sets to
// the pod's name.
func PodName() string {
	for _, v := range []string{"ARGO_POD_NAME", "POD_NAME"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	h, _ := os.Hostname()
	return h
}
