package operator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// AccessName names a BridgeJob's ServiceAccount, Role and RoleBinding: the
// identity of its pods, which may read, watch, update and delete its record
// and nothing else (not even list: the record is watched by its name).
func AccessName(bridgeJob string) string { return bridgeJob + "-bridge-runner" }

// recordVerbs are what invoke and cleanup do to their record.
var recordVerbs = []string{"get", "watch", "update", "delete"}

// accessConflict: an object the pods of a BridgeJob (or a BridgeCluster's
// agent) would run as exists and is not the owner's (its pods must never
// borrow another identity).
type accessConflict struct{ kind, name, owner string }

func (e *accessConflict) Error() string {
	return fmt.Sprintf("the %s %s exists and is not this %s's; delete it or rename the %s", e.kind, e.name, e.owner, e.owner)
}

// ensureAccess creates the BridgeJob's ServiceAccount, Role and RoleBinding
// (owned by it, so they go with it) unless they exist and are its own.
// The operator can grant only what it holds itself (RBAC's escalation
// check), and it holds these verbs on ConfigMaps.
func (r *reconciler) ensureAccess(ctx context.Context, bj *BridgeJob) error {
	name := AccessName(bj.Name)
	sa := &kube.ServiceAccount{}
	sa.APIVersion, sa.Kind = "v1", "ServiceAccount"
	ro := &kube.Role{Rules: []kube.PolicyRule{{APIGroups: []string{""}, Resources: []string{kube.ConfigMaps.Plural},
		ResourceNames: []string{record.ConfigMapName(bj.Name)}, Verbs: recordVerbs}}}
	if c := agentCluster(bj); c != "" {
		// The cluster's agent's heartbeat, read only: invoke follows the
		// agent while it beats (a list by name, then a watch).
		ro.Rules = append(ro.Rules, kube.PolicyRule{APIGroups: []string{""}, Resources: []string{kube.ConfigMaps.Plural},
			ResourceNames: []string{record.AgentConfigMap(c)}, Verbs: []string{"get", "list", "watch"}})
	}
	ro.APIVersion, ro.Kind = kube.RBACV1.String(), "Role"
	rb := &kube.RoleBinding{RoleRef: kube.RoleRef{APIGroup: kube.RBACV1.Group, Kind: "Role", Name: name},
		Subjects: []kube.Subject{{Kind: "ServiceAccount", Name: name, Namespace: bj.Namespace}}}
	rb.APIVersion, rb.Kind = kube.RBACV1.String(), "RoleBinding"
	for _, o := range []struct {
		res kube.Resource
		obj interface {
			runtime.Object
			metav1.Object
		}
		out runtime.Object
	}{
		{kube.ServiceAccounts, sa, &kube.ServiceAccount{}},
		{kube.Roles, ro, &kube.Role{}},
		{kube.RoleBindings, rb, &kube.RoleBinding{}},
	} {
		o.obj.SetName(name)
		o.obj.SetNamespace(bj.Namespace)
		o.obj.SetLabels(childLabels(bj))
		o.obj.SetOwnerReferences([]metav1.OwnerReference{ownerRef(bj)})
		err := r.c.Create(ctx, o.res, bj.Namespace, o.obj, o.out)
		if apierrors.IsAlreadyExists(err) {
			if err = r.c.Get(ctx, o.res, bj.Namespace, name, o.out); err == nil && !ownedBy(o.out.(metav1.Object), bj) {
				return &accessConflict{o.obj.GetObjectKind().GroupVersionKind().Kind, name, "BridgeJob"}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// agentCluster is the cluster whose agent follows bj's job: spec.cluster,
// else its one cluster; "" when it is placed among several (invoke
// chooses the place after the record is made).
func agentCluster(bj *BridgeJob) string {
	if bj.Spec.Cluster != "" {
		return bj.Spec.Cluster
	}
	if len(bj.Spec.Clusters) == 1 {
		return bj.Spec.Clusters[0]
	}
	return ""
}

// ownedBy: bj is obj's controller.
func ownedBy(obj metav1.Object, bj *BridgeJob) bool {
	o := metav1.GetControllerOf(obj)
	return o != nil && o.UID == bj.UID && o.Kind == "BridgeJob" && o.APIVersion == GroupVersion.String()
}
