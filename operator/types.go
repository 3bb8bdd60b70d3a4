package operator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bridge-runner/bridge-runner/kube"
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
	Backend         string `json:"backend,omitempty"`
	ResourceURL     string `json:"resourceURL,omitempty"`
	ResourceSecret  string `json:"resourcesecret,omitempty"`
	Image           string `json:"image,omitempty"`
	ImagePullPolicy string `json:"imagepullpolicy,omitempty"`
	// Targets and Placement are bridge-runner's placement keys; IBM's
	// resource has none.
	Targets   string `json:"targets,omitempty"`
	Placement string `json:"placement,omitempty"`
	// Clusters names BridgeClusters of the namespace: the operator makes
	// them the record's targets (clusters.go).
	Clusters       []string `json:"clusters,omitempty"`
	UpdateInterval int      `json:"updateinterval,omitempty"`
	// Array is bridge-runner's job array key; IBM's resource has none.
	Array string `json:"array,omitempty"`
	// PendingLimit is bridge-runner's; IBM's resource has none.
	PendingLimit string `json:"pendingLimit,omitempty"`
	// ReplaceAfter is bridge-runner's (re-placement); IBM's resource has none.
	ReplaceAfter string `json:"replaceAfter,omitempty"`
	// Cluster names the cluster whose agent follows the job (record key
	// cluster); bridge-runner's, IBM's resource has none.
	Cluster       string  `json:"cluster,omitempty"`
	Kill          bool    `json:"kill,omitempty"`
	JobProperties string  `json:"jobproperties,omitempty"`
	JobData       JobData `json:"jobdata"`
	S3Storage     *S3     `json:"s3storage,omitempty"`
	S3Upload      *Upload `json:"s3upload,omitempty"`
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
	// Region is bridge-runner's s3.region (IBM's resource has none).
	Region string `json:"region,omitempty"`
}

// Upload names the bucket for outputs and the extra files to upload.
type Upload struct {
	Bucket string `json:"bucket,omitempty"`
	Files  string `json:"files,omitempty"`
	// CreateBucket is bridge-runner's s3upload.createBucket.
	CreateBucket *bool `json:"createbucket,omitempty"`
	// Layout is bridge-runner's s3upload.layout; IBM's resource has none.
	Layout string `json:"layout,omitempty"`
}

// BridgeJobStatus: IBM's four fields, then ours.
type BridgeJobStatus struct {
	JobStatus      string `json:"jobstatus,omitempty"`
	StartTime      string `json:"starttime,omitempty"`
	CompletionTime string `json:"completiontime,omitempty"`
	Message        string `json:"message,omitempty"`
	// Backend is the backend the operator chose (spec.backend, or what it
	// inferred), so that -o wide shows it for IBM's BridgeJobs too.
	Backend            string      `json:"backend,omitempty"`
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

func (b *BridgeJob) DeepCopyObject() runtime.Object     { return kube.JSONCopy(b) }
func (l *BridgeJobList) DeepCopyObject() runtime.Object { return kube.JSONCopy(l) }

// podList is a list of pods, as much of each as says whether its
// containers can start.
type podList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []struct {
		metav1.ObjectMeta `json:"metadata,omitempty"`
		Status            struct {
			InitContainerStatuses []containerStatus `json:"initContainerStatuses,omitempty"`
			ContainerStatuses     []containerStatus `json:"containerStatuses,omitempty"`
		} `json:"status"`
	} `json:"items"`
}

type containerStatus struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	State struct {
		Waiting *struct {
			Reason string `json:"reason,omitempty"`
		} `json:"waiting,omitempty"`
	} `json:"state"`
}

func (l *podList) DeepCopyObject() runtime.Object { return kube.JSONCopy(l) }
