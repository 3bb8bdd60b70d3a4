package operator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bridge-runner/bridge-runner/kube"
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
