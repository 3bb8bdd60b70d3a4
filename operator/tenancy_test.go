package operator

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// author is a client of someone who may do anything with BridgeJobs in the
// namespace and nothing else: no pods, no Secrets, no ConfigMaps.
func (e *env) author() *kube.Client {
	e.t.Helper()
	ctx := context.Background()
	r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "bridgejob-author"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{GroupVersion.Group}, Resources: []string{"bridgejobs"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	if _, err := e.kc.RbacV1().Roles(e.ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.bind("bridgejob-author", rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: r.Name},
		[]rbacv1.Subject{{Kind: "ServiceAccount", Name: "author", Namespace: e.ns}})
	c, err := newClient(testkube.ServiceAccountConfig(e.t, e.kc, e.ns, "author"))
	if err != nil {
		e.t.Fatal(err)
	}
	// The author's rights are BridgeJobs only: what follows is what the
	// operator lets them reach, not what they could do anyway.
	for _, res := range []string{"pods", "secrets", "configmaps"} {
		if err := c.REST().Get().AbsPath(kube.Resource{GV: kube.CoreV1, Plural: res}.Path(e.ns)).Do(ctx).Error(); !apierrors.IsForbidden(err) {
			e.t.Fatalf("the author may list %s (%v); the test needs a user with BridgeJob rights only", res, err)
		}
	}
	return c
}

// slurmJob is a BridgeJob for a Slurm REST URL with the Secret creds.
func (e *env) slurmJob(name string) *BridgeJob {
	bj := e.localJob(name, "hostname")
	bj.Spec.Backend = ""
	bj.Spec.ResourceURL = "https://slurm.example.org:6820/slurm/v0.0.37/"
	return bj
}

func (e *env) createAs(c *kube.Client, bj *BridgeJob) {
	e.t.Helper()
	if err := c.Create(context.Background(), BridgeJobs, e.ns, bj, &BridgeJob{}); err != nil {
		e.t.Fatalf("creating BridgeJob %s: %v", bj.Name, err)
	}
}

// refused waits for name to be FAILED for a bad spec naming field, and
// wants nothing created for it: no record, no Job, no ServiceAccount.
func (e *env) refused(name, field, says string) {
	e.t.Helper()
	bj := e.waitState(name, "FAILED")
	if !strings.HasPrefix(bj.Status.Message, field+":") || !strings.Contains(bj.Status.Message, says) {
		e.t.Errorf("%s: message %q, want %s: ...%s...", name, bj.Status.Message, field, says)
	}
	if c := condition(bj, CondAccepted); c.Status != "False" || c.Reason != "InvalidSpec" {
		e.t.Errorf("%s: Accepted condition = %+v", name, c)
	}
	ctx := context.Background()
	for res, n := range map[kube.Resource]string{kube.ConfigMaps: record.ConfigMapName(name), kube.ServiceAccounts: AccessName(name)} {
		if err := e.c.Get(ctx, res, e.ns, n, &kube.ConfigMap{}); !apierrors.IsNotFound(err) {
			e.t.Errorf("%s: %s %s exists (%v)", name, res, n, err)
		}
	}
	if err := e.c.Get(ctx, kube.Jobs, e.ns, JobName(name), &kube.Job{}); !apierrors.IsNotFound(err) {
		e.t.Errorf("%s: the Job exists (%v)", name, err)
	}
}

// TestTenancy: a user who may create BridgeJobs and nothing else gets
// neither an image of their choice, nor a Secret that did not opt in, nor
// the local backend, nor another namespace's Secret by a path.
func TestTenancy(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.secretIn(e.ns, "plain", nil)
	other := testkube.Namespace(t, e.kc)
	e.secretIn(other, "x", map[string]string{SecretOptInLabel: "true"})
	e.opts = func(o *Options) { o.AllowLocal = false }
	e.operator("a")
	author := e.author()

	foreign := e.slurmJob("foreign-image")
	foreign.Spec.Image = "evil.example.org/exfiltrate:latest"
	e.createAs(author, foreign)
	unlabelled := e.slurmJob("unlabelled")
	unlabelled.Spec.ResourceSecret = "plain"
	e.createAs(author, unlabelled)
	missing := e.slurmJob("missing")
	missing.Spec.ResourceSecret = "no-such-secret"
	e.createAs(author, missing)
	local := e.localJob("local", "cat /credentials/*")
	e.createAs(author, local)
	implicitLocal := e.localJob("implicit-local", "cat /credentials/*")
	implicitLocal.Spec.Backend = ""
	e.createAs(author, implicitLocal)
	escape := e.slurmJob("escape")
	escape.Spec.ResourceSecret = "../../" + other + "/secrets/x"
	e.createAs(author, escape)
	escapeS3 := e.slurmJob("escape-s3")
	escapeS3.Spec.S3Storage = &S3{S3Secret: "../../../kube-system", Endpoint: "s3.example.org"}
	e.createAs(author, escapeS3)

	_, kj := e.children("foreign-image")
	if img := kj.Spec.Template.Spec.Containers[0].Image; img != testImage {
		t.Errorf("the Job runs %q, want the operator's %q", img, testImage)
	}
	e.waitEvent("foreign-image", "Warning", "ImageIgnored", "evil.example.org/exfiltrate:latest")

	e.refused("unlabelled", "spec.resourcesecret", SecretOptInLabel+"=true")
	e.refused("missing", "spec.resourcesecret", SecretOptInLabel+"=true")
	// A missing Secret and one that did not opt in read the same: no oracle.
	u, _ := e.get("unlabelled")
	m, _ := e.get("missing")
	if strings.ReplaceAll(u.Status.Message, "plain", "X") != strings.ReplaceAll(m.Status.Message, "no-such-secret", "X") {
		t.Errorf("a missing Secret and one that did not opt in are told apart:\n%s\n%s", u.Status.Message, m.Status.Message)
	}
	e.refused("local", "spec.backend", "--allow-local")
	e.refused("implicit-local", "spec.backend", "--allow-local")
	e.refused("escape", "spec.resourcesecret", "is not the name of a Secret")
	e.refused("escape-s3", "spec.s3storage.s3secret", "is not the name of a Secret")
}

func (e *env) waitEvent(name, typ, reason, says string) {
	e.t.Helper()
	e.waitFor(typ+" Event "+reason+" on "+name, func() (bool, error) {
		evs, err := e.kc.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Type == typ && ev.Reason == reason && strings.Contains(ev.Message, says) {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestAllowedImageAndSecret: what the admin lists is used as named.
func TestAllowedImageAndSecret(t *testing.T) {
	e := newEnv(t)
	e.secretIn(e.ns, "listed", nil)
	e.opts = func(o *Options) {
		o.AllowedImages = []string{"registry.example.org/bridge-runner:*"}
		o.AllowedSecrets = []string{e.ns + "/listed"}
		o.SecretOptIn = "" // no Secret is read: the list decides
	}
	e.operator("a")
	bj := e.slurmJob("listed")
	bj.Spec.ResourceSecret = "listed"
	bj.Spec.Image = "registry.example.org/bridge-runner:v2"
	e.create(bj)
	_, kj := e.children("listed")
	if img := kj.Spec.Template.Spec.Containers[0].Image; img != bj.Spec.Image {
		t.Errorf("the Job runs %q, want the allowed %q", img, bj.Spec.Image)
	}
	e.secret("labelled") // a label does not count when the operator reads no Secret
	bj = e.slurmJob("labelled")
	bj.Spec.ResourceSecret = "labelled"
	e.create(bj)
	e.refused("labelled", "spec.resourcesecret", "--allowed-secrets")
}

// TestPodServiceAccount: a BridgeJob's pods run as its own ServiceAccount,
// which reaches its record and no other ConfigMap, and no Secret.
func TestPodServiceAccount(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.operator("a")
	e.create(e.localJob("mine", "true"))
	cm, kj := e.children("mine")
	sa := kj.Spec.Template.Spec.ServiceAccountName
	if sa != AccessName("mine") {
		t.Fatalf("the pod's ServiceAccount is %q, want %q", sa, AccessName("mine"))
	}
	ctx := context.Background()
	if _, err := e.kc.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := newClient(testkube.ServiceAccountConfig(t, e.kc, e.ns, sa))
	if err != nil {
		t.Fatal(err)
	}
	if err := pod.Get(ctx, kube.ConfigMaps, e.ns, cm.Name, &kube.ConfigMap{}); err != nil {
		t.Errorf("the pod cannot read its record: %v", err)
	}
	if err := pod.Get(ctx, kube.ConfigMaps, e.ns, "someone-elses", &kube.ConfigMap{}); !apierrors.IsForbidden(err) {
		t.Errorf("the pod reads another ConfigMap: %v", err)
	}
	for _, res := range []string{"configmaps", "secrets", "pods"} {
		if err := pod.REST().Get().AbsPath(kube.Resource{GV: kube.CoreV1, Plural: res}.Path(e.ns)).Do(ctx).Error(); !apierrors.IsForbidden(err) {
			t.Errorf("the pod lists %s: %v", res, err)
		}
	}
	if err := pod.Get(ctx, kube.Secrets, e.ns, "creds", &kube.ConfigMap{}); !apierrors.IsForbidden(err) {
		t.Errorf("the pod reads a Secret through the API: %v", err)
	}
	// And it is enough: invoke (played with this identity) runs the job.
	if code := exitCode(t, e.invoke(kj)); code != 0 {
		t.Fatalf("invoke exited %d; stderr:\n%s", code, e.logs)
	}
	e.waitState("mine", "DONE")
}

// ibmSample reads one of IBM's BridgeJobs as IBM ships it, with the
// placeholders its docs ask users to fill in filled.
func ibmSample(t *testing.T, file, url, secret string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/ibm/" + file)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer("{{RESOURCE_URL}}", url, "{{RESOURCE_SECRET}}", secret).Replace(string(b))
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestIBMSlurmSample: IBM's job0slurm.yaml applies unchanged: no backend
// (its /slurm/v0.0.37 URL says slurm, as invoke would read it), and IBM's
// slurm-pod image ignored for ours, with one Warning saying so. With a URL
// that does not say, the operator's BRIDGE_BACKEND decides.
func TestIBMSlurmSample(t *testing.T) {
	for name, tc := range map[string]struct{ url, defaultBackend string }{
		"url":     {"https://slurm.example.org:6820/slurm/v0.0.37/", ""},
		"default": {"https://slurm.example.org:6820", "slurm"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.secret("slurm-secret")
			e.opts = func(o *Options) { o.DefaultBackend, o.JobImagePullPolicy = tc.defaultBackend, testPullPolicy }
			e.operator("a")
			body := ibmSample(t, "job0slurm.yaml", tc.url, "slurm-secret")
			if err := e.c.REST().Post().AbsPath(BridgeJobs.Path(e.ns)).Body(body).Do(context.Background()).Error(); err != nil {
				t.Fatalf("applying IBM's job0slurm.yaml: %v", err)
			}
			cm, kj := e.children("slurmjob")
			if got := cm.Data["backend"]; got != "slurm" {
				t.Errorf("record's backend = %q, want slurm", got)
			}
			c := kj.Spec.Template.Spec.Containers[0]
			// IBM's imagepullpolicy: Always is for IBM's image, which does
			// not run: ours is pulled as the operator's admin said.
			if c.Image != testImage || c.ImagePullPolicy != testPullPolicy {
				t.Errorf("the Job runs %q (pull %q), want ours, %q (pull %q, the operator's, not IBM's Always)", c.Image, c.ImagePullPolicy, testImage, testPullPolicy)
			}
			// -o wide's BACKEND shows what the operator inferred: the API
			// server's own Table, as kubectl asks for it.
			e.waitFor("kubectl get -o wide showing BACKEND slurm", func() (bool, error) {
				got, err := e.printerColumn("slurmjob", "Backend")
				return got == "slurm", err
			})
			e.waitEvent("slurmjob", "Warning", "ImageIgnored", "quay.io/ibmdpdev/slurm-pod:v0.0.1")
			time.Sleep(time.Second) // the Warning is said once
			evs, _ := e.kc.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=slurmjob,reason=ImageIgnored"})
			if len(evs.Items) != 1 {
				t.Errorf("%d ImageIgnored Events, want 1", len(evs.Items))
			}
		})
	}
}

// TestNamespacedInstall: with deploy/operator-namespaced's Role (no
// ClusterRole) an operator of one namespace does its whole job, and that
// Role's rules are the ClusterRole's.
func TestNamespacedInstall(t *testing.T) {
	e := newEnv(t)
	rules := func(file, kind, name string) []rbacv1.PolicyRule {
		for _, doc := range testutil.YAMLDocs(t, file) {
			var obj struct {
				Kind     string              `json:"kind"`
				Metadata metav1.ObjectMeta   `json:"metadata"`
				Rules    []rbacv1.PolicyRule `json:"rules"`
			}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatal(err)
			}
			if obj.Kind == kind && obj.Metadata.Name == name {
				return obj.Rules
			}
		}
		t.Fatalf("%s has no %s %s", file, kind, name)
		return nil
	}
	a := append(rules("../deploy/operator/rbac.yaml", "ClusterRole", "bridge-runner-operator"),
		rules("../deploy/operator/rbac.yaml", "ClusterRole", "bridge-runner-operator-namespace")...)
	if b := rules("../deploy/operator-namespaced/role.yaml", "Role", "bridge-runner-operator"); !reflect.DeepEqual(a, b) {
		t.Errorf("the namespaced Role's rules differ from the two ClusterRoles':\n%+v\n%+v", b, a)
	}
	e.secret("creds")
	// The Roles only: the namespaced Role, and the base's leader election Role.
	e.grantOperatorRBAC(false, "../deploy/operator-namespaced/role.yaml", "../deploy/operator/rbac.yaml")
	e.opCfg = testkube.ServiceAccountConfig(t, e.kc, e.ns, "bridge-runner-operator")
	e.operator("ns")
	e.create(e.localJob("scoped", "echo one namespace"))
	_, kj := e.children("scoped")
	if code := exitCode(t, e.invoke(kj)); code != 0 {
		t.Fatalf("invoke exited %d; stderr:\n%s", code, e.logs)
	}
	e.waitState("scoped", "DONE")
}

// printerColumn is the BridgeJob's cell in the column named col of the
// table the API server renders for `kubectl get -o wide`.
func (e *env) printerColumn(name, col string) (string, error) {
	var table metav1.Table
	err := e.c.REST().Get().AbsPath(BridgeJobs.Path(e.ns), name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(context.Background()).Into(&table)
	if err != nil {
		return "", err
	}
	for i, c := range table.ColumnDefinitions {
		if c.Name == col && len(table.Rows) == 1 {
			v, _ := table.Rows[0].Cells[i].(string)
			return v, nil
		}
	}
	return "", fmt.Errorf("the table has no column %s (or not one row): %+v", col, table.ColumnDefinitions)
}

// TestIBMRayShape: a BridgeJob shaped as IBM's Ray samples (IBM's ray-pod
// image, pulled Always, no backend, the Ray head's dashboard URL as IBM's
// Ray README gives it, an inline Python script with pip metadata) is taken
// as ray, and -o wide says so.
func TestIBMRayShape(t *testing.T) {
	e := newEnv(t)
	const url = "http://ray-ray-head.ray.svc.cluster.local:8265"
	e.secretWith(e.ns, "ray-secret", map[string]string{SecretOptInLabel: "true"}, map[string]string{"username": "x", "password": "x", record.OriginsKey: url})
	e.operator("a")
	bj := e.localJob("bridgejob-ray", "import ray\nray.init()\nprint('hello')\n")
	bj.Spec.Backend, bj.Spec.ResourceURL, bj.Spec.ResourceSecret = "", url, "ray-secret"
	bj.Spec.Image, bj.Spec.ImagePullPolicy, bj.Spec.UpdateInterval = "quay.io/ibmdpdev/ray-pod:v0.0.1", "Always", 20
	bj.Spec.JobData.ScriptMetadata = `{"pip": {"requests": "2.26.0"}, "env": {"MY_VARIABLE1": "foo"}}`
	bj.Spec.JobData.JobParameters = `{"iterations": "7"}`
	e.create(bj)
	cm, _ := e.children("bridgejob-ray")
	if got := cm.Data["backend"]; got != "ray" {
		t.Errorf("record's backend = %q, want ray", got)
	}
	e.waitFor("kubectl get -o wide showing BACKEND ray", func() (bool, error) {
		got, err := e.printerColumn("bridgejob-ray", "Backend")
		return got == "ray", err
	})
}
