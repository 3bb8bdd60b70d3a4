package operator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bridge-runner/bridge-runner/kube"
)

// The agent's Deployment (apps/v1), as much of it as the operator sets and
// reads back: hand-written like package kube's kinds, since the generated
// types would link every API group into the binary.

// AppsV1 is the group version of Deployments.
var AppsV1 = schema.GroupVersion{Group: "apps", Version: "v1"}

// Deployments is the Deployment resource.
var Deployments = kube.Resource{GV: AppsV1, Plural: "deployments"}

type Deployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DeploymentSpec   `json:"spec"`
	Status            DeploymentStatus `json:"status,omitempty"`
}

type DeploymentSpec struct {
	Replicas *int32                `json:"replicas,omitempty"`
	Selector *metav1.LabelSelector `json:"selector"`
	Strategy struct {
		Type string `json:"type,omitempty"`
	} `json:"strategy"`
	Template AgentPodTemplate `json:"template"`
}

// DeploymentStatus is what says whether the agent runs.
type DeploymentStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	Replicas           int32 `json:"replicas,omitempty"`
	ReadyReplicas      int32 `json:"readyReplicas,omitempty"`
	AvailableReplicas  int32 `json:"availableReplicas,omitempty"`
}

type AgentPodTemplate struct {
	Metadata metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec     AgentPodSpec      `json:"spec"`
}

type AgentPodSpec struct {
	ServiceAccountName           string              `json:"serviceAccountName,omitempty"`
	AutomountServiceAccountToken *bool               `json:"automountServiceAccountToken,omitempty"`
	SecurityContext              *PodSecurityContext `json:"securityContext,omitempty"`
	Containers                   []AgentContainer    `json:"containers"`
	Volumes                      []AgentVolume       `json:"volumes,omitempty"`
}

type PodSecurityContext struct {
	RunAsNonRoot   *bool           `json:"runAsNonRoot,omitempty"`
	FSGroup        *int64          `json:"fsGroup,omitempty"`
	SeccompProfile *SeccompProfile `json:"seccompProfile,omitempty"`
}

type SeccompProfile struct {
	Type string `json:"type"`
}

type AgentContainer struct {
	Name            string                    `json:"name"`
	Image           string                    `json:"image"`
	ImagePullPolicy string                    `json:"imagePullPolicy,omitempty"`
	Args            []string                  `json:"args,omitempty"`
	Env             []kube.EnvVar             `json:"env,omitempty"`
	Ports           []ContainerPort           `json:"ports,omitempty"`
	LivenessProbe   *Probe                    `json:"livenessProbe,omitempty"`
	ReadinessProbe  *Probe                    `json:"readinessProbe,omitempty"`
	Resources       *Resources                `json:"resources,omitempty"`
	SecurityContext *ContainerSecurityContext `json:"securityContext,omitempty"`
	VolumeMounts    []kube.VolumeMount        `json:"volumeMounts,omitempty"`
}

type ContainerPort struct {
	Name          string `json:"name"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
}

type Probe struct {
	HTTPGet struct {
		Path string `json:"path"`
		Port int32  `json:"port"`
	} `json:"httpGet"`
	PeriodSeconds    int32 `json:"periodSeconds,omitempty"`
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

type Resources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

type ContainerSecurityContext struct {
	AllowPrivilegeEscalation *bool         `json:"allowPrivilegeEscalation,omitempty"`
	ReadOnlyRootFilesystem   *bool         `json:"readOnlyRootFilesystem,omitempty"`
	RunAsNonRoot             *bool         `json:"runAsNonRoot,omitempty"`
	Capabilities             *Capabilities `json:"capabilities,omitempty"`
}

type Capabilities struct {
	Drop []string `json:"drop,omitempty"`
}

// AgentVolume is a Secret volume (the agent mounts nothing else).
type AgentVolume struct {
	Name   string              `json:"name"`
	Secret *SecretVolumeSource `json:"secret,omitempty"`
}

type SecretVolumeSource struct {
	SecretName  string `json:"secretName"`
	DefaultMode *int32 `json:"defaultMode,omitempty"`
}

type DeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Deployment `json:"items"`
}

func (d *Deployment) DeepCopyObject() runtime.Object     { return kube.JSONCopy(d) }
func (l *DeploymentList) DeepCopyObject() runtime.Object { return kube.JSONCopy(l) }
