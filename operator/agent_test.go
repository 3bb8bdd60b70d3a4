package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// agentCluster creates a BridgeCluster with an agent spec.
func (e *env) agentCluster(name, url, secret string, agent *AgentSpec) *BridgeCluster {
	e.t.Helper()
	bc := &BridgeCluster{Spec: BridgeClusterSpec{Backend: "slurm", ResourceURL: url, ResourceSecret: secret, Agent: agent}}
	bc.APIVersion, bc.Kind = GroupVersion.String(), "BridgeCluster"
	bc.Name, bc.Namespace = name, e.ns
	out := &BridgeCluster{}
	if err := e.c.Create(context.Background(), BridgeClusters, e.ns, bc, out); err != nil {
		e.t.Fatalf("creating BridgeCluster %s: %v", name, err)
	}
	return out
}

func (e *env) getCluster(name string) *BridgeCluster {
	e.t.Helper()
	bc := &BridgeCluster{}
	if err := e.c.Get(context.Background(), BridgeClusters, e.ns, name, bc); err != nil {
		e.t.Fatal(err)
	}
	return bc
}

// editCluster changes the BridgeCluster's spec (again on a conflict with
// the operator's writes).
func (e *env) editCluster(name string, edit func(*BridgeCluster)) {
	e.t.Helper()
	e.waitFor("an edit of "+name, func() (bool, error) {
		bc := e.getCluster(name)
		edit(bc)
		bc.APIVersion, bc.Kind = GroupVersion.String(), "BridgeCluster"
		err := e.c.Update(context.Background(), BridgeClusters, e.ns, name, bc, &BridgeCluster{})
		if err != nil && !apierrors.IsConflict(err) {
			e.t.Fatal(err)
		}
		return err == nil, err
	})
}

// clusterCondition waits for the cluster's condition typ to have status
// and reason, and returns it.
func (e *env) clusterCondition(name, typ, status, reason string) (Condition, *BridgeCluster) {
	e.t.Helper()
	var c Condition
	var bc *BridgeCluster
	e.waitFor(fmt.Sprintf("%s's %s=%s (%s)", name, typ, status, reason), func() (bool, error) {
		bc = e.getCluster(name)
		for _, x := range bc.Status.Conditions {
			if x.Type == typ {
				c = x
			}
		}
		return c.Status == status && c.Reason == reason, fmt.Errorf("conditions %+v", bc.Status.Conditions)
	})
	return c, bc
}

// deployment waits for the agent's Deployment to satisfy ok.
func (e *env) deployment(name string, ok func(*Deployment) bool) *Deployment {
	e.t.Helper()
	var d *Deployment
	e.waitFor("the agent's Deployment "+name, func() (bool, error) {
		d = &Deployment{}
		err := e.c.Get(context.Background(), Deployments, e.ns, name, d)
		return err == nil && ok(d), err
	})
	return d
}

func anyDeployment(*Deployment) bool { return true }

