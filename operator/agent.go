package operator

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// Every BridgeCluster with its agent enabled (the default) has one
// long-lived agent, `bridge-runner agent`, which the operator starts and
// keeps in the cluster's namespace: a Deployment of one pod running the
// operator's own job image, as the ServiceAccount bridge-runner-agent-<name>
// whose Role allows ConfigMaps only (the records it serves and its
// heartbeat), with the cluster's Secret mounted read-only and no other. The
// agent reads no Secret through the API. Its objects are owned by the
// BridgeCluster, so they go with it; disabling the agent deletes them.

// LabelCluster names the cluster on the records of a BridgeJob placed on it
// (and on the agent's objects): the agent serves the records labelled so.
const LabelCluster = record.LabelCluster

const (
	// labelClusterNamespace marks the agent's grants in another namespace
	// with the cluster's own.
	labelClusterNamespace = "bridge-runner.io/cluster-namespace"
	// managedByOperator is the managed-by label of the agents' objects
	// (the records' is bridge-runner, which the operator's record watch
	// selects by its own label).
	managedByOperator = "bridge-runner-operator"
	// agentCredentialsDir is where the agent finds the cluster's Secret.
	agentCredentialsDir = "/var/run/bridge-runner/cluster"
	// agentHealthPort serves /healthz and /readyz, agentMetricsPort
	// Prometheus' /metrics (the agent's contract).
	agentHealthPort  = 8081
	agentMetricsPort = 8080
)

// imageGroup is the group of the image's user (Dockerfile: USER
// 65532:65532). The agent's pod runs with it as fsGroup: the kubelet then
// gives the Secret's files (mode 0400, owned by root) to that group,
// readable, so the non-root agent can read its credentials (without it the
// agent exited "holds no credentials" in a real cluster).
const imageGroup = 65532

// The agent's budget (spec.agent.queryInterval): the least time between two
// batched queries to the cluster, whatever the number of jobs and
// namespaces. From several a second down to one per half an hour: sites
// ask for one per 60 to 120 s.
const (
	defaultQueryInterval = 2 * time.Second
	minQueryInterval     = 100 * time.Millisecond
	maxQueryInterval     = 30 * time.Minute
)

// The BridgeCluster's conditions about its agent.
const (
	CondAgentReady             = "AgentReady"
	CondAgentNamespacesRefused = "AgentNamespacesRefused"
)

// AgentName names a cluster's agent: its Deployment, ServiceAccount, Role
// and RoleBinding, and (the agent's) its heartbeat ConfigMaps.
func AgentName(cluster string) string { return "bridge-runner-agent-" + cluster }

// agentEnabled: spec.agent.enabled, true when unset.
func agentEnabled(bc *BridgeCluster) bool {
	return bc.Spec.Agent == nil || bc.Spec.Agent.Enabled == nil || *bc.Spec.Agent.Enabled
}

// agentInterval is spec.agent.queryInterval, checked (the CRD's pattern
// takes only a duration's shape; its range is checked here, and an object
// stored before the schema had it reaches the operator too).
func agentInterval(bc *BridgeCluster) (time.Duration, error) {
	if bc.Spec.Agent == nil || strings.TrimSpace(bc.Spec.Agent.QueryInterval) == "" {
		return defaultQueryInterval, nil
	}
	v := strings.TrimSpace(bc.Spec.Agent.QueryInterval)
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, &fieldError{"spec.agent.queryInterval", fmt.Sprintf("%q is not a duration; give one like 2s, 500ms or 2m (the least time between two queries to the cluster)", v)}
	}
	if d < minQueryInterval || d > maxQueryInterval {
		return 0, &fieldError{"spec.agent.queryInterval", fmt.Sprintf("%s is outside %s..%s; give the least time between two queries to the cluster within that range", v, minQueryInterval, maxQueryInterval)}
	}
	return d, nil
}

// agentNamespaces are the namespaces spec.agent.namespaces asks for
// besides the cluster's own: each checked, in order, once.
func agentNamespaces(bc *BridgeCluster) ([]string, error) {
	if bc.Spec.Agent == nil {
		return nil, nil
	}
	var out []string
	for i, ns := range bc.Spec.Agent.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, &fieldError{fmt.Sprintf("spec.agent.namespaces[%d]", i), fmt.Sprintf("%q is not a namespace's name; name a namespace whose records the agent serves", ns)}
		}
		if ns != bc.Namespace && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// checkAgentName: the cluster's name fits where the agent carries it (a
// label value, a flag, the names of its objects).
func checkAgentName(bc *BridgeCluster) error {
	if !clusterName.MatchString(bc.Name) {
		return &fieldError{"metadata.name", fmt.Sprintf("%q is too long or not lower-case letters, digits and dashes for an agent (1 to 40 of them): "+
			"rename the BridgeCluster or set spec.agent.enabled to false", bc.Name)}
	}
	return nil
}

// agentArgs are the agent's command line: its contract with `bridge-runner
// agent` (flags and their spelling are fixed there).
func agentArgs(bc *BridgeCluster, backend string, interval time.Duration, namespaces []string) []string {
	return []string{"agent",
		"--cluster", bc.Name,
		"--backend", backend,
		"--resource-url", strings.TrimSpace(bc.Spec.ResourceURL),
		"--credentials-dir", agentCredentialsDir,
		"--namespaces", strings.Join(namespaces, ","),
		"--query-interval", interval.String(),
	}
}

