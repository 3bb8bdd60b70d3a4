package operator

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestOperatorActsOnlyWhereGranted: under real RBAC, with
// deploy/operator/rbac.yaml applied as an admin applies it (its watching
// ClusterRole bound cluster-wide, the namespace ClusterRole bound nowhere
// yet), the operator's own token may not read a Secret nor create a Job,
// ServiceAccount, Role or RoleBinding in kube-system, in its own namespace
// or in one whose admin did not grant it. A BridgeJob there gets
// Accepted=False (GrantMissing) and a Warning naming the verb, the resource
// and the namespace, and nothing is made for it; once the namespace's admin
// applies deploy/operator/namespace-grant.yaml, the BridgeJob goes on.
func TestOperatorActsOnlyWhereGranted(t *testing.T) {
	e := newEnv(t) // e.ns is the operator's own namespace
	ctx := context.Background()
	other := testkube.Namespace(t, e.kc)
	sa := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bridge-runner-operator", Namespace: e.ns}}
	roles := map[string]string{}
	for _, doc := range testutil.YAMLDocs(t, "../deploy/operator/rbac.yaml") {
		var obj struct {
			Kind     string
			Metadata metav1.ObjectMeta
			Rules    []rbacv1.PolicyRule
			RoleRef  rbacv1.RoleRef `json:"roleRef"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "ClusterRole":
			roles[obj.Metadata.Name] = e.clusterRole(obj.Metadata.Name, obj.Rules)
		case "Role":
			if _, err := e.kc.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: obj.Metadata.Name}, Rules: obj.Rules}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			e.bind(obj.Metadata.Name, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: obj.Metadata.Name}, sa)
		case "ClusterRoleBinding":
			name := "bt-" + e.ns + "-" + obj.Metadata.Name
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: sa,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roles[obj.RoleRef.Name]}}
			if crb.RoleRef.Name == "" {
				t.Fatalf("the ClusterRoleBinding %s comes before its ClusterRole %s", obj.Metadata.Name, obj.RoleRef.Name)
			}
			if _, err := e.kc.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = e.kc.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
	}
	if roles["bridge-runner-operator-namespace"] == "" {
		t.Fatal("rbac.yaml has no ClusterRole bridge-runner-operator-namespace")
	}
	e.opCfg = testkube.ServiceAccountConfig(t, e.kc, e.ns, "bridge-runner-operator")
	op, err := newClient(e.opCfg)
	if err != nil {
		t.Fatal(err)
	}

	// What a stolen operator token reaches before any namespace granted it.
	for _, ns := range []string{"kube-system", e.ns, other} {
		if err := op.REST().Get().AbsPath(kube.Secrets.Path(ns), "any").Do(ctx).Error(); !apierrors.IsForbidden(err) {
			t.Errorf("get secrets -n %s: %v, want forbidden", ns, err)
		}
		for _, c := range []struct {
			res  kube.Resource
			body string
		}{
			{kube.Jobs, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x"}}`},
			{kube.ServiceAccounts, `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"x"}}`},
			{kube.Roles, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"x"}}`},
			{kube.RoleBindings, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"x"}}`},
			{kube.ConfigMaps, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`},
		} {
			// dryRun: were it allowed, nothing would be made.
			err := op.REST().Post().AbsPath(c.res.Path(ns)).Param("dryRun", "All").Body([]byte(c.body)).Do(ctx).Error()
			if !apierrors.IsForbidden(err) {
				t.Errorf("create %s -n %s: %v, want forbidden", c.res.Plural, ns, err)
			}
		}
	}

	// A BridgeJob in the namespace that did not grant the operator.
	e.secretIn(other, "creds", map[string]string{SecretOptInLabel: "true"})
	e.opts = func(o *Options) { o.Namespace = other }
	e.operator("a")
	bj := e.localJob("waits", "echo granted")
	bj.Namespace = other
	if err := e.c.Create(ctx, BridgeJobs, other, bj, &BridgeJob{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the operator is stopped by now: its finalizer would keep the namespace
		got := &BridgeJob{}
		if e.c.Get(context.Background(), BridgeJobs, other, "waits", got) == nil {
			got.Finalizers = nil
			_ = e.c.Update(context.Background(), BridgeJobs, other, "waits", got, &BridgeJob{})
		}
	})
	want := "the operator may not get secrets in namespace " + other
	e.waitFor("the BridgeJob to say which grant is missing", func() (bool, error) {
		got := &BridgeJob{}
		err := e.c.Get(ctx, BridgeJobs, other, "waits", got)
		c := condition(got, CondAccepted)
		return err == nil && c.Status == "False" && c.Reason == CondGrantMissing && strings.Contains(c.Message, want) &&
			strings.HasPrefix(got.Status.Message, want) && strings.Contains(got.Status.Message, "--clusterrole=bridge-runner-operator-namespace"), err
	})
	e.waitFor("a Warning naming the grant", func() (bool, error) {
		evs, err := e.kc.CoreV1().Events(other).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=waits,reason=" + CondGrantMissing})
		if err != nil || len(evs.Items) == 0 {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Type != "Warning" || !strings.HasPrefix(ev.Message, want) {
				t.Fatalf("Event %s %s: %s", ev.Type, ev.Reason, ev.Message)
			}
		}
		t.Logf("%d GrantMissing Events", len(evs.Items))
		return true, nil
	})
	for res, name := range map[kube.Resource]string{kube.ConfigMaps: record.ConfigMapName("waits"), kube.Jobs: JobName("waits"), kube.ServiceAccounts: AccessName("waits")} {
		if err := e.c.Get(ctx, res, other, name, &kube.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s was made in a namespace that did not grant the operator (%v)", res.Plural, name, err)
		}
	}

	// The namespace's admin grants it, as namespace-grant.yaml does.
	var grant rbacv1.RoleBinding
	if err := yaml.Unmarshal(testutil.YAMLDocs(t, "../deploy/operator/namespace-grant.yaml")[0], &grant); err != nil {
		t.Fatal(err)
	}
	if grant.RoleRef.Kind != "ClusterRole" || grant.RoleRef.Name != "bridge-runner-operator-namespace" || len(grant.Subjects) != 1 ||
		grant.Subjects[0].Name != "bridge-runner-operator" {
		t.Fatalf("namespace-grant.yaml binds %+v to %+v, want the ClusterRole bridge-runner-operator-namespace to the operator", grant.RoleRef, grant.Subjects)
	}
	grant.RoleRef.Name = roles[grant.RoleRef.Name]
	grant.Subjects[0].Namespace = e.ns
	if _, err := e.kc.RbacV1().RoleBindings(other).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: grant.Name},
		RoleRef: grant.RoleRef, Subjects: grant.Subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the granted namespace's BridgeJob to get its record and Job", func() (bool, error) {
		got := &BridgeJob{}
		err := e.c.Get(ctx, BridgeJobs, other, "waits", got)
		err2 := e.c.Get(ctx, kube.Jobs, other, JobName("waits"), &kube.Job{})
		return err == nil && err2 == nil && condition(got, CondAccepted).Status == "True", err2
	})
}

// TestParseForbidden: a 403's grant is read from the authorizer's message
// word by word; an answer of another shape keeps nothing of its text.
func TestParseForbidden(t *testing.T) {
	forbid := func(msg, kind string) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
			Message: msg, Details: &metav1.StatusDetails{Kind: kind}}}
	}
	for _, c := range []struct {
		err  error
		want forbidden
	}{
		{forbid(`secrets "creds" is forbidden: User "system:serviceaccount:op:bridge-runner-operator" cannot get resource "secrets" in API group "" in the namespace "team-a"`, "secrets"),
			forbidden{"get", "secrets", "team-a"}},
		{forbid(`bridgejobs.bridgejob.ibm.com "j" is forbidden: User "u" cannot update resource "bridgejobs/status" in API group "bridgejob.ibm.com" in the namespace "team-b"`, "bridgejobs"),
			forbidden{"update", "bridgejobs.bridgejob.ibm.com/status", "team-b"}},
		{forbid(`jobs.batch is forbidden: User "u" cannot create resource "jobs" in API group "batch" in the namespace "kube-system"`, "jobs"),
			forbidden{"create", "jobs.batch", "kube-system"}},
		{forbid(`forbidden: hunter2 said no; cannot get resource "secrets\" in ns`, "secrets"), forbidden{"use", "secrets", "own"}},
		{forbid(`no`, `hunter2 "quoted"`), forbidden{"use", "a resource", "own"}},
	} {
		if got := parseForbidden(c.err, "own"); got != c.want {
			t.Errorf("parseForbidden(%q) = %+v, want %+v", c.err, got, c.want)
		}
	}
}