// TestAgentDeployment: a BridgeCluster gets its agent: a Deployment of the
// exact shape of the agent's contract and the pod's least rights, its
// ServiceAccount, and a Role on ConfigMaps only with its RoleBinding, all
// owned by the BridgeCluster and labelled for it. A spec change updates
// the Deployment; readiness (set by hand: no kubelet here) becomes
// AgentReady; disabling the agent deletes its objects.
func TestAgentDeployment(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.secret("creds-b")
	e.opts = func(o *Options) { o.JobImagePullPolicy = testPullPolicy }
	e.operator("a")
	bc := e.agentCluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", nil)
	name := AgentName("hpc-a")
	d := e.deployment(name, anyDeployment)
	checkAgentShape(t, d, bc, "creds-a")
	if got, want := d.Spec.Template.Spec.Containers[0].Args, []string{"agent", "--cluster", "hpc-a", "--backend", "slurm",
		"--resource-url", "https://slurm-a.example.org:6820", "--credentials-dir", "/var/run/bridge-runner/cluster",
		"--namespaces", e.ns, "--query-interval", "2s"}; !slices.Equal(got, want) {
		t.Errorf("the agent's args\n %q, want\n %q", got, want)
	}
	e.checkAgentAccess(bc)
	c, got := e.clusterCondition("hpc-a", CondAgentReady, "False", "NotReady")
	if got.Status.Agent == nil || got.Status.Agent.Deployment != name || got.Status.Agent.ObservedInterval != "2s" ||
		!slices.Equal(got.Status.Agent.Namespaces, []string{e.ns}) {
		t.Errorf("status.agent %+v (condition %+v)", got.Status.Agent, c)
	}

	e.markReady(d)
	if _, got = e.clusterCondition("hpc-a", CondAgentReady, "True", "Ready"); got.Status.Agent.ReadyReplicas != 1 {
		t.Errorf("status.agent.readyReplicas %d, want 1", got.Status.Agent.ReadyReplicas)
	}
	if cols := e.wideColumns("hpc-a"); cols["Agent"] != "True" || cols["Interval"] != "2s" {
		t.Errorf("kubectl get -o wide shows %v, want Agent True and Interval 2s", cols)
	}
	if e.clusterEventCount("hpc-a", "AgentUpdated") != 0 {
		t.Error("the operator updated a Deployment that it had just made as it is (what the API server fills in is no change)")
	}
	gen := e.revertsDrift(name)

	e.editCluster("hpc-a", func(bc *BridgeCluster) {
		bc.Spec.ResourceURL, bc.Spec.ResourceSecret = "https://slurm-b.example.org:6820", "creds-b"
		bc.Spec.Agent = &AgentSpec{QueryInterval: "2m"}
	})
	d = e.deployment(name, func(d *Deployment) bool { return d.Generation > gen })
	checkAgentShape(t, d, bc, "creds-b")
	args := d.Spec.Template.Spec.Containers[0].Args
	if args[6] != "https://slurm-b.example.org:6820" || args[len(args)-1] != "2m0s" {
		t.Errorf("after the spec's change the args are %q", args)
	}
	if _, got = e.clusterCondition("hpc-a", CondAgentReady, "False", "NotReady"); got.Status.Agent.ObservedInterval != "2m0s" {
		t.Errorf("status.agent.observedInterval %q, want 2m0s", got.Status.Agent.ObservedInterval)
	}

	no := false
	e.editCluster("hpc-a", func(bc *BridgeCluster) { bc.Spec.Agent.Enabled = &no })
	e.clusterCondition("hpc-a", CondAgentReady, "False", "Disabled")
	e.waitFor("the agent's objects to go", func() (bool, error) {
		ctx := context.Background()
		var errs []error
		for _, o := range []struct {
			res kube.Resource
			out namedObject
		}{{Deployments, &Deployment{}}, {kube.ServiceAccounts, &kube.ServiceAccount{}}, {kube.Roles, &kube.Role{}}, {kube.RoleBindings, &kube.RoleBinding{}}} {
			if err := e.c.Get(ctx, o.res, e.ns, name, o.out); !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("%s: %v", o.res.Plural, err))
			}
		}
		return len(errs) == 0, errors.Join(errs...)
	})
}

// revertsDrift edits the agent's Deployment by hand (an extra flag) and
// waits for the operator to put its args back; it returns the generation.
func (e *env) revertsDrift(name string) int64 {
	e.t.Helper()
	d := e.deployment(name, anyDeployment)
	want := slices.Clone(d.Spec.Template.Spec.Containers[0].Args)
	d.Spec.Template.Spec.Containers[0].Args = append(d.Spec.Template.Spec.Containers[0].Args, "--by-hand")
	d.APIVersion, d.Kind = AppsV1.String(), "Deployment"
	if err := e.c.Update(context.Background(), Deployments, e.ns, name, d, &Deployment{}); err != nil {
		e.t.Fatal(err)
	}
	d = e.deployment(name, func(d *Deployment) bool { return slices.Equal(d.Spec.Template.Spec.Containers[0].Args, want) })
	return d.Generation
}

// clusterEventCount counts the Events of reason on the BridgeCluster name.
func (e *env) clusterEventCount(name, reason string) int {
	e.t.Helper()
	list, err := e.kc.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "BridgeCluster" && ev.InvolvedObject.Name == name && ev.Reason == reason {
			n++
		}
	}
	return n
}

