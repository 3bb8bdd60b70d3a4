package kube

import (
	"encoding/json"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The Kubernetes objects bridge-runner and its operator read or write, with
// only the fields they use (the server's other fields are ignored when
// decoding): the generated types (and clientset) would link every API
// group. The ConfigMap is updated, so it keeps every field a ConfigMap has:
// an update must not drop what others put there.

type ConfigMap struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Immutable         *bool             `json:"immutable,omitempty"`
	Data              map[string]string `json:"data,omitempty"`
	BinaryData        map[string][]byte `json:"binaryData,omitempty"`
}

// DeepCopy copies cm, each of its fields.
func (cm *ConfigMap) DeepCopy() *ConfigMap {
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

func (cm *ConfigMap) DeepCopyObject() runtime.Object { return cm.DeepCopy() }

// Pod: whether it is being deleted, who owns it, and its deadline.
type Pod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	} `json:"spec"`
	Status struct {
		StartTime *metav1.Time `json:"startTime,omitempty"`
	} `json:"status"`
}

func (p *Pod) DeepCopyObject() runtime.Object { return jsonCopy(p) }

// Workflow: an Argo Workflow's stop, deadline, phase and retry nodes.
type Workflow struct {
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

func (w *Workflow) DeepCopyObject() runtime.Object { return jsonCopy(w) }

type ConfigMapList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigMap `json:"items"`
}

func (l *ConfigMapList) DeepCopyObject() runtime.Object { return jsonCopy(l) }

// Job is a batch/v1 Job: what the operator sets, and the settings and
// progress that decide whether it runs a failed pod again (the runner
// reads them to tell a disruption of its pod from a stop of the step).
type Job struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              JobSpec   `json:"spec"`
	Status            JobStatus `json:"status,omitempty"`
}

type JobSpec struct {
	Suspend               *bool             `json:"suspend,omitempty"`
	ActiveDeadlineSeconds *int64            `json:"activeDeadlineSeconds,omitempty"`
	BackoffLimit          *int32            `json:"backoffLimit,omitempty"`
	PodFailurePolicy      *PodFailurePolicy `json:"podFailurePolicy,omitempty"`
	Template              PodTemplate       `json:"template"`
}

type PodFailurePolicy struct {
	Rules []PodFailureRule `json:"rules"`
}

type PodFailureRule struct {
	Action      string `json:"action"`
	OnExitCodes *struct {
		Operator string  `json:"operator"`
		Values   []int32 `json:"values"`
	} `json:"onExitCodes,omitempty"`
}

type PodTemplate struct {
	Metadata metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec     PodSpec           `json:"spec"`
}

type PodSpec struct {
	ServiceAccountName string      `json:"serviceAccountName,omitempty"`
	RestartPolicy      string      `json:"restartPolicy"`
	Containers         []Container `json:"containers"`
	Volumes            []Volume    `json:"volumes,omitempty"`
}

type Container struct {
	Name            string        `json:"name"`
	Image           string        `json:"image"`
	ImagePullPolicy string        `json:"imagePullPolicy,omitempty"`
	Args            []string      `json:"args,omitempty"`
	Env             []EnvVar      `json:"env,omitempty"`
	VolumeMounts    []VolumeMount `json:"volumeMounts,omitempty"`
}

type EnvVar struct {
	Name      string `json:"name"`
	Value     string `json:"value,omitempty"`
	ValueFrom *struct {
		FieldRef struct {
			FieldPath string `json:"fieldPath"`
		} `json:"fieldRef"`
	} `json:"valueFrom,omitempty"`
}

type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

type Volume struct {
	Name   string `json:"name"`
	Secret *struct {
		SecretName string `json:"secretName"`
	} `json:"secret,omitempty"`
	EmptyDir *struct{} `json:"emptyDir,omitempty"`
}

