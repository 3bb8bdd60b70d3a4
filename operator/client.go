package operator

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/bridge-runner/bridge-runner/kube"
)

// GroupVersion of the BridgeJob resource (IBM's).
var GroupVersion = schema.GroupVersion{Group: "bridgejob.ibm.com", Version: "v1alpha1"}

// BridgeJobs is the BridgeJob resource.
var BridgeJobs = kube.Resource{GV: GroupVersion, Plural: "bridgejobs"}

// bridgeJobKinds adds the BridgeJob and BridgeCluster kinds (and the agents'
// Deployments) to the client's scheme.
func bridgeJobKinds(s *runtime.Scheme) {
	s.AddKnownTypeWithName(GroupVersion.WithKind("BridgeJob"), &BridgeJob{})
	s.AddKnownTypeWithName(GroupVersion.WithKind("BridgeJobList"), &BridgeJobList{})
	s.AddKnownTypeWithName(GroupVersion.WithKind("BridgeCluster"), &BridgeCluster{})
	s.AddKnownTypeWithName(GroupVersion.WithKind("BridgeClusterList"), &BridgeClusterList{})
	s.AddKnownTypeWithName(kube.CoreV1.WithKind("PodList"), &podList{})
	s.AddKnownTypeWithName(AppsV1.WithKind("Deployment"), &Deployment{})
	s.AddKnownTypeWithName(AppsV1.WithKind("DeploymentList"), &DeploymentList{})
}

// cannotStart are the reasons a container waits with that no wait mends:
// the pod stays Pending until its spec or its image changes.
var cannotStart = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true,
}

// stuckPod finds a pod of the Job whose container cannot start, and says
// which, with which image and why (the kubelet's reason word only).
func stuckPod(ctx context.Context, c *kube.Client, ns, jobName string) (pod, image, reason string, err error) {
	var list podList
	if err := c.List(ctx, kube.Pods, ns, &metav1.ListOptions{LabelSelector: "job-name=" + jobName}, &list); err != nil {
		return "", "", "", err
	}
	for _, p := range list.Items {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && cannotStart[w.Reason] {
				return p.Name, cs.Image, w.Reason, nil
			}
		}
	}
	return "", "", "", nil
}

// newClient is the one Kubernetes client (package kube) knowing BridgeJobs.
func newClient(cfg *rest.Config) (*kube.Client, error) { return kube.New(cfg, bridgeJobKinds) }