// checkAgentShape checks everything of the Deployment but its args.
func checkAgentShape(t *testing.T, d *Deployment, bc *BridgeCluster, secret string) {
	t.Helper()
	checkAgentMeta(t, "Deployment", &d.ObjectMeta, bc)
	s := d.Spec
	if s.Replicas == nil || *s.Replicas != 1 || s.Strategy.Type != "Recreate" {
		t.Errorf("replicas %v, strategy %q; want 1 and Recreate", s.Replicas, s.Strategy.Type)
	}
	p := s.Template.Spec
	if p.ServiceAccountName != AgentName(bc.Name) || p.AutomountServiceAccountToken == nil || !*p.AutomountServiceAccountToken {
		t.Errorf("serviceAccountName %q, automount %v", p.ServiceAccountName, p.AutomountServiceAccountToken)
	}
	if sc := p.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil || sc.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("the pod's securityContext %+v", sc)
	}
	// The Secret's files are root's at 0400: without the image user's
	// group as fsGroup the non-root agent cannot read them (it crashed so
	// in the e2e cluster).
	if sc := p.SecurityContext; sc == nil || sc.FSGroup == nil || *sc.FSGroup != 65532 {
		t.Errorf("the pod's securityContext %+v, want fsGroup 65532 (the image's user's group) so that the agent reads its 0400 Secret", sc)
	}
	if len(p.Containers) != 1 || len(p.Volumes) != 1 {
		t.Fatalf("%d containers and %d volumes, want one of each", len(p.Containers), len(p.Volumes))
	}
	if v := p.Volumes[0]; v.Secret == nil || v.Secret.SecretName != secret || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 {
		t.Errorf("the volume %+v, want only the Secret %s with mode 0400", v, secret)
	}
	c := p.Containers[0]
	if c.Image != testImage || c.ImagePullPolicy != testPullPolicy {
		t.Errorf("image %q (%q), want the jobs' %q", c.Image, c.ImagePullPolicy, testImage)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0] != (kube.VolumeMount{Name: p.Volumes[0].Name, MountPath: "/var/run/bridge-runner/cluster", ReadOnly: true}) {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "POD_NAMESPACE" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("env %+v, want POD_NAMESPACE from the downward API", c.Env)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Port != 8081 ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port != 8081 {
		t.Errorf("probes %+v %+v, want /healthz and /readyz on 8081", c.LivenessProbe, c.ReadinessProbe)
	}
	if !slices.ContainsFunc(c.Ports, func(p ContainerPort) bool { return p.ContainerPort == 8080 && p.Name == "metrics" }) {
		t.Errorf("ports %+v, want metrics on 8080", c.Ports)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("the container's securityContext %+v", sc)
	}
	if r := c.Resources; r == nil || r.Requests["cpu"] == "" || r.Requests["memory"] == "" || r.Limits["memory"] == "" || r.Limits["cpu"] == "" {
		t.Errorf("resources %+v, want requests and limits", r)
	}
}

// checkAgentMeta: the object is the cluster's (owner reference, labels).
func checkAgentMeta(t *testing.T, kind string, m *metav1.ObjectMeta, bc *BridgeCluster) {
	t.Helper()
	if len(m.OwnerReferences) != 1 || !ownedByCluster(m, bc) || m.OwnerReferences[0].BlockOwnerDeletion == nil || !*m.OwnerReferences[0].BlockOwnerDeletion {
		t.Errorf("the %s's ownerReferences %+v, want the BridgeCluster %s (%s) as controller", kind, m.OwnerReferences, bc.Name, bc.UID)
	}
	if m.Labels["app.kubernetes.io/managed-by"] != "bridge-runner-operator" || m.Labels[LabelCluster] != bc.Name {
		t.Errorf("the %s's labels %v", kind, m.Labels)
	}
}

