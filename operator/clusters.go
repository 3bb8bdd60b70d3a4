package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// clustersDir is where the pod finds each listed cluster's credentials:
// the cluster's Secret at /targets/<cluster>, the record's target
// credentials (an absolute directory, so no cluster shares the step's own).
const clustersDir = "/targets"

// AnnotationClusterSecrets on a BridgeJob's record maps each cluster of
// spec.clusters to the Secret checked for it when the record was made: the
// pods mount those, so a BridgeCluster edited or deleted later never puts
// another system's Secret beside the targets the record already names (and
// cleanup still finds the credentials of a cluster that is gone).
const AnnotationClusterSecrets = "bridgejob.ibm.com/cluster-secrets"

// clusterName is what a record's target name may be (record.parseTargets):
// a cluster's name becomes the target's name and a directory.
var clusterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// clusterCredentials is the directory of cluster name's credentials.
func clusterCredentials(name string) string { return clustersDir + "/" + name }

// clusterTargets turns spec.clusters into the record's targets (JSON), the
// backend they share ("" when they differ) and each cluster's Secret. A
// cluster is read from the operator's watch of BridgeClusters; its Secret
// obeys the rule of spec.resourcesecret (checkSecret).
func (r *reconciler) clusterTargets(ctx context.Context, bj *BridgeJob) (targets, backend string, secrets map[string]string, err error) {
	for field, v := range map[string]string{"spec.resourceURL": bj.Spec.ResourceURL, "spec.targets": bj.Spec.Targets, "spec.backend": bj.Spec.Backend} {
		if strings.TrimSpace(v) != "" {
			return "", "", nil, &fieldError{"spec.clusters", fmt.Sprintf("is given with %s; a BridgeJob names its places either by spec.clusters "+
				"(each BridgeCluster has its backend, URL and Secret) or by spec.resourceURL, spec.backend and spec.targets: remove one", field)}
		}
	}
	ts := make([]record.Target, 0, len(bj.Spec.Clusters))
	secrets = map[string]string{}
	backends := map[string]bool{}
	for i, name := range bj.Spec.Clusters {
		t, secret, err := r.clusterTarget(ctx, bj, i, name)
		if err != nil {
			return "", "", nil, err
		}
		if _, dup := secrets[name]; dup {
			return "", "", nil, &fieldError{fmt.Sprintf("spec.clusters[%d]", i), fmt.Sprintf("lists %s twice; name each cluster once", name)}
		}
		secrets[name] = secret
		backends[t.Backend] = true
		ts = append(ts, t)
		backend = t.Backend
	}
	if len(backends) != 1 {
		backend = ""
	}
	raw, err := json.Marshal(ts)
	if err != nil {
		return "", "", nil, err
	}
	return string(raw), backend, secrets, nil
}

// clusterTarget is the target for spec.clusters[i] and its Secret.
func (r *reconciler) clusterTarget(ctx context.Context, bj *BridgeJob, i int, name string) (record.Target, string, error) {
	field := fmt.Sprintf("spec.clusters[%d]", i)
	if !clusterName.MatchString(name) {
		return record.Target{}, "", &fieldError{field, fmt.Sprintf("%q is not a BridgeCluster a BridgeJob may list: 1 to 40 lower-case letters, digits and dashes", name)}
	}
	bc, _ := r.cached(r.clusters, bj.Namespace, name).(*BridgeCluster)
	if bc == nil {
		return record.Target{}, "", &fieldError{field, fmt.Sprintf("the BridgeCluster %s does not exist in namespace %s; create it or remove it from spec.clusters", name, bj.Namespace)}
	}
	secret := bc.Spec.ResourceSecret
	sfield := fmt.Sprintf("%s (the BridgeCluster %s's spec.resourceSecret)", field, name)
	if errs := validation.IsDNS1123Subdomain(secret); len(errs) > 0 {
		return record.Target{}, "", &fieldError{sfield, fmt.Sprintf("%q is not the name of a Secret; name a Secret of namespace %s", secret, bj.Namespace)}
	}
	backend, err := r.clusterBackend(ctx, bc, field)
	if err != nil {
		return record.Target{}, "", err
	}
	t := record.Target{Name: name, Backend: backend, ResourceURL: strings.TrimSpace(bc.Spec.ResourceURL), Credentials: clusterCredentials(name),
		StartErrors: bc.Status.StartErrors} // earliest-start corrects the cluster's estimates by them
	if agentEnabled(bc) {
		// Placement reads this cluster's load from its agent's sealed
		// heartbeat (falling back to its own probe), not from a probe per step.
		t.Cluster = name
	}
	if p := strings.TrimSpace(bc.Spec.JobProperties); p != "" {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(p), &obj) != nil {
			return record.Target{}, "", &fieldError{field, fmt.Sprintf("the BridgeCluster %s's spec.jobproperties is not a JSON object; give e.g. {\"partition\":\"debug\"}", name)}
		}
		t.JobProperties = json.RawMessage(p)
	}
	// Whoever may create BridgeClusters chooses the URL; the Secret's owner
	// chose where it may go.
	if err := r.checkSecret(ctx, bj.Namespace, sfield, secret, sendsFrom(&record.Description{Targets: []record.Target{t}}, t.Credentials)); err != nil {
		return record.Target{}, "", err
	}
	return t, secret, nil
}

