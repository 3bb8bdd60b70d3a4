package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/record"
)

// fieldError is a bad BridgeJob: Field is the spec's field path.
type fieldError struct{ Field, Msg string }

func (e *fieldError) Error() string { return e.Field + ": " + e.Msg }

// secretFault is a fieldError whose fault is a Secret's (missing, not
// opted in, not bound): its owner fixes it without touching the BridgeJob,
// and the operator does not watch Secrets (its ClusterRole reads none), so
// the BridgeJob is looked at again on a back-off (recheck).
type secretFault struct{ *fieldError }

func (e secretFault) Unwrap() error { return e.fieldError }

// maxName keeps <name>-bridge-cleanup a valid label value (a Job's pods
// carry their Job's name as a label).
const maxName = 63 - len("-bridge-cleanup")

// RecordSpec is the BridgeJob's job description as the record's Spec: each
// field of the table (record.Fields) read at its path in the BridgeJob's
// spec (its crd tag), so that a field added to the table is mapped here
// without a line written for it (TestBridgeJobCarriesEveryField).
func RecordSpec(bj *BridgeJob) record.Spec {
	var spec record.Spec
	values := specValues(bj.Spec)
	for _, f := range record.Fields {
		if v, ok := values[f.CRD]; ok {
			*f.Ptr(&spec) = v
		}
	}
	if spec.ScriptLocation == "" {
		spec.ScriptLocation = record.Remote // IBM's default
	}
	return spec
}

// specValues flattens a BridgeJob spec into its leaves' values as a record
// holds them, by dotted path (jobdata.jobscript, s3storage.secure, ...).
func specValues(s BridgeJobSpec) map[string]string {
	raw, err := json.Marshal(s)
	if err != nil {
		panic("a BridgeJobSpec always marshals: " + err.Error())
	}
	var tree map[string]any
	_ = json.Unmarshal(raw, &tree)
	out := map[string]string{}
	flatten("", tree, out)
	return out
}

func flatten(prefix string, tree map[string]any, out map[string]string) {
	for k, v := range tree {
		switch v := v.(type) {
		case map[string]any:
			flatten(prefix+k+".", v, out)
		case string:
			out[prefix+k] = v
		case bool:
			out[prefix+k] = strconv.FormatBool(v)
		case float64:
			out[prefix+k] = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
}

// validate checks a BridgeJob against its schema and the tenancy policy
// (policy.go) and returns its record's data, with the backend chosen, and
// the Secret of each cluster of spec.clusters. A bad spec is a
// *fieldError; any other error (the API) is transient.
func (r *reconciler) validate(ctx context.Context, bj *BridgeJob) (map[string]string, map[string]string, error) {
	if len(bj.Name) > maxName {
		return nil, nil, &fieldError{"metadata.name", fmt.Sprintf("is %d characters; a BridgeJob's name may have at most %d", len(bj.Name), maxName)}
	}
	if err := checkNames(bj); err != nil {
		return nil, nil, err
	}
	if bj.Spec.ResourceSecret == "" && len(bj.Spec.Clusters) == 0 {
		return nil, nil, &fieldError{"spec.resourcesecret", "is empty; name the Secret with the credentials (or list BridgeClusters in spec.clusters)"}
	}
	spec := RecordSpec(bj)
	var secrets map[string]string
	var err error
	switch {
	case len(bj.Spec.Clusters) > 0:
		spec.Targets, spec.Backend, secrets, err = r.clusterTargets(ctx, bj)
	case strings.TrimSpace(bj.Spec.Targets) != "" && strings.TrimSpace(bj.Spec.Backend+bj.Spec.ResourceURL) == "":
		// Each target names its place; checkTargets refuses a local one.
	default:
		spec.Backend, err = r.chooseBackend(ctx, bj)
	}
	if err != nil {
		return nil, nil, err
	}
	d, err := spec.Parse()
	if err != nil {
		var fe *backends.FieldError
		if errors.As(err, &fe) {
			if p, ok := clusterFieldPath(bj, fe.Field); ok {
				return nil, nil, &fieldError{p, fe.Msg}
			}
			return nil, nil, &fieldError{fieldPath(fe.Field), fe.Msg}
		}
		return nil, nil, &fieldError{"spec", err.Error()}
	}
	if err := r.checkTargets(bj, d); err != nil {
		return nil, nil, err
	}
	if err := r.checkSpec(d); err != nil {
		return nil, nil, err
	}
	if err := r.checkStepSecrets(ctx, bj, d); err != nil {
		return nil, nil, err
	}
	return spec.Data(), secrets, nil
}

// specCheckKey stands in for the idempotency key in checkSpec's job: the
// pod's key comes from the record, which does not exist yet.
const specCheckKey = "operator-check"

// checkSpec runs the backend's own check of the description alone
// (Options.SpecChecks), so that what the pod would refuse (exit 2) is
// refused before a Job is made. Texts in S3 are the pod's to read: such a
// description is left to the pod, as is one whose target is chosen later.
func (r *reconciler) checkSpec(d *record.Description) error {
	check := r.o.SpecChecks[d.Backend]
	if check == nil || len(d.Targets) > 0 || d.ExtraLocation == record.S3 {
		return nil
	}
	job := backends.Job{Name: "check", Key: specCheckKey, Properties: d.Properties,
		Metadata: []byte(d.Metadata), Parameters: []byte(d.Parameters)}
	switch d.ScriptLocation {
	case record.Inline:
		job.Script = d.Script
	case record.Remote:
		job.ScriptPath = d.Script
	default:
		return nil
	}
	err := check(job)
	var fe *backends.FieldError
	if errors.As(err, &fe) {
		return &fieldError{fieldPath(fe.Field), fe.Msg}
	}
	return err
}

// fieldPath turns a record key into its BridgeJob field path, so that the
// record's checks name the field the user wrote.
func fieldPath(key string) string {
	if f, ok := record.FieldByKey(key); ok && f.CRD != "" {
		return "spec." + f.CRD
	}
	return "spec (" + key + ")"
}

func s3Secret(bj *BridgeJob) string {
	if bj.Spec.S3Storage == nil {
		return ""
	}
	return bj.Spec.S3Storage.S3Secret
}

// checkStepSecrets checks spec.resourcesecret and spec.s3storage.s3secret
// (checkSecret) against what the description d sends them to.
func (r *reconciler) checkStepSecrets(ctx context.Context, bj *BridgeJob, d *record.Description) error {
	for _, m := range []struct{ field, name, dir string }{
		{"spec.resourcesecret", bj.Spec.ResourceSecret, credentialsDir},
		{"spec.s3storage.s3secret", s3Secret(bj), s3CredentialsDir},
	} {
		if m.name == "" {
			continue
		}
		if err := r.checkSecret(ctx, bj.Namespace, m.field, m.name, sendsFrom(d, m.dir)); err != nil {
			return err
		}
	}
	return nil
}
