package runner

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bridge-runner/bridge-runner/internal/deepcopy"
)

// The Kubernetes objects bridge-runner reads or writes, with only the fields
// it uses (the server's other fields are ignored when decoding). Only the
// ConfigMap is ever written, so it keeps every field a ConfigMap has: an
// update must not drop what others put there.

type configMap struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Immutable         *bool             `json:"immutable,omitempty"`
	Data              map[string]string `json:"data,omitempty"`
	BinaryData        map[string][]byte `json:"binaryData,omitempty"`
}

func (cm *configMap) setKind() { cm.APIVersion, cm.Kind = "v1", "ConfigMap" }

func (cm *configMap) deepCopy() *configMap {
	out := *cm
	cm.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if cm.Immutable != nil {
		v := *cm.Immutable
		out.Immutable = &v
	}
	out.Data = maps.Clone(cm.Data)
	if cm.BinaryData != nil {
		out.BinaryData = make(map[string][]byte, len(cm.BinaryData))
		for k, v := range cm.BinaryData {
			out.BinaryData[k] = append([]byte(nil), v...)
		}
	}
	return &out
}

func (cm *configMap) DeepCopyObject() runtime.Object { return cm.deepCopy() }

// pod: whether it is being deleted, who owns it, and its deadline.
type pod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	} `json:"spec"`
	Status struct {
		StartTime *metav1.Time `json:"startTime,omitempty"`
	} `json:"status"`
}

func (p *pod) DeepCopyObject() runtime.Object { return deepcopy.JSON(p) }

// job: a batch/v1 Job's settings and progress that decide whether it runs
// a failed pod again.
type job struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Suspend               *bool  `json:"suspend,omitempty"`
		ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
		BackoffLimit          *int32 `json:"backoffLimit,omitempty"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Reason string `json:"reason,omitempty"`
		} `json:"conditions,omitempty"`
		StartTime *metav1.Time `json:"startTime,omitempty"`
		Failed    int32        `json:"failed,omitempty"`
	} `json:"status"`
}

func (j *job) DeepCopyObject() runtime.Object { return deepcopy.JSON(j) }

// workflow: an Argo Workflow's stop, deadline, phase and retry nodes.
type workflow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Shutdown              string `json:"shutdown,omitempty"`
		ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	} `json:"spec"`
	Status struct {
		Phase     string `json:"phase,omitempty"`
		StartedAt string `json:"startedAt,omitempty"`
		Nodes     map[string]struct {
			Type     string   `json:"type"`
			Children []string `json:"children,omitempty"`
		} `json:"nodes,omitempty"`
	} `json:"status"`
}

func (w *workflow) DeepCopyObject() runtime.Object { return deepcopy.JSON(w) }