// checkAgentAccess: the agent's ServiceAccount, and a Role allowing
// ConfigMaps and nothing else, bound to it, each the cluster's.
func (e *env) checkAgentAccess(bc *BridgeCluster) {
	e.t.Helper()
	ctx, name := context.Background(), AgentName(bc.Name)
	sa, ro, rb := &kube.ServiceAccount{}, &kube.Role{}, &kube.RoleBinding{}
	e.waitFor("the agent's ServiceAccount, Role and RoleBinding", func() (bool, error) {
		err := errors.Join(e.c.Get(ctx, kube.ServiceAccounts, e.ns, name, sa), e.c.Get(ctx, kube.Roles, e.ns, name, ro),
			e.c.Get(ctx, kube.RoleBindings, e.ns, name, rb))
		return err == nil, err
	})
	checkAgentMeta(e.t, "ServiceAccount", &sa.ObjectMeta, bc)
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		e.t.Errorf("the agent's ServiceAccount automounts its token into any pod (%v); only the agent's pod asks for it", sa.AutomountServiceAccountToken)
	}
	checkAgentMeta(e.t, "Role", &ro.ObjectMeta, bc)
	checkAgentMeta(e.t, "RoleBinding", &rb.ObjectMeta, bc)
	want := []kube.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}}
	if !reflect.DeepEqual(ro.Rules, want) {
		e.t.Errorf("the agent's Role %+v, want %+v", ro.Rules, want)
	}
	if rb.RoleRef != (kube.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}) ||
		!slices.Equal(rb.Subjects, []kube.Subject{{Kind: "ServiceAccount", Name: name, Namespace: e.ns}}) {
		e.t.Errorf("the agent's RoleBinding %+v %+v", rb.RoleRef, rb.Subjects)
	}
}

// markReady plays the Deployment controller and the kubelet: one ready
// replica of the Deployment's generation, written to its status.
func (e *env) markReady(d *Deployment) {
	e.t.Helper()
	d.Status = DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	d.APIVersion, d.Kind = AppsV1.String(), "Deployment"
	if err := e.c.Update(context.Background(), Deployments, e.ns, d.Name, d, &Deployment{}, "status"); err != nil {
		e.t.Fatal(err)
	}
}

