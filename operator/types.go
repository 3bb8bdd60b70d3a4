package operator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bridge-runner/bridge-runner/internal/deepcopy"
)

// BridgeJob is IBM's custom resource (bridgejob.ibm.com/v1alpha1) with
// IBM's field names, plus Backend, and a status that also carries our state,
// the job id, conditions and observedGeneration. deploy/operator/crd.yaml is
// its schema.
type BridgeJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BridgeJobSpec   `json:"spec"`
	Status            BridgeJobStatus `json:"status,omitempty"`
}

// BridgeJobSpec is the job description in IBM's spelling.
type BridgeJobSpec struct {
	Backend         string  `json:"backend,omitempty"`
	ResourceURL     string  `json:"resourceURL,omitempty"`
	ResourceSecret  string  `json:"resourcesecret"`
	Image           string  `json:"image,omitempty"`
	ImagePullPolicy string  `json:"imagepullpolicy,omitempty"`
	UpdateInterval  int     `json:"updateinterval,omitempty"`
	Kill            bool    `json:"kill,omitempty"`
	JobProperties   string  `json:"jobproperties,omitempty"`
	JobData         JobData `json:"jobdata"`
	S3Storage       *S3     `json:"s3storage,omitempty"`
	S3Upload        *Upload `json:"s3upload,omitempty"`
}

// JobData is the script and its extras.
type JobData struct {
	JobScript           string `json:"jobscript"`
	ScriptLocation      string `json:"scriptlocation,omitempty"`
	ScriptMetadata      string `json:"scriptmetadata,omitempty"`
	JobParameters       string `json:"jobparameters,omitempty"`
	ScriptExtraLocation string `json:"scriptextralocation,omitempty"`
	AdditionalData      string `json:"additionaldata,omitempty"`
}

// S3 is the S3 connection; the Secret holds accesskey and secretkey.
type S3 struct {
	S3Secret string `json:"s3secret,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// Secure is IBM's bool defaulting to true (the CRD's default); a
	// pointer tells an unset value from false.
	Secure *bool `json:"secure,omitempty"`
}

// Upload names the bucket for outputs and the extra files to upload.
type Upload struct {
	Bucket string `json:"bucket,omitempty"`
	Files  string `json:"files,omitempty"`
}

// BridgeJobStatus: IBM's four fields, then ours.
type BridgeJobStatus struct {
	JobStatus          string      `json:"jobstatus,omitempty"`
	StartTime          string      `json:"starttime,omitempty"`
	CompletionTime     string      `json:"completiontime,omitempty"`
	Message            string      `json:"message,omitempty"`
	State              string      `json:"state,omitempty"`
	JobID              string      `json:"jobid,omitempty"`
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
	Conditions         []Condition `json:"conditions,omitempty"`
}

// Condition is metav1.Condition's shape (its fields are optional here, as
// in the CRD).
type Condition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// BridgeJobList is a list of BridgeJobs.
type BridgeJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BridgeJob `json:"items"`
}

func (b *BridgeJob) DeepCopyObject() runtime.Object     { return deepcopy.JSON(b) }
func (l *BridgeJobList) DeepCopyObject() runtime.Object { return deepcopy.JSON(l) }

// The built-in kinds the operator reads or writes, with only the fields it
// uses: the generated types (and clientset) would link every API group.
// The operator writes ConfigMaps and Jobs it creates whole, and updates a
// ConfigMap only by its data, so no field of others is dropped.

type configMap struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Data              map[string]string `json:"data,omitempty"`
	BinaryData        map[string][]byte `json:"binaryData,omitempty"`
	Immutable         *bool             `json:"immutable,omitempty"`
}

type configMapList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []configMap `json:"items"`
}

func (c *configMap) DeepCopyObject() runtime.Object     { return deepcopy.JSON(c) }
func (l *configMapList) DeepCopyObject() runtime.Object { return deepcopy.JSON(l) }

// job is a batch/v1 Job: what the operator sets, and the status it reads.
type job struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              jobSpec   `json:"spec"`
	Status            jobStatus `json:"status,omitempty"`
}

type jobSpec struct {
	BackoffLimit     *int32            `json:"backoffLimit,omitempty"`
	PodFailurePolicy *podFailurePolicy `json:"podFailurePolicy,omitempty"`
	Template         podTemplate       `json:"template"`
}

type podFailurePolicy struct {
	Rules []podFailureRule `json:"rules"`
}

type podFailureRule struct {
	Action      string `json:"action"`
	OnExitCodes *struct {
		Operator string  `json:"operator"`
		Values   []int32 `json:"values"`
	} `json:"onExitCodes,omitempty"`
}

type podTemplate struct {
	Metadata metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec     podSpec           `json:"spec"`
}

type podSpec struct {
	ServiceAccountName string      `json:"serviceAccountName,omitempty"`
	RestartPolicy      string      `json:"restartPolicy"`
	Containers         []container `json:"containers"`
	Volumes            []volume    `json:"volumes,omitempty"`
}

type container struct {
	Name            string        `json:"name"`
	Image           string        `json:"image"`
	ImagePullPolicy string        `json:"imagePullPolicy,omitempty"`
	Args            []string      `json:"args,omitempty"`
	Env             []envVar      `json:"env,omitempty"`
	VolumeMounts    []volumeMount `json:"volumeMounts,omitempty"`
}

type envVar struct {
	Name      string `json:"name"`
	Value     string `json:"value,omitempty"`
	ValueFrom *struct {
		FieldRef struct {
			FieldPath string `json:"fieldPath"`
		} `json:"fieldRef"`
	} `json:"valueFrom,omitempty"`
}

type volumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

type volume struct {
	Name   string `json:"name"`
	Secret *struct {
		SecretName string `json:"secretName"`
	} `json:"secret,omitempty"`
	EmptyDir *struct{} `json:"emptyDir,omitempty"`
}

type jobStatus struct {
	Active     int32 `json:"active,omitempty"`
	Succeeded  int32 `json:"succeeded,omitempty"`
	Failed     int32 `json:"failed,omitempty"`
	Conditions []struct {
		Type    string `json:"type"`
		Status  string `json:"status"`
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message,omitempty"`
	} `json:"conditions,omitempty"`
}

type jobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []job `json:"items"`
}

func (j *job) DeepCopyObject() runtime.Object     { return deepcopy.JSON(j) }
func (l *jobList) DeepCopyObject() runtime.Object { return deepcopy.JSON(l) }

// finished returns the Job's Complete or Failed condition that is True.
func (j *job) finished() (typ, reason, msg string) {
	for _, c := range j.Status.Conditions {
		if (c.Type == "Complete" || c.Type == "Failed") && c.Status == "True" {
			return c.Type, c.Reason, c.Message
		}
	}
	return "", "", ""
}

// lease is a coordination.k8s.io/v1 Lease (leader election).
type lease struct {
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

func (l *lease) DeepCopyObject() runtime.Object { return deepcopy.JSON(l) }

// event is a core/v1 Event about a BridgeJob.
type event struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	InvolvedObject    objectReference `json:"involvedObject"`
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

type objectReference struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

func (e *event) DeepCopyObject() runtime.Object { return deepcopy.JSON(e) }

// serviceAccount, role and roleBinding give a BridgeJob's pods their own
// identity (access.go).
type serviceAccount struct {
	metav1.TypeMeta              `json:",inline"`
	metav1.ObjectMeta            `json:"metadata,omitempty"`
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`
}

type policyRule struct {
	APIGroups     []string `json:"apiGroups"`
	Resources     []string `json:"resources"`
	ResourceNames []string `json:"resourceNames,omitempty"`
	Verbs         []string `json:"verbs"`
}

type role struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Rules             []policyRule `json:"rules"`
}

type roleRef struct {
	APIGroup string `json:"apiGroup"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

type subject struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

type roleBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	RoleRef           roleRef   `json:"roleRef"`
	Subjects          []subject `json:"subjects"`
}

func (s *serviceAccount) DeepCopyObject() runtime.Object { return deepcopy.JSON(s) }
func (r *role) DeepCopyObject() runtime.Object           { return deepcopy.JSON(r) }
func (b *roleBinding) DeepCopyObject() runtime.Object    { return deepcopy.JSON(b) }
