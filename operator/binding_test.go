package operator

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestSecretGoesOnlyWhereItsOwnerBoundIt: a Secret that opted in is
// mounted only for a BridgeJob whose every URL that would receive it
// (resourceURL, a target's, a credential URL of jobproperties, the S3
// endpoint, a BridgeCluster's) is an origin its owner listed in the
// Secret's record.OriginsKey; an opted-in Secret without the key is not
// mounted for any remote job. Whoever may create BridgeClusters cannot
// point a colleague's Secret at their own URL either, not even by making
// the cluster a pending BridgeJob waits for. Nothing is created for a
// refused BridgeJob.
func TestSecretGoesOnlyWhereItsOwnerBoundIt(t *testing.T) {
	e := newEnv(t)
	e.secret("creds") // bound to testOrigins
	e.secretWith(e.ns, "unbound", map[string]string{SecretOptInLabel: "true"}, map[string]string{"token": "t"})
	e.secretWith(e.ns, "typo", map[string]string{SecretOptInLabel: "true"}, map[string]string{"token": "t", record.OriginsKey: "slurm.example.org:6820"})
	e.secretWith(e.ns, "s3", map[string]string{SecretOptInLabel: "true"}, map[string]string{"accesskey": "a", "secretkey": "s",
		record.OriginsKey: "https://s3.example.org:443"})
	e.opts = func(o *Options) { o.AllowLocal = false }
	e.operator("a")
	author := e.author()
	const thief = "https://thief.example.net:6820"

	url := e.slurmJob("url")
	url.Spec.ResourceURL = thief + "/slurm/v0.0.40/"
	e.createAs(author, url)
	iam := e.slurmJob("iam")
	iam.Spec.Backend, iam.Spec.ResourceURL = "quantum", "https://slurm.example.org:6820/api/v1"
	iam.Spec.JobProperties = `{"program_id":"sampler","backend":"ibm_torino","iam_endpoint":"` + thief + `/token"}`
	e.createAs(author, iam)
	target := e.localJob("target", "hostname")
	target.Spec.Backend, target.Spec.Targets = "", `[{"name":"a","backend":"slurm","resourceURL":"https://a.example.org:6820"},`+
		`{"name":"b","backend":"slurm","resourceURL":"`+thief+`","credentials":"."}]`
	e.createAs(author, target)
	unbound := e.slurmJob("unbound")
	unbound.Spec.ResourceSecret = "unbound"
	e.createAs(author, unbound)
	typo := e.slurmJob("typo")
	typo.Spec.ResourceSecret = "typo"
	e.createAs(author, typo)
	s3 := e.slurmJob("s3")
	s3.Spec.JobData = JobData{JobScript: "bucket:job.sh", ScriptLocation: "s3"}
	secure := true
	s3.Spec.S3Storage = &S3{S3Secret: "s3", Endpoint: "thief.example.net:9000", Secure: &secure}
	e.createAs(author, s3)
	fine := e.slurmJob("fine")
	e.createAs(author, fine)

	e.refused("url", "spec.resourcesecret", "not to https://thief.example.net:6820, where the job's resourceURL would send it")
	e.refused("iam", "spec.resourcesecret", "where the job's jobproperties.iam_endpoint would send it")
	e.refused("target", "spec (targets[1].credentials)", "names the step's own credentials (.)") // they go to one origin, however spelt
	e.refused("unbound", "spec.resourcesecret", "has no key "+record.OriginsKey)
	e.refused("typo", "spec.resourcesecret", record.OriginsKey+" entry 1 is not an origin")
	e.refused("s3", "spec.s3storage.s3secret", "not to https://thief.example.net:9000, where the job's s3.endpoint would send it")
	e.children("fine") // a bound Secret at its origin is mounted as before

	// A user who may create BridgeClusters, and nothing else, makes the
	// cluster a colleague's BridgeJob waits for, with the colleague's Secret
	// and their own URL.
	waiting := e.clusterJob("waiting", "hpc-x")
	e.createAs(author, waiting)
	e.waitState("waiting", "FAILED")
	mallory, err := newClient(testkube.ServiceAccountWithRules(t, e.kc, e.ns, "cluster-maker", rbacv1.PolicyRule{
		APIGroups: []string{GroupVersion.Group}, Resources: []string{"bridgeclusters"}, Verbs: []string{"create"}}))
	if err != nil {
		t.Fatal(err)
	}
	bc := &BridgeCluster{Spec: BridgeClusterSpec{Backend: "slurm", ResourceURL: thief, ResourceSecret: "creds"}}
	bc.APIVersion, bc.Kind = GroupVersion.String(), "BridgeCluster"
	bc.Name, bc.Namespace = "hpc-x", e.ns
	if err := mallory.Create(context.Background(), BridgeClusters, e.ns, bc, &BridgeCluster{}); err != nil {
		t.Fatalf("the cluster maker's BridgeCluster: %v", err)
	}
	e.waitFor("the waiting BridgeJob to be refused for the cluster's URL", func() (bool, error) {
		bj, err := e.get("waiting")
		return err == nil && strings.Contains(bj.Status.Message, "not to https://thief.example.net:6820"), err
	})
	e.refused("waiting", "spec.clusters[0] (the BridgeCluster hpc-x's spec.resourceSecret)", `the Secret "creds" is bound to`)
}