type JobStatus struct {
	Active     int32 `json:"active,omitempty"`
	Succeeded  int32 `json:"succeeded,omitempty"`
	Failed     int32 `json:"failed,omitempty"`
	Conditions []struct {
		Type    string `json:"type"`
		Status  string `json:"status"`
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message,omitempty"`
	} `json:"conditions,omitempty"`
	StartTime *metav1.Time `json:"startTime,omitempty"`
}

type JobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Job `json:"items"`
}

func (j *Job) DeepCopyObject() runtime.Object     { return jsonCopy(j) }
func (l *JobList) DeepCopyObject() runtime.Object { return jsonCopy(l) }

// Finished returns the Job's Complete or Failed condition that is True.
func (j *Job) Finished() (typ, reason, msg string) {
	for _, c := range j.Status.Conditions {
		if (c.Type == "Complete" || c.Type == "Failed") && c.Status == "True" {
			return c.Type, c.Reason, c.Message
		}
	}
	return "", "", ""
}

// Lease is a coordination.k8s.io/v1 Lease (leader election).
type Lease struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		HolderIdentity       string            `json:"holderIdentity,omitempty"`
		LeaseDurationSeconds int32             `json:"leaseDurationSeconds,omitempty"`
		AcquireTime          *metav1.MicroTime `json:"acquireTime,omitempty"`
		RenewTime            *metav1.MicroTime `json:"renewTime,omitempty"`
		LeaseTransitions     int32             `json:"leaseTransitions,omitempty"`
	} `json:"spec"`
}

func (l *Lease) DeepCopyObject() runtime.Object { return jsonCopy(l) }

// Event is a core/v1 Event about a BridgeJob.
type Event struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	InvolvedObject    ObjectReference `json:"involvedObject"`
	Reason            string          `json:"reason"`
	Message           string          `json:"message"`
	Type              string          `json:"type"`
	Source            struct {
		Component string `json:"component"`
	} `json:"source"`
	FirstTimestamp      metav1.Time `json:"firstTimestamp"`
	LastTimestamp       metav1.Time `json:"lastTimestamp"`
	Count               int32       `json:"count"`
	ReportingController string      `json:"reportingComponent,omitempty"`
	ReportingInstance   string      `json:"reportingInstance,omitempty"`
}

type ObjectReference struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

func (e *Event) DeepCopyObject() runtime.Object { return jsonCopy(e) }

// ServiceAccount, Role and RoleBinding give a BridgeJob's pods their own
// identity (access.go).
type ServiceAccount struct {
	metav1.TypeMeta              `json:",inline"`
	metav1.ObjectMeta            `json:"metadata,omitempty"`
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`
}

type PolicyRule struct {
	APIGroups     []string `json:"apiGroups"`
	Resources     []string `json:"resources"`
	ResourceNames []string `json:"resourceNames,omitempty"`
	Verbs         []string `json:"verbs"`
}

type Role struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Rules             []PolicyRule `json:"rules"`
}

type RoleRef struct {
	APIGroup string `json:"apiGroup"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

type Subject struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

type RoleBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	RoleRef           RoleRef   `json:"roleRef"`
	Subjects          []Subject `json:"subjects"`
}

func (s *ServiceAccount) DeepCopyObject() runtime.Object { return jsonCopy(s) }
func (r *Role) DeepCopyObject() runtime.Object           { return jsonCopy(r) }
func (b *RoleBinding) DeepCopyObject() runtime.Object    { return jsonCopy(b) }

// jsonCopy deep-copies an object by a JSON round trip: these objects are
// small and copied rarely, so a round trip beats hand-written copies of each
// type that would have to be kept in step with its fields.
func jsonCopy[T any](in *T) *T {
	out := new(T)
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		panic("deep copy: " + err.Error()) // these types always round-trip
	}
	return out
}

// JSONCopy is jsonCopy for the kinds of other packages (the operator's
// BridgeJob).
func JSONCopy[T any](in *T) *T { return jsonCopy(in) }
