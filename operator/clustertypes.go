package operator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// BridgeCluster (bridgejob.ibm.com/v1alpha1, bridge-runner's; IBM's
// operator has none) is one place BridgeJobs of its namespace may run: a
// backend at a URL, a queue or partition there, and the Secret with its
// credentials. A BridgeJob lists clusters in spec.clusters and the operator
// makes them the record's targets. deploy/operator/crd-bridgecluster.yaml
// is its schema.
type BridgeCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BridgeClusterSpec   `json:"spec"`
	Status            BridgeClusterStatus `json:"status,omitempty"`
}

// BridgeClusterSpec names the place and its credentials.
type BridgeClusterSpec struct {
	Backend        string `json:"backend,omitempty"`
	ResourceURL    string `json:"resourceURL"`
	ResourceSecret string `json:"resourceSecret"`
	// JobProperties are laid over a BridgeJob's own (a JSON object as a
	// string, e.g. {"partition":"debug"}).
	JobProperties string `json:"jobproperties,omitempty"`
	// Agent is the cluster's long-lived agent (agent.go): one per
	// BridgeCluster, started and kept by the operator.
	Agent *AgentSpec `json:"agent,omitempty"`
}

// AgentSpec: whether the cluster has an agent, its budget, and the other
// namespaces whose records it serves.
type AgentSpec struct {
	// Enabled: nil is true (the CRD's default).
	Enabled *bool `json:"enabled,omitempty"`
	// QueryInterval is the site's budget for the cluster, a Go duration:
	// the least time between two batched queries, 100ms..30m ("": 2s).
	QueryInterval string `json:"queryInterval,omitempty"`
	// Namespaces are served besides the cluster's own, each only once its
	// admin consented (agent.go).
	Namespaces []string `json:"namespaces,omitempty"`
}

// BridgeClusterStatus is the cluster's load as the newest placement of a
// BridgeJob of the namespace saw it (see clusterstatus.go).
type BridgeClusterStatus struct {
	Host          string            `json:"host,omitempty"`
	Reachable     *bool             `json:"reachable,omitempty"`
	FreeCPUs      *int              `json:"freeCPUs,omitempty"`
	TotalCPUs     *int              `json:"totalCPUs,omitempty"`
	PendingJobs   *int              `json:"pendingJobs,omitempty"`
	RunningJobs   *int              `json:"runningJobs,omitempty"`
	LastProbe     *metav1.MicroTime `json:"lastProbe,omitempty"`
	LastPlacedJob string            `json:"lastPlacedJob,omitempty"`
	Message       string            `json:"message,omitempty"`
	// StartErrors are what the start estimates of the jobs placed here
	// were off by lately, by partition (starterror.go); StartError says
	// it in one line for kubectl get.
	StartErrors []record.StartError `json:"startErrors,omitempty"`
	StartError  string              `json:"startError,omitempty"`
	// Load is the cluster's load as its own agent last measured it
	// (clusterload.go): fresh without a placement.
	Load *ClusterLoad `json:"load,omitempty"`
	// Agent and Conditions are the agent's (agent.go).
	Agent      *AgentStatus `json:"agent,omitempty"`
	Conditions []Condition  `json:"conditions,omitempty"`
}

// ClusterLoad is the figures of the measure the cluster's agent published
// in its sealed heartbeat, for the partition or queue of
// spec.jobproperties (the default one when it names none); a nil count is
// one the backend does not report.
type ClusterLoad struct {
	Queue             string `json:"queue,omitempty"`
	FreeCPUs          *int   `json:"freeCPUs,omitempty"`
	TotalCPUs         *int   `json:"totalCPUs,omitempty"`
	PendingJobs       *int   `json:"pendingJobs,omitempty"`
	PendingCPUSeconds *int64 `json:"pendingCPUSeconds,omitempty"`
	RunningJobs       *int   `json:"runningJobs,omitempty"`
	// MeasuredAt is the time of the agent's heartbeat that carried the
	// figures (the agent's clock).
	MeasuredAt metav1.Time `json:"measuredAt"`
	// Agent names the agent that measured them (host/pid/random).
	Agent string `json:"agent,omitempty"`
}

// AgentStatus is the agent's Deployment as the operator last saw it.
type AgentStatus struct {
	Deployment       string `json:"deployment,omitempty"`
	ReadyReplicas    int32  `json:"readyReplicas"`
	ObservedInterval string `json:"observedInterval,omitempty"`
	// Namespaces are those it serves (its own first); Refused those listed
	// in spec.agent.namespaces that did not consent.
	Namespaces []string `json:"namespaces,omitempty"`
	Refused    []string `json:"refused,omitempty"`
}

// BridgeClusterList is a list of BridgeClusters.
type BridgeClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BridgeCluster `json:"items"`
}

func (b *BridgeCluster) DeepCopyObject() runtime.Object     { return kube.JSONCopy(b) }
func (l *BridgeClusterList) DeepCopyObject() runtime.Object { return kube.JSONCopy(l) }

// BridgeClusters is the BridgeCluster resource.
var BridgeClusters = kube.Resource{GV: GroupVersion, Plural: "bridgeclusters"}