// agentLabels are on all of the agent's objects and its pod.
func agentLabels(bc *BridgeCluster) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "bridge-runner-agent",
		"app.kubernetes.io/managed-by": managedByOperator,
		LabelCluster:                   bc.Name,
	}
}

func clusterOwnerRef(bc *BridgeCluster) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: GroupVersion.String(), Kind: "BridgeCluster", Name: bc.Name, UID: bc.UID,
		Controller: &t, BlockOwnerDeletion: &t}
}

// ownedByCluster: bc is obj's controller.
func ownedByCluster(obj metav1.Object, bc *BridgeCluster) bool {
	o := metav1.GetControllerOf(obj)
	return o != nil && o.UID == bc.UID && o.Kind == "BridgeCluster" && o.APIVersion == GroupVersion.String()
}

// agentDeployment is the agent's Deployment: one replica, replaced (not
// rolled: two agents of one cluster would both spend its budget), with
// the least a pod can be given.
func (r *reconciler) agentDeployment(bc *BridgeCluster, backend string, interval time.Duration, namespaces []string) *Deployment {
	name := AgentName(bc.Name)
	yes, no := true, false
	one, mode, group := int32(1), int32(0o400), int64(imageGroup)
	c := AgentContainer{Name: "agent", Image: r.o.JobImage, ImagePullPolicy: r.o.JobImagePullPolicy,
		Args: agentArgs(bc, backend, interval, namespaces),
		Env:  []kube.EnvVar{fieldEnv("POD_NAMESPACE", "metadata.namespace")},
		Ports: []ContainerPort{{Name: "metrics", ContainerPort: agentMetricsPort, Protocol: "TCP"},
			{Name: "health", ContainerPort: agentHealthPort, Protocol: "TCP"}},
		LivenessProbe:  httpProbe("/healthz", 20),
		ReadinessProbe: httpProbe("/readyz", 5),
		Resources: &Resources{Requests: map[string]string{"cpu": "20m", "memory": "32Mi"},
			Limits: map[string]string{"cpu": "500m", "memory": "128Mi"}},
		SecurityContext: &ContainerSecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			RunAsNonRoot: &yes, Capabilities: &Capabilities{Drop: []string{"ALL"}}},
		VolumeMounts: []kube.VolumeMount{{Name: "cluster", MountPath: agentCredentialsDir, ReadOnly: true}},
	}
	d := &Deployment{}
	d.APIVersion, d.Kind = AppsV1.String(), "Deployment"
	d.Name, d.Namespace = name, bc.Namespace
	d.Labels = agentLabels(bc)
	d.OwnerReferences = []metav1.OwnerReference{clusterOwnerRef(bc)}
	d.Spec.Replicas = &one
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "bridge-runner-agent", LabelCluster: bc.Name}}
	d.Spec.Strategy.Type = "Recreate"
	d.Spec.Template.Metadata.Labels = agentLabels(bc)
	d.Spec.Template.Spec = AgentPodSpec{ServiceAccountName: name, AutomountServiceAccountToken: &yes,
		SecurityContext: &PodSecurityContext{RunAsNonRoot: &yes, FSGroup: &group, SeccompProfile: &SeccompProfile{Type: "RuntimeDefault"}},
		Containers:      []AgentContainer{c},
		Volumes:         []AgentVolume{{Name: "cluster", Secret: &SecretVolumeSource{SecretName: bc.Spec.ResourceSecret, DefaultMode: &mode}}},
	}
	return d
}

// agentDrifted: the Deployment's spec, as far as the operator sets it,
// differs from want's (the BridgeCluster's spec changed, or someone edited
// the Deployment). What the API server fills in and the operator leaves
// open (an image pull policy without --job-image-pull-policy) is no
// difference; what the operator's types do not hold is not compared.
func agentDrifted(cur, want *Deployment) bool {
	got := kube.JSONCopy(&cur.Spec)
	for i := range got.Template.Spec.Containers {
		if i < len(want.Spec.Template.Spec.Containers) && want.Spec.Template.Spec.Containers[i].ImagePullPolicy == "" {
			got.Template.Spec.Containers[i].ImagePullPolicy = ""
		}
	}
	return !reflect.DeepEqual(got, kube.JSONCopy(&want.Spec))
}

func httpProbe(path string, period int32) *Probe {
	p := &Probe{PeriodSeconds: period, FailureThreshold: 3}
	p.HTTPGet.Path, p.HTTPGet.Port = path, agentHealthPort
	return p
}

// agentRole allows the agent ConfigMaps in one namespace and nothing else:
// it lists and watches the records labelled with its cluster, updates them,
// and creates and updates its heartbeat. RBAC cannot narrow a list to a
// label, nor create to a name.
func agentRole() []kube.PolicyRule {
	return []kube.PolicyRule{{APIGroups: []string{""}, Resources: []string{kube.ConfigMaps.Plural},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}}
}

// observedInterval is the --query-interval the Deployment runs with.
func observedInterval(d *Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if i := slices.Index(c.Args, "--query-interval"); i >= 0 && i+1 < len(c.Args) {
			return c.Args[i+1]
		}
	}
	return ""
}
