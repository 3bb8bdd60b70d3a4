package operator

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/bridge-runner/bridge-runner/kube"
)

// GroupVersion of the BridgeJob resource (IBM's).
var GroupVersion = schema.GroupVersion{Group: "bridgejob.ibm.com", Version: "v1alpha1"}

// BridgeJobs is the BridgeJob resource.
var BridgeJobs = kube.Resource{GV: GroupVersion, Plural: "bridgejobs"}

// bridgeJobKinds adds the BridgeJob kinds to the client's scheme.
func bridgeJobKinds(s *runtime.Scheme) {
	s.AddKnownTypeWithName(GroupVersion.WithKind("BridgeJob"), &BridgeJob{})
	s.AddKnownTypeWithName(GroupVersion.WithKind("BridgeJobList"), &BridgeJobList{})
}

// newClient is the one Kubernetes client (package kube) knowing BridgeJobs.
func newClient(cfg *rest.Config) (*kube.Client, error) { return kube.New(cfg, bridgeJobKinds) }