// TestPodMountsAreCheckedAgainstTheRecord: before a pod is made, the
// Secrets it would mount are checked again against the record, which
// whoever writes the namespace's ConfigMaps can edit after the BridgeJob
// was accepted: a resourceURL, a target naming the step's directory
// absolutely, or a cluster's target moved to another origin is refused.
func TestPodMountsAreCheckedAgainstTheRecord(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	r := &reconciler{c: e.c, o: Options{SecretOptIn: SecretOptInLabel}}
	ctx := context.Background()
	bj := e.slurmJob("j")
	recordOf := func(edit func(d map[string]string), annotations map[string]string) *kube.ConfigMap {
		cm := &kube.ConfigMap{Data: RecordSpec(bj).Data()}
		cm.Name, cm.Namespace, cm.Annotations = "j-bridge-cm", e.ns, annotations
		cm.Data["backend"] = "slurm"
		edit(cm.Data)
		return cm
	}
	if _, err := r.checkMounts(ctx, bj, recordOf(func(map[string]string) {}, nil)); err != nil {
		t.Fatalf("the record as the operator made it: %v", err)
	}
	const thief = "https://thief.example.net:6820"
	for name, c := range map[string]struct {
		edit        func(d map[string]string)
		annotations map[string]string
		field       string
	}{
		"resourceURL": {func(d map[string]string) { d["resourceURL"] = thief }, nil, "spec.resourcesecret"},
		"target at the step's directory": {func(d map[string]string) {
			d["resourceURL"], d["targets"] = "", `[{"name":"a","backend":"slurm","resourceURL":"`+thief+`","credentials":"/credentials"}]`
		}, nil, "spec.resourcesecret"},
		"cluster moved": {func(d map[string]string) {
			d["resourceURL"], d["targets"] = "", `[{"name":"hpc-a","backend":"slurm","resourceURL":"`+thief+`","credentials":"/targets/hpc-a"}]`
		}, map[string]string{AnnotationClusterSecrets: `{"hpc-a":"creds"}`}, "the record's " + AnnotationClusterSecrets + " annotation (cluster hpc-a)"},
	} {
		_, err := r.checkMounts(ctx, bj, recordOf(c.edit, c.annotations))
		if err == nil || !strings.HasPrefix(err.Error(), c.field+":") || !strings.Contains(err.Error(), "not to "+thief) {
			t.Errorf("%s: %v, want %s: ... not to %s", name, err, c.field, thief)
		}
	}
}