// TestAgentInterval: the CRD refuses a queryInterval that is no duration;
// one out of range gets AgentReady False (InvalidSpec) and a Warning, each
// naming the field and the range, and no agent.
func TestAgentInterval(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.operator("a")
	bad := &BridgeCluster{Spec: BridgeClusterSpec{ResourceURL: "https://slurm-a.example.org:6820", ResourceSecret: "creds-a",
		Agent: &AgentSpec{QueryInterval: "2 seconds"}}}
	bad.APIVersion, bad.Kind, bad.Name = GroupVersion.String(), "BridgeCluster", "words"
	if err := e.c.Create(context.Background(), BridgeClusters, e.ns, bad, &BridgeCluster{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.agent.queryInterval") {
		t.Errorf("a queryInterval of words: %v, want the CRD to refuse spec.agent.queryInterval", err)
	}
	for _, v := range []string{"50ms", "45m"} {
		name := "every-" + strings.ToLower(v)
		e.agentCluster(name, "https://slurm-a.example.org:6820", "creds-a", &AgentSpec{QueryInterval: v})
		c, _ := e.clusterCondition(name, CondAgentReady, "False", "InvalidSpec")
		want := "spec.agent.queryInterval: " + v + " is outside 100ms..30m0s"
		if !strings.HasPrefix(c.Message, want) {
			t.Errorf("the condition says %q, want it to start %q", c.Message, want)
		}
		e.waitFor("a Warning on "+name, func() (bool, error) {
			return e.clusterWarned(name, "InvalidSpec", want), nil
		})
		if err := e.c.Get(context.Background(), Deployments, e.ns, AgentName(name), &Deployment{}); !apierrors.IsNotFound(err) {
			t.Errorf("an agent for %s: %v, want none", v, err)
		}
	}
}

// TestAgentSecretRule: the agent mounts the cluster's Secret only under
// the rule of BridgeJobs' Secrets: opted in, and bound to the cluster's
// origin. Otherwise AgentReady is False (SecretRefused) and there is no
// agent; one whose Secret's owner takes the opt-in back goes (within a
// resync period: the operator does not watch Secrets).
func TestAgentSecretRule(t *testing.T) {
	e := newEnv(t)
	e.secretIn(e.ns, "plain", nil)
	e.secret("bound")
	e.opts = func(o *Options) { o.Resync = 2 * time.Second }
	e.operator("a")
	e.agentCluster("taken-back", "https://slurm-a.example.org:6820", "bound", nil)
	e.deployment(AgentName("taken-back"), anyDeployment)
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, SecretOptInLabel)
	if _, err := e.kc.CoreV1().Secrets(e.ns).Patch(context.Background(), "bound", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clusterCondition("taken-back", CondAgentReady, "False", "SecretRefused")
	e.waitFor("the agent of a Secret taken back to go", func() (bool, error) {
		err := e.c.Get(context.Background(), Deployments, e.ns, AgentName("taken-back"), &Deployment{})
		return apierrors.IsNotFound(err), err
	})
	e.secretIn(e.ns, "bound-2", map[string]string{SecretOptInLabel: "true"})
	for _, c := range []struct{ name, url, secret, want string }{
		{"not-opted-in", "https://slurm-a.example.org:6820", "plain", `spec.resourceSecret: the Secret "plain" of namespace ` + e.ns + " is not one BridgeJobs may use"},
		{"elsewhere", "https://elsewhere.example.org:6820", "bound-2", `spec.resourceSecret: the Secret "bound-2" is bound to`},
	} {
		e.agentCluster(c.name, c.url, c.secret, nil)
		if got, _ := e.clusterCondition(c.name, CondAgentReady, "False", "SecretRefused"); !strings.HasPrefix(got.Message, c.want) {
			t.Errorf("%s: the condition says %q, want it to start %q", c.name, got.Message, c.want)
		}
		if err := e.c.Get(context.Background(), Deployments, e.ns, AgentName(c.name), &Deployment{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: an agent: %v, want none", c.name, err)
		}
	}
}

// clusterWarned: a Warning of reason whose message starts with prefix is
// recorded on the BridgeCluster name.
func (e *env) clusterWarned(name, reason, prefix string) bool {
	list, err := e.kc.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "BridgeCluster" && ev.InvolvedObject.Name == name && ev.Type == "Warning" &&
			ev.Reason == reason && strings.HasPrefix(ev.Message, prefix) {
			return true
		}
	}
	return false
}

// TestAgentNamespaces: of three other namespaces in spec.agent.namespaces
// only the one whose grant to the operator names the cluster gets the
// agent's Role and RoleBinding, although the operator (an admin here)
// could write all three; the others are named in AgentNamespacesRefused.
// Deleting the BridgeCluster removes the grant there too.
func TestAgentNamespaces(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	yes, granted, none := testkube.Namespace(t, e.kc), testkube.Namespace(t, e.kc), testkube.Namespace(t, e.kc)
	e.grantNamespace(yes, e.ns+"/hpc-a")
	e.grantNamespace(granted, e.ns+"/other")
	e.operator("a")
	e.agentCluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", &AgentSpec{Namespaces: []string{yes, granted, none, e.ns}})
	c, bc := e.clusterCondition("hpc-a", CondAgentNamespacesRefused, "True", "NotConsented")
	if !strings.Contains(c.Message, granted+", "+none+" did not consent") || !strings.Contains(c.Message, AnnotationAgentClusters) {
		t.Errorf("the condition says %q, want it to name %s and %s and the annotation", c.Message, granted, none)
	}
	if a := bc.Status.Agent; a == nil || !slices.Equal(a.Namespaces, []string{e.ns, yes}) || !slices.Equal(a.Refused, []string{granted, none}) {
		t.Errorf("status.agent %+v", a)
	}
	d := e.deployment(AgentName("hpc-a"), anyDeployment)
	if args := d.Spec.Template.Spec.Containers[0].Args; args[10] != e.ns+","+yes {
		t.Errorf("--namespaces %q, want %s,%s", args[10], e.ns, yes)
	}
	ctx, name := context.Background(), AgentName("hpc-a")+"."+e.ns
	ro, rb := &kube.Role{}, &kube.RoleBinding{}
	if err := errors.Join(e.c.Get(ctx, kube.Roles, yes, name, ro), e.c.Get(ctx, kube.RoleBindings, yes, name, rb)); err != nil {
		t.Fatalf("the agent's grant in %s: %v", yes, err)
	}
	if ro.Labels[LabelCluster] != "hpc-a" || ro.Labels[labelClusterNamespace] != e.ns || len(ro.Rules) != 1 || !slices.Equal(ro.Rules[0].Resources, []string{"configmaps"}) ||
		!slices.Equal(rb.Subjects, []kube.Subject{{Kind: "ServiceAccount", Name: AgentName("hpc-a"), Namespace: e.ns}}) {
		t.Errorf("the agent's grant in %s: %+v %+v %+v", yes, ro.Labels, ro.Rules, rb.Subjects)
	}
	for _, ns := range []string{granted, none} {
		if roles, err := e.kc.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{}); err != nil || len(roles.Items) != 0 {
			t.Errorf("Roles in %s, which did not consent: %v %v", ns, roles, err)
		}
	}
	e.withdraw(yes, name)
	if err := e.c.Delete(ctx, BridgeClusters, e.ns, "hpc-a", ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the BridgeCluster and its grant in "+yes+" to go", func() (bool, error) {
		err1 := e.c.Get(ctx, kube.RoleBindings, yes, name, &kube.RoleBinding{})
		err2 := e.c.Get(ctx, kube.Roles, yes, name, &kube.Role{})
		err3 := e.c.Get(ctx, BridgeClusters, e.ns, "hpc-a", &BridgeCluster{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3), errors.Join(err1, err2, err3)
	})
}