// clusterBackend is a cluster's backend by invoke's rules (its
// spec.backend, else the operator's default, else what its URL says,
// without a request to it: selectBackend), never local unless the admin
// allows it.
func (r *reconciler) clusterBackend(ctx context.Context, bc *BridgeCluster, field string) (string, error) {
	name, _, err := r.selectBackend(ctx, bc.Spec.Backend, bc.Spec.ResourceURL, nil)
	if err != nil {
		return "", &fieldError{field, fmt.Sprintf("the BridgeCluster %s: %v", bc.Name, err)}
	}
	if name == record.LocalBackend && !r.o.AllowLocal {
		return "", &fieldError{field, fmt.Sprintf("the BridgeCluster %s is local, which runs the script inside the Job's pod; this operator does not run local jobs", bc.Name)}
	}
	return name, nil
}

// clusterFieldPath names the spec.clusters entry a record error about
// targets[i] is about, when the targets came from spec.clusters.
func clusterFieldPath(bj *BridgeJob, key string) (string, bool) {
	var i int
	var rest string
	if len(bj.Spec.Clusters) == 0 || !strings.HasPrefix(key, "targets[") {
		return "", false
	}
	if n, _ := fmt.Sscanf(key, "targets[%d]%s", &i, &rest); n < 1 || i < 0 || i >= len(bj.Spec.Clusters) {
		return "spec.clusters", true
	}
	return fmt.Sprintf("spec.clusters[%d] (the BridgeCluster %s: %s)", i, bj.Spec.Clusters[i], strings.TrimPrefix(rest, ".")), true
}

// recordClusterSecrets reads AnnotationClusterSecrets of a record, sorted
// by cluster name so that the pod's volumes come in a stable order.
func recordClusterSecrets(cm *kube.ConfigMap) [][2]string {
	var m map[string]string
	if cm == nil || json.Unmarshal([]byte(cm.Annotations[AnnotationClusterSecrets]), &m) != nil {
		return nil
	}
	out := make([][2]string, 0, len(m))
	for c, s := range m {
		out = append(out, [2]string{c, s})
	}
	sort.Slice(out, func(a, b int) bool { return out[a][0] < out[b][0] })
	return out
}

// checkMounts checks the Secrets a pod of the BridgeJob would mount
// against its record, again, before the pod is made: the record is
// writable by the BridgeJob's own pods (and by whoever writes the
// namespace's ConfigMaps), so its description and its cluster annotation
// are trusted no more than a spec (names, the opt-in rule, the Secrets'
// bindings). It returns the clusters' mounts.
func (r *reconciler) checkMounts(ctx context.Context, bj *BridgeJob, cm *kube.ConfigMap) ([][2]string, error) {
	d, err := record.SpecFromData(cm.Data).Parse()
	if err != nil {
		return nil, &fieldError{"the record " + cm.Name, "is not a job description any more; delete the BridgeJob and create it again"}
	}
	if err := r.checkStepSecrets(ctx, bj, d); err != nil {
		return nil, err
	}
	mounts := recordClusterSecrets(cm)
	for _, m := range mounts {
		field := fmt.Sprintf("the record's %s annotation (cluster %s)", AnnotationClusterSecrets, m[0])
		if !clusterName.MatchString(m[0]) || len(validation.IsDNS1123Subdomain(m[1])) > 0 {
			return nil, &fieldError{field, "is not a cluster and Secret name; delete the BridgeJob and create it again"}
		}
		if err := r.checkSecret(ctx, cm.Namespace, field, m[1], sendsFrom(d, clusterCredentials(m[0]))); err != nil {
			return nil, err
		}
	}
	return mounts, nil
}
