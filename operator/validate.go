package operator

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// fieldError is a bad BridgeJob: Field is the spec's field path.
type fieldError struct{ Field, Msg string }

func (e *fieldError) Error() string { return e.Field + ": " + e.Msg }

// specPaths maps the record's keys (runner.Spec's) to BridgeJob fields, so
// that runner's checks name the field the user wrote.
var specPaths = map[string]string{
	"backend":                     "spec.backend",
	"resourceURL":                 "spec.resourceURL",
	"resourcesecret":              "spec.resourcesecret",
	"updateInterval":              "spec.updateinterval",
	"jobproperties":               "spec.jobproperties",
	"jobdata.jobScript":           "spec.jobdata.jobscript",
	"jobdata.scriptLocation":      "spec.jobdata.scriptlocation",
	"jobdata.scriptMetadata":      "spec.jobdata.scriptmetadata",
	"jobdata.jobParameters":       "spec.jobdata.jobparameters",
	"jobdata.scriptExtraLocation": "spec.jobdata.scriptextralocation",
	"jobdata.additionalData":      "spec.jobdata.additionaldata",
	"s3.endpoint":                 "spec.s3storage.endpoint",
	"s3.secure":                   "spec.s3storage.secure",
	"s3.secret":                   "spec.s3storage.s3secret",
	"s3upload.bucket":             "spec.s3upload.bucket",
	"s3upload.files":              "spec.s3upload.files",
}

// maxName keeps <name>-bridge-cleanup a valid label value (a Job's pods
// carry their Job's name as a label).
const maxName = 63 - len("-bridge-cleanup")

// RecordSpec is the BridgeJob's job description as runner's Spec.
func RecordSpec(bj *BridgeJob) record.Spec {
	s := bj.Spec
	spec := record.Spec{
		Backend:             s.Backend,
		ResourceURL:         s.ResourceURL,
		ResourceSecret:      s.ResourceSecret,
		JobProperties:       s.JobProperties,
		JobScript:           s.JobData.JobScript,
		ScriptLocation:      s.JobData.ScriptLocation,
		ScriptMetadata:      s.JobData.ScriptMetadata,
		JobParameters:       s.JobData.JobParameters,
		ScriptExtraLocation: s.JobData.ScriptExtraLocation,
		AdditionalData:      s.JobData.AdditionalData,
	}
	if s3 := s.S3Storage; s3 != nil {
		spec.S3Endpoint, spec.S3Secret = s3.Endpoint, s3.S3Secret
		if s3.Secure != nil {
			spec.S3Secure = strconv.FormatBool(*s3.Secure)
		}
	}
	if u := s.S3Upload; u != nil {
		spec.S3UploadBucket, spec.S3UploadFiles = u.Bucket, u.Files
	}
	if spec.ScriptLocation == "" {
		spec.ScriptLocation = record.Remote // IBM's default
	}
	if s.UpdateInterval > 0 {
		spec.UpdateInterval = strconv.Itoa(s.UpdateInterval)
	}
	return spec
}

// validate checks a BridgeJob against its schema and the tenancy policy
// (policy.go) and returns its record's data, with the backend chosen. A bad
// spec is a *fieldError; any other error (the API) is transient.
func (r *reconciler) validate(ctx context.Context, bj *BridgeJob) (map[string]string, error) {
	if len(bj.Name) > maxName {
		return nil, &fieldError{"metadata.name", fmt.Sprintf("is %d characters; a BridgeJob's name may have at most %d", len(bj.Name), maxName)}
	}
	if err := checkNames(bj); err != nil {
		return nil, err
	}
	if bj.Spec.ResourceSecret == "" {
		return nil, &fieldError{"spec.resourcesecret", "is empty; name the Secret with the credentials"}
	}
	spec := RecordSpec(bj)
	backend, err := r.chooseBackend(ctx, bj)
	if err != nil {
		return nil, err
	}
	spec.Backend = backend
	if _, err := spec.Parse(); err != nil {
		var fe *backends.FieldError
		if errors.As(err, &fe) {
			return nil, &fieldError{fieldPath(fe.Field), fe.Msg}
		}
		return nil, &fieldError{"spec", err.Error()}
	}
	for field, name := range map[string]string{"spec.resourcesecret": bj.Spec.ResourceSecret, "spec.s3storage.s3secret": s3Secret(bj)} {
		if name == "" {
			continue
		}
		if err := r.checkSecret(ctx, bj.Namespace, field, name); err != nil {
			return nil, err
		}
	}
	return spec.Data(), nil
}

// fieldPath turns a record key into its BridgeJob field path.
func fieldPath(key string) string {
	if p, ok := specPaths[key]; ok {
		return p
	}
	return "spec (" + key + ")"
}

func s3Secret(bj *BridgeJob) string {
	if bj.Spec.S3Storage == nil {
		return ""
	}
	return bj.Spec.S3Storage.S3Secret
}