// withdraw plays ns's admin taking the consent back: the agent's grant
// there (name) goes, and comes back once the admin consents again.
func (e *env) withdraw(ns, name string) {
	e.t.Helper()
	ctx := context.Background()
	setConsent := func(v string) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AnnotationAgentClusters, v)
		if _, err := e.kc.RbacV1().RoleBindings(ns).Patch(ctx, "bridge-runner-operator", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			e.t.Fatal(err)
		}
		// Touch the BridgeCluster: the operator looks at consents again
		// then (and every grantRetry anyway).
		e.editCluster("hpc-a", func(bc *BridgeCluster) { bc.Annotations = map[string]string{"touched": v} })
	}
	setConsent(e.ns + "/other")
	e.waitFor("the agent's grant in "+ns+" to go", func() (bool, error) {
		err := e.c.Get(ctx, kube.RoleBindings, ns, name, &kube.RoleBinding{})
		return apierrors.IsNotFound(err), err
	})
	e.waitFor("AgentNamespacesRefused to name "+ns, func() (bool, error) {
		bc := e.getCluster("hpc-a")
		for _, c := range bc.Status.Conditions {
			if c.Type == CondAgentNamespacesRefused && c.Status == "True" && strings.Contains(c.Message, ns) {
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %+v", bc.Status.Conditions)
	})
	setConsent(e.ns + "/*")
	e.waitFor("the agent's grant in "+ns+" to come back", func() (bool, error) {
		err := e.c.Get(ctx, kube.RoleBindings, ns, name, &kube.RoleBinding{})
		return err == nil, err
	})
}

// grantNamespace plays a namespace's admin: the operator's grant there
// (namespace-grant.yaml), listing the agents it lets in.
func (e *env) grantNamespace(ns, agents string) {
	e.t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bridge-runner-operator", Annotations: map[string]string{AnnotationAgentClusters: agents}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "bridge-runner-operator-namespace"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bridge-runner-operator", Namespace: "bridge-runner-system"}}}
	if _, err := e.kc.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestAgentRecordsLabelled: the record of a BridgeJob on one cluster
// carries the cluster's label and key (its agent serves it); one placed
// among two carries neither.
func TestAgentRecordsLabelled(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.secret("creds-b")
	e.cluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", "")
	e.cluster("hpc-b", "https://slurm-b.example.org:6820", "creds-b", "")
	e.operator("a")
	e.create(e.clusterJob("one", "hpc-a"))
	e.create(e.clusterJob("two", "hpc-a", "hpc-b"))
	cm, _ := e.children("one")
	if cm.Labels[LabelCluster] != "hpc-a" || cm.Data["cluster"] != "hpc-a" {
		t.Errorf("the record of a BridgeJob on hpc-a: label %q, key %q", cm.Labels[LabelCluster], cm.Data["cluster"])
	}
	if _, err := record.CheckKeys(cm.Data); err != nil {
		t.Errorf("invoke would refuse the record: %v", err)
	}
	cm, _ = e.children("two")
	if _, ok := cm.Labels[LabelCluster]; ok || cm.Data["cluster"] != "" {
		t.Errorf("the record of a BridgeJob placed among two: labels %v, key %q", cm.Labels, cm.Data["cluster"])
	}
	// The pods of the one on hpc-a may read its agent's heartbeat (and
	// nothing else of it); the other's may not.
	for job, want := range map[string]bool{"one": true, "two": false} {
		ro := &kube.Role{}
		if err := e.c.Get(context.Background(), kube.Roles, e.ns, AccessName(job), ro); err != nil {
			t.Fatalf("the Role of %s: %v", job, err)
		}
		got := false
		for _, r := range ro.Rules {
			if slices.Equal(r.ResourceNames, []string{record.AgentConfigMap("hpc-a")}) {
				got = slices.Equal(r.Verbs, []string{"get", "list", "watch"})
			}
		}
		if got != want {
			t.Errorf("the Role of %s reads the agent's heartbeat: %v, want %v (%+v)", job, got, want, ro.Rules)
		}
	}
}

