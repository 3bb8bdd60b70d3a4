package operator

import "github.com/bridge-runner/bridge-runner/record"

import "github.com/bridge-runner/bridge-runner/kube"

// Where the job's pod finds its credentials: IBM's paths, invoke's defaults.
const (
	credentialsDir   = "/credentials"
	s3CredentialsDir = "/s3credentials"
)

// backoffLimit: a pod that exits 75 (a temporary fault) is run again, and
// the new invoke re-attaches to the submitted job (the record's
// idempotency key), so a retry never submits twice.
const backoffLimit = 6

// buildJob is the Job whose pod runs `bridge-runner invoke` for bj.
func (r *reconciler) buildJob(bj *BridgeJob, clusters [][2]string) *kube.Job {
	kj := r.podJob(bj, JobName(bj.Name), clusters, "invoke", "--status-keys", r.o.StatusKeys)
	limit := int32(backoffLimit)
	kj.Spec.BackoffLimit = &limit
	kj.Spec.PodFailurePolicy = finalExits()
	return kj
}

// buildCleanup is the Job whose pod runs `bridge-runner cleanup` for a
// deleted bj whose invoke is gone: it cancels the remote job with the
// credentials (which only pods see) and deletes the record.
func (r *reconciler) buildCleanup(bj *BridgeJob, clusters [][2]string) *kube.Job {
	// --any-owner: the record is this BridgeJob's (the operator made it), but
	// its owner is the invoke Job, another Job than this one.
	kj := r.podJob(bj, CleanupName(bj.Name), clusters, "cleanup", "--wait", "10s", "--any-owner")
	limit := int32(2)
	kj.Spec.BackoffLimit = &limit
	return kj
}

// podJob is a Job of bj named name whose pod runs the bridge-runner step
// with the credentials mounted: spec.resourcesecret's, and each cluster's
// ({cluster, Secret}) at /targets/<cluster>.
func (r *reconciler) podJob(bj *BridgeJob, name string, clusters [][2]string, step string, args ...string) *kube.Job {
	image, _ := r.jobImage(bj)
	pull := r.o.JobImagePullPolicy
	if image != r.o.JobImage {
		pull = bj.Spec.ImagePullPolicy // the author's own (allowed) image
	}
	c := kube.Container{
		Name:            step,
		Image:           image,
		ImagePullPolicy: pull,
		Args: append([]string{step, "--job-name", bj.Name, "--store", "configmap",
			"--credentials-dir", credentialsDir}, args...),
		Env: []kube.EnvVar{{Name: "JOBNAME", Value: bj.Name}, fieldEnv("NAMESPACE", "metadata.namespace")},
	}
	kj := &kube.Job{}
	kj.APIVersion, kj.Kind = kube.BatchV1.String(), "Job"
	kj.Name, kj.Namespace = name, bj.Namespace
	kj.Labels = childLabels(bj)
	kj.OwnerReferences = append(kj.OwnerReferences, ownerRef(bj))
	p := &kj.Spec.Template
	p.Metadata.Labels = childLabels(bj)
	p.Spec.RestartPolicy = "Never"
	// The pod's own identity, never the operator's: the BridgeJob's
	// ServiceAccount (its record only), or the admin's shared one.
	p.Spec.ServiceAccountName = r.o.JobServiceAccount
	if p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = AccessName(bj.Name)
		// Its Role names the record alone: the cluster's watcher (a lease
		// ConfigMap, a list of the namespace's records, writes to others')
		// is out of its reach, so invoke polls its own job from the start.
		if step == "invoke" {
			c.Args = append(c.Args, "--watcher=false")
		}
	}
	if bj.Spec.ResourceSecret != "" {
		p.Spec.Volumes = append(p.Spec.Volumes, secretVolume("credentials", bj.Spec.ResourceSecret))
		c.VolumeMounts = append(c.VolumeMounts, kube.VolumeMount{Name: "credentials", MountPath: credentialsDir, ReadOnly: true})
	}
	for _, m := range clusters {
		// Volume names are DNS labels: "cluster-" and a name of at most 40.
		p.Spec.Volumes = append(p.Spec.Volumes, secretVolume("cluster-"+m[0], m[1]))
		c.VolumeMounts = append(c.VolumeMounts, kube.VolumeMount{Name: "cluster-" + m[0], MountPath: clusterCredentials(m[0]), ReadOnly: true})
	}
	if s := s3Secret(bj); s != "" && step == "invoke" {
		p.Spec.Volumes = append(p.Spec.Volumes, secretVolume("s3credentials", s))
		c.VolumeMounts = append(c.VolumeMounts, kube.VolumeMount{Name: "s3credentials", MountPath: s3CredentialsDir, ReadOnly: true})
		c.Args = append(c.Args, "--s3-credentials-dir", s3CredentialsDir)
	}
	p.Spec.Containers = []kube.Container{c}
	return kj
}

// finalExits fails the Job at once when invoke's exit code is an outcome
// (the state table's record.OutcomeExits: 1 FAILED, 2 invalid input, 3
// KILLED, 4 UNKNOWN, 5 FAILED by the infrastructure): running it again
// would only read the same final state back, and a BridgeJob asks for one
// run (a new attempt after an infrastructure failure is a workflow's
// choice, through its retries). 75 (temporary) counts against
// backoffLimit and is retried.
func finalExits() *kube.PodFailurePolicy {
	rule := kube.PodFailureRule{Action: "FailJob"}
	rule.OnExitCodes = &struct {
		Operator string  `json:"operator"`
		Values   []int32 `json:"values"`
	}{Operator: "In"}
	for _, code := range record.OutcomeExits() {
		rule.OnExitCodes.Values = append(rule.OnExitCodes.Values, int32(code))
	}
	return &kube.PodFailurePolicy{Rules: []kube.PodFailureRule{rule}}
}

func secretVolume(name, secret string) kube.Volume {
	v := kube.Volume{Name: name}
	v.Secret = &struct {
		SecretName string `json:"secretName"`
	}{SecretName: secret}
	return v
}

func fieldEnv(name, path string) kube.EnvVar {
	e := kube.EnvVar{Name: name}
	e.ValueFrom = &struct {
		FieldRef struct {
			FieldPath string `json:"fieldPath"`
		} `json:"fieldRef"`
	}{}
	e.ValueFrom.FieldRef.FieldPath = path
	return e
}