// TestAgentLeastPrivilege: with exactly deploy/operator/rbac.yaml's grants
// (in the namespace), the operator's own token makes the agent's objects
// (RBAC's escalation check lets it grant the agent's Role) and deletes
// them when the agent is disabled.
func TestAgentLeastPrivilege(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.grantOperatorRBAC(true, "../deploy/operator/rbac.yaml")
	e.opCfg = testkube.ServiceAccountConfig(t, e.kc, e.ns, "bridge-runner-operator")
	e.operator("least")
	bc := e.agentCluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", nil)
	e.deployment(AgentName("hpc-a"), anyDeployment)
	e.checkAgentAccess(bc)
	no := false
	e.editCluster("hpc-a", func(bc *BridgeCluster) { bc.Spec.Agent = &AgentSpec{Enabled: &no} })
	e.waitFor("the agent's Deployment and Role to go", func() (bool, error) {
		err1 := e.c.Get(context.Background(), Deployments, e.ns, AgentName("hpc-a"), &Deployment{})
		err2 := e.c.Get(context.Background(), kube.Roles, e.ns, AgentName("hpc-a"), &kube.Role{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), errors.Join(err1, err2)
	})
}

// wideColumns are the columns `kubectl get bridgecluster -o wide` shows
// that plain `kubectl get` does not (priority 1), as the API server
// prints them (a Table).
func (e *env) wideColumns(name string) map[string]any {
	e.t.Helper()
	raw, err := e.c.REST().Get().AbsPath(BridgeClusters.Path(e.ns), name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	var tab metav1.Table
	if err := json.Unmarshal(raw, &tab); err != nil || len(tab.Rows) != 1 {
		e.t.Fatalf("the Table %s: %v", raw, err)
	}
	out := map[string]any{}
	for i, c := range tab.ColumnDefinitions {
		if c.Priority == 1 && i < len(tab.Rows[0].Cells) {
			out[c.Name] = tab.Rows[0].Cells[i]
		}
	}
	return out
}

// TestAgentAccessComesBack: the agent's Role, deleted by hand, is made
// again (nothing watches Roles: the operator makes its agents' access
// again once a resync period has passed).
func TestAgentAccessComesBack(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.opts = func(o *Options) { o.Resync = 2 * time.Second }
	e.operator("a")
	bc := e.agentCluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", nil)
	e.checkAgentAccess(bc)
	if err := e.kc.RbacV1().Roles(e.ns).Delete(context.Background(), AgentName("hpc-a"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.checkAgentAccess(bc)
}

// TestAgentRefusedSaysWhy: what stops an agent's reconcile becomes its
// condition, naming the fix: a refused grant names the verb, the resource,
// the namespace and the grant to apply; a transient error is retried
// (returned), never written as a condition.
func TestAgentRefusedSaysWhy(t *testing.T) {
	r := &reconciler{}
	bc := &BridgeCluster{}
	bc.Name, bc.Namespace = "hpc-a", "team-a"
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "bridge-runner-agent-hpc-a",
		errors.New("x"))
	forbidden.ErrStatus.Message = `deployments.apps "bridge-runner-agent-hpc-a" is forbidden: User "system:serviceaccount:bridge-runner-system:bridge-runner-operator" ` +
		`cannot create resource "deployments" in API group "apps" in the namespace "team-a"`
	for _, c := range []struct {
		err            error
		reason, prefix string
	}{
		{forbidden, CondGrantMissing, "the operator may not create deployments.apps in namespace team-a: the namespace's admin grants it with `kubectl apply -n team-a -f deploy/operator/namespace-grant.yaml`"},
		{&fieldError{"spec.agent.queryInterval", "is wrong"}, "InvalidSpec", "spec.agent.queryInterval: is wrong"},
		{secretFault{&fieldError{"spec.resourceSecret", "is not opted in"}}, "SecretRefused", "spec.resourceSecret: is not opted in"},
		{&accessConflict{"Deployment", "bridge-runner-agent-hpc-a", "BridgeCluster"}, "AgentConflict", "the Deployment bridge-runner-agent-hpc-a exists and is not this BridgeCluster's"},
	} {
		v, err := r.agentRefused(bc, c.err)
		if err != nil || len(v.conds) != 1 || v.conds[0].Type != CondAgentReady || v.conds[0].Status != "False" ||
			v.conds[0].Reason != c.reason || !strings.HasPrefix(v.conds[0].Message, c.prefix) {
			t.Errorf("%v: %+v, %v; want AgentReady False %s %q", c.err, v.conds, err, c.reason, c.prefix)
		}
	}
	if _, err := r.agentRefused(bc, errors.New("connection reset")); err == nil {
		t.Error("a transient error became a condition; it is to be retried")
	}
}

// TestAgentArgsAreTheContract: the agent's command line is exactly the
// contract of `bridge-runner agent` (flag names, order, one value each),
// for a backend read from the URL and an interval at each end of its
// range, whose text parses back to the same duration.
func TestAgentArgsAreTheContract(t *testing.T) {
	r := &reconciler{o: Options{JobImage: testImage}}
	bc := &BridgeCluster{Spec: BridgeClusterSpec{ResourceURL: " ssh://hpc@login.example.org ", ResourceSecret: "creds"}}
	bc.Name, bc.Namespace = "hpc-a", "team-a"
	for _, c := range []struct {
		interval string
		want     time.Duration
	}{{"", 2 * time.Second}, {"100ms", 100 * time.Millisecond}, {"90s", 90 * time.Second}, {"30m", 30 * time.Minute}} {
		bc.Spec.Agent = &AgentSpec{QueryInterval: c.interval}
		d, err := agentInterval(bc)
		if err != nil || d != c.want {
			t.Fatalf("queryInterval %q: %v, %v; want %v", c.interval, d, err, c.want)
		}
		args := r.agentDeployment(bc, "htcondor", d, []string{"team-a", "team-b"}).Spec.Template.Spec.Containers[0].Args
		want := []string{"agent", "--cluster", "hpc-a", "--backend", "htcondor", "--resource-url", "ssh://hpc@login.example.org",
			"--credentials-dir", "/var/run/bridge-runner/cluster", "--namespaces", "team-a,team-b", "--query-interval", args[len(args)-1]}
		if !slices.Equal(args, want) {
			t.Errorf("args %q, want %q", args, want)
		}
		if back, err := time.ParseDuration(args[len(args)-1]); err != nil || back != c.want {
			t.Errorf("--query-interval %q parses to %v, %v; want %v", args[len(args)-1], back, err, c.want)
		}
	}
	for _, bad := range []string{"99ms", "30m1s", "-2s", "2", "two seconds"} {
		bc.Spec.Agent = &AgentSpec{QueryInterval: bad}
		if _, err := agentInterval(bc); err == nil || !strings.HasPrefix(err.Error(), "spec.agent.queryInterval: ") {
			t.Errorf("queryInterval %q: %v, want an error naming spec.agent.queryInterval", bad, err)
		}
	}
}

// TestAgentGroupIsTheImages: the agent pod's fsGroup is the group of the
// image's user, as the Dockerfile sets it (another group could not read
// the Secret's 0400 files).
func TestAgentGroupIsTheImages(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER \d+:(\d+)\s*$`).FindAllSubmatch(b, -1)
	if len(m) != 1 {
		t.Fatalf("the Dockerfile has %d USER uid:gid lines, want one", len(m))
	}
	if got := string(m[0][1]); got != strconv.Itoa(imageGroup) {
		t.Errorf("the Dockerfile's user's group is %s, the agent's fsGroup %d; make them the same", got, imageGroup)
	}
}
