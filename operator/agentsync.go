package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// agentView is what syncAgent found: the status and conditions to write,
// and when to look again (0: at the next event).
type agentView struct {
	status *AgentStatus
	conds  []Condition
	after  time.Duration
	// backend is the agent's, when it runs: its heartbeat is sealed
	// under it (clusterload.go).
	backend string
}

// syncAgent brings the cluster's agent in line with its spec: creates,
// updates or (disabled) deletes its objects, and says how it is. A spec
// the agent cannot run with leaves its objects as they are and says why
// (condition AgentReady False, InvalidSpec, naming the field and the fix).
func (r *reconciler) syncAgent(ctx context.Context, bc *BridgeCluster) (agentView, error) {
	if !agentEnabled(bc) {
		if err := r.removeAgent(ctx, bc); err != nil {
			return agentView{}, err
		}
		return agentView{conds: []Condition{{Type: CondAgentReady, Status: "False", Reason: "Disabled",
			Message: "spec.agent.enabled is false: the cluster has no agent"}}}, nil
	}
	backend, interval, extra, err := r.checkAgentSpec(ctx, bc)
	if sf := (secretFault{}); errors.As(err, &sf) {
		// The Secret's owner took it back (or never gave it): no agent
		// keeps it mounted.
		if err := r.removeAgent(ctx, bc); err != nil {
			return agentView{}, err
		}
		bc.Status.Agent = nil
	}
	if err != nil {
		return r.agentRefused(bc, err)
	}
	served, refused, err := r.consenting(ctx, bc, extra)
	if err != nil {
		return r.agentRefused(bc, err)
	}
	if err := r.ensureAgentAccess(ctx, bc, served); err != nil {
		return r.agentRefused(bc, err)
	}
	d, err := r.ensureAgentDeployment(ctx, bc, r.agentDeployment(bc, backend, interval, served))
	if err != nil {
		return r.agentRefused(bc, err)
	}
	v := agentState(d, served, refused)
	v.backend = backend
	if len(extra) > 0 {
		v.after = grantRetry // nothing announces a consent given or taken back
	}
	return v, nil
}

// checkAgentSpec checks what the agent would run with, as a BridgeJob's
// target is checked: its name, its budget, its namespaces, its backend
// (never a request to the cluster), and its Secret under the rule of
// BridgeJobs' Secrets (opted in, bound to the cluster's origin).
func (r *reconciler) checkAgentSpec(ctx context.Context, bc *BridgeCluster) (backend string, interval time.Duration, extra []string, err error) {
	if err = checkAgentName(bc); err != nil {
		return
	}
	if interval, err = agentInterval(bc); err != nil {
		return
	}
	if extra, err = agentNamespaces(bc); err != nil {
		return
	}
	if errs := validation.IsDNS1123Subdomain(bc.Spec.ResourceSecret); len(errs) > 0 {
		err = &fieldError{"spec.resourceSecret", fmt.Sprintf("%q is not the name of a Secret; name a Secret of namespace %s", bc.Spec.ResourceSecret, bc.Namespace)}
		return
	}
	if backend, err = r.clusterBackend(ctx, bc, "spec.backend"); err != nil {
		return
	}
	t := record.Target{Name: bc.Name, Backend: backend, ResourceURL: strings.TrimSpace(bc.Spec.ResourceURL), Credentials: clusterCredentials(bc.Name)}
	memo := strings.Join([]string{string(bc.UID), bc.Spec.ResourceSecret, backend, t.ResourceURL}, "\x00")
	if r.fresh(&r.agentSecret, bc, memo) {
		return
	}
	err = r.checkSecret(ctx, bc.Namespace, "spec.resourceSecret", bc.Spec.ResourceSecret,
		sendsFrom(&record.Description{Targets: []record.Target{t}}, t.Credentials))
	if err == nil {
		remember(&r.agentSecret, bc, memo)
	}
	return
}

// agentRefused turns what stopped the agent's reconcile into its
// condition; a transient error is returned as it is (retried).
func (r *reconciler) agentRefused(bc *BridgeCluster, err error) (agentView, error) {
	v := agentView{status: bc.Status.Agent}
	var fe *fieldError
	var sf secretFault
	var ac *accessConflict
	c := Condition{Type: CondAgentReady, Status: "False", Message: err.Error()}
	switch {
	case errors.As(err, &sf):
		c.Reason, v.after = "SecretRefused", recheckMax // its owner fixes it; Secrets are not watched
	case errors.As(err, &fe):
		c.Reason = "InvalidSpec"
	case errors.As(err, &ac):
		c.Reason = "AgentConflict"
	case apierrors.IsForbidden(err):
		f := parseForbidden(err, bc.Namespace)
		c.Reason, v.after = CondGrantMissing, grantRetry
		c.Message = fmt.Sprintf("the operator may not %s %s in namespace %s: the namespace's admin grants it with "+
			"`kubectl apply -n %s -f deploy/operator/namespace-grant.yaml`", f.verb, f.resource, f.namespace, f.namespace)
	default:
		return v, err
	}
	v.conds = []Condition{c}
	return v, nil
}

// agentState is the agent's status and conditions from its Deployment.
func agentState(d *Deployment, served, refused []string) agentView {
	st := &AgentStatus{Deployment: d.Name, ReadyReplicas: d.Status.ReadyReplicas, ObservedInterval: observedInterval(d),
		Namespaces: served, Refused: refused}
	ready := Condition{Type: CondAgentReady, Status: "True", Reason: "Ready",
		Message: fmt.Sprintf("the agent (Deployment %s) is ready, serving namespaces %s", d.Name, strings.Join(served, ", "))}
	if d.Status.ObservedGeneration < d.Generation || d.Status.ReadyReplicas < 1 {
		ready.Status, ready.Reason = "False", "NotReady"
		ready.Message = fmt.Sprintf("the agent (Deployment %s) is not ready yet: %d of 1 replica ready", d.Name, d.Status.ReadyReplicas)
		if d.Status.ObservedGeneration < d.Generation {
			ready.Message = fmt.Sprintf("the agent (Deployment %s) is not rolled out yet: generation %d, observed %d", d.Name, d.Generation, d.Status.ObservedGeneration)
		}
	}
	ns := Condition{Type: CondAgentNamespacesRefused, Status: "False", Reason: "AllConsented",
		Message: "every namespace in spec.agent.namespaces consented"}
	if len(refused) > 0 {
		ns.Status, ns.Reason, ns.Message = "True", "NotConsented", refusedMessage(refused)
	}
	return agentView{status: st, conds: []Condition{ready, ns}}
}

// refusedMessage names the namespaces that did not consent and how each
// one's admin does.
func refusedMessage(refused []string) string {
	return fmt.Sprintf("spec.agent.namespaces: %s did not consent, so the agent does not serve them: a namespace's admin consents with "+
		"the operator's grant there (`kubectl apply -n NAMESPACE -f deploy/operator/namespace-grant.yaml`) and by listing this "+
		"cluster as <namespace>/<name> (or <namespace>/*) in its annotation %s",
		strings.Join(refused, ", "), AnnotationAgentClusters)
}

// ensureAgentDeployment creates the agent's Deployment, or updates it when
// its spec is not the one the operator would write.
func (r *reconciler) ensureAgentDeployment(ctx context.Context, bc *BridgeCluster, want *Deployment) (*Deployment, error) {
	cur, _ := r.cached(r.deploys, bc.Namespace, want.Name).(*Deployment)
	if cur == nil {
		out := &Deployment{}
		err := r.c.Create(ctx, Deployments, bc.Namespace, want, out)
		if apierrors.IsAlreadyExists(err) {
			err = r.c.Get(ctx, Deployments, bc.Namespace, want.Name, out)
		} else if err == nil {
			r.clusterEvent(ctx, bc, "Normal", "AgentCreated", "created the agent's Deployment "+want.Name)
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		cur = out
	}
	if !ownedByCluster(cur, bc) {
		return nil, &accessConflict{"Deployment", cur.Name, "BridgeCluster"}
	}
	if !agentDrifted(cur, want) {
		return cur, nil
	}
	want.ResourceVersion = cur.ResourceVersion
	out := &Deployment{}
	if err := r.c.Update(ctx, Deployments, bc.Namespace, want.Name, want, out); err != nil {
		return nil, err
	}
	r.clusterEvent(ctx, bc, "Normal", "AgentUpdated", "updated the agent's Deployment "+want.Name+" to the cluster's spec")
	return out, nil
}

// ensureAgentAccess gives the agent its ServiceAccount, and in each served
// namespace a Role on ConfigMaps and its RoleBinding, and takes them back
// from namespaces no longer served. Done once per set of namespaces (a
// BridgeCluster's status is written on every placement).
func (r *reconciler) ensureAgentAccess(ctx context.Context, bc *BridgeCluster, served []string) error {
	memo := string(bc.UID) + "/" + strings.Join(served, ",")
	if r.fresh(&r.agentAccess, bc, memo) {
		return nil
	}
	if err := r.noteGrants(ctx, bc, append(agentGrants(bc), served...)); err != nil {
		return err
	}
	name := AgentName(bc.Name)
	// Its token is mounted into the agent's pod only (the pod asks for it):
	// another pod that names the ServiceAccount gets none by default.
	no := false
	sa := &kube.ServiceAccount{AutomountServiceAccountToken: &no}
	sa.APIVersion, sa.Kind = "v1", "ServiceAccount"
	sa.Name = name
	if err := r.ensureAgentObject(ctx, bc, bc.Namespace, kube.ServiceAccounts, sa, &kube.ServiceAccount{}); err != nil {
		return err
	}
	for _, ns := range served {
		if err := r.ensureAgentGrant(ctx, bc, ns); err != nil {
			return err
		}
	}
	for _, ns := range agentGrants(bc) {
		if slices.Contains(served, ns) {
			continue
		}
		if err := r.removeAgentGrant(ctx, bc, ns); err != nil {
			return err
		}
	}
	if err := r.noteGrants(ctx, bc, served); err != nil {
		return err
	}
	remember(&r.agentAccess, bc, memo)
	return nil
}

// agentMemo: what was checked or made for a cluster's agent, under key
// (what it depended on), and when. It holds for a resync period: then it
// is checked and made again anyway, since nothing announces a Secret's
// change or an object deleted by hand (the operator watches neither).
type agentMemo struct {
	key string
	at  time.Time
}

// fresh: m holds key for bc, younger than a resync period.
func (r *reconciler) fresh(m *sync.Map, bc *BridgeCluster, key string) bool {
	v, ok := m.Load(bc.Namespace + "/" + bc.Name)
	return ok && v.(agentMemo).key == key && time.Since(v.(agentMemo).at) < r.o.Resync
}

func remember(m *sync.Map, bc *BridgeCluster, key string) {
	m.Store(bc.Namespace+"/"+bc.Name, agentMemo{key, time.Now()})
}

// forget drops what is remembered for bc's agent.
func (r *reconciler) forget(bc *BridgeCluster) {
	r.agentAccess.Delete(bc.Namespace + "/" + bc.Name)
	r.agentSecret.Delete(bc.Namespace + "/" + bc.Name)
	r.beatKeys.Delete(bc.Namespace + "/" + bc.Name)
}

// ensureAgentGrant makes the agent's Role and RoleBinding in ns.
func (r *reconciler) ensureAgentGrant(ctx context.Context, bc *BridgeCluster, ns string) error {
	name := agentGrantName(bc, ns)
	ro := &kube.Role{Rules: agentRole()}
	ro.APIVersion, ro.Kind, ro.Name = kube.RBACV1.String(), "Role", name
	rb := &kube.RoleBinding{RoleRef: kube.RoleRef{APIGroup: kube.RBACV1.Group, Kind: "Role", Name: name},
		Subjects: []kube.Subject{{Kind: "ServiceAccount", Name: AgentName(bc.Name), Namespace: bc.Namespace}}}
	rb.APIVersion, rb.Kind, rb.Name = kube.RBACV1.String(), "RoleBinding", name
	if err := r.ensureAgentObject(ctx, bc, ns, kube.Roles, ro, &kube.Role{}); err != nil {
		return err
	}
	return r.ensureAgentObject(ctx, bc, ns, kube.RoleBindings, rb, &kube.RoleBinding{})
}

// agentGrantName: the agent's Role and RoleBinding are named after it in
// its own namespace, and after its namespace too in another (where a
// cluster of the same name may have its own agent).
func agentGrantName(bc *BridgeCluster, ns string) string {
	if ns == bc.Namespace {
		return AgentName(bc.Name)
	}
	return AgentName(bc.Name) + "." + bc.Namespace
}

type namedObject interface {
	runtime.Object
	metav1.Object
}

// ensureAgentObject creates obj in ns unless it exists; one that is not
// the cluster's is a conflict. In the cluster's namespace the BridgeCluster owns it (it goes
// with it); in another an owner reference cannot cross namespaces, so its
// labels say whose it is and the operator removes it (agentFinalizer).
func (r *reconciler) ensureAgentObject(ctx context.Context, bc *BridgeCluster, ns string, res kube.Resource, obj namedObject, out runtime.Object) error {
	obj.SetNamespace(ns)
	obj.SetLabels(agentLabels(bc))
	if ns == bc.Namespace {
		obj.SetOwnerReferences([]metav1.OwnerReference{clusterOwnerRef(bc)})
	} else {
		obj.GetLabels()[labelClusterNamespace] = bc.Namespace
	}
	// Read first: these are made once and looked at again every resync.
	err := r.c.Get(ctx, res, ns, obj.GetName(), out)
	if apierrors.IsNotFound(err) {
		err = r.c.Create(ctx, res, ns, obj, out)
		if apierrors.IsAlreadyExists(err) { // made meanwhile: whose?
			err = r.c.Get(ctx, res, ns, obj.GetName(), out)
		}
	}
	if err == nil && !agentOwns(bc, ns, out.(metav1.Object)) {
		return &accessConflict{obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName() + " in namespace " + ns, "BridgeCluster"}
	}
	return err
}

// agentOwns: obj (in ns) is one of the cluster's agent's objects.
func agentOwns(bc *BridgeCluster, ns string, obj metav1.Object) bool {
	if ns == bc.Namespace {
		return ownedByCluster(obj, bc)
	}
	l := obj.GetLabels()
	return l[LabelCluster] == bc.Name && l[labelClusterNamespace] == bc.Namespace && l["app.kubernetes.io/managed-by"] == managedByOperator
}

// removeAgent deletes a disabled agent's objects: its Deployment (first,
// so no agent runs without its grants), its ServiceAccount and its grants.
func (r *reconciler) removeAgent(ctx context.Context, bc *BridgeCluster) error {
	name := AgentName(bc.Name)
	if bc.Status.Agent == nil && r.cached(r.deploys, bc.Namespace, name) == nil {
		return nil // removed already: status.agent goes last
	}
	for _, o := range []struct {
		res kube.Resource
		out namedObject
	}{{Deployments, &Deployment{}}, {kube.ServiceAccounts, &kube.ServiceAccount{}}} {
		if err := r.deleteAgentObject(ctx, bc, bc.Namespace, o.res, name, o.out); err != nil {
			return err
		}
	}
	if err := r.removeAgentGrant(ctx, bc, bc.Namespace); err != nil {
		return err
	}
	for _, ns := range agentGrants(bc) {
		if err := r.removeAgentGrant(ctx, bc, ns); err != nil {
			return err
		}
	}
	r.forget(bc)
	return r.noteGrants(ctx, bc, nil)
}

// removeAgentGrant deletes the agent's Role and RoleBinding in ns. Another
// namespace that took back the operator's grant (forbidden) keeps what is
// left there, which its admin deletes: that is logged, not retried, or the
// namespace would hold the cluster. Any other failure is returned, and the
// namespace stays listed until it is done.
func (r *reconciler) removeAgentGrant(ctx context.Context, bc *BridgeCluster, ns string) error {
	name := agentGrantName(bc, ns)
	err := r.deleteAgentObject(ctx, bc, ns, kube.RoleBindings, name, &kube.RoleBinding{})
	if err == nil {
		err = r.deleteAgentObject(ctx, bc, ns, kube.Roles, name, &kube.Role{})
	}
	if apierrors.IsForbidden(err) && ns != bc.Namespace {
		r.log.Warn("removing the agent's grant failed; its namespace's admin may delete it", "bridgecluster", bc.Namespace+"/"+bc.Name,
			"namespace", ns, "rolebinding", name, "err", err)
		return nil
	}
	return err
}

// deleteAgentObject deletes the object name of res in ns if it is the
// agent's (that version of it: its UID).
func (r *reconciler) deleteAgentObject(ctx context.Context, bc *BridgeCluster, ns string, res kube.Resource, name string, out namedObject) error {
	err := r.c.Get(ctx, res, ns, name, out)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || !agentOwns(bc, ns, out) {
		return err
	}
	if err := r.c.Delete(ctx, res, ns, name, out.GetUID()); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// AnnotationAgentClusters, on a namespace's grant to the operator (the
// RoleBinding bridge-runner-operator of deploy/operator/namespace-grant.yaml),
// lists the BridgeClusters of other namespaces whose agents may serve the
// namespace's records, comma-separated, each <namespace>/<name> or
// <namespace>/*. The grant alone lets the operator act for the namespace's
// own BridgeJobs; an agent holds another namespace's Secret and could
// write every ConfigMap of the namespace it serves, which its admin allows
// by name.
const AnnotationAgentClusters = "bridge-runner.io/agent-clusters"

// namespaceGrant is the RoleBinding by which a namespace grants the operator
// (namespace-grant.yaml), and the ClusterRole it binds.
const (
	namespaceGrant     = "bridge-runner-operator"
	namespaceGrantRole = "bridge-runner-operator-namespace"
)

// consenting splits the other namespaces the agent is asked to serve into
// those that consented and those that did not; the cluster's own comes
// first and needs none.
func (r *reconciler) consenting(ctx context.Context, bc *BridgeCluster, extra []string) (served, refused []string, err error) {
	served = []string{bc.Namespace}
	for _, ns := range extra {
		ok, err := r.consented(ctx, bc, ns)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			served = append(served, ns)
		} else {
			refused = append(refused, ns)
		}
	}
	return served, refused, nil
}

// consented: ns's admin granted the operator there and listed the cluster
// in the grant's AnnotationAgentClusters. It is read, never inferred from
// what the operator may do: an operator with wider rights (a cluster
// admin's) must not grant itself into a namespace either.
func (r *reconciler) consented(ctx context.Context, bc *BridgeCluster, ns string) (bool, error) {
	rb := &kube.RoleBinding{}
	err := r.c.Get(ctx, kube.RoleBindings, ns, namespaceGrant, rb)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != namespaceGrantRole {
		return false, nil
	}
	for _, c := range strings.Split(rb.Annotations[AnnotationAgentClusters], ",") {
		if c = strings.TrimSpace(c); c == bc.Namespace+"/"+bc.Name || c == bc.Namespace+"/*" {
			return true, nil
		}
	}
	return false, nil
}

// agentFinalizer keeps a BridgeCluster whose agent has grants in other
// namespaces until they are deleted (an owner reference cannot cross
// namespaces). Those namespaces are status.agent.namespaces, which only the
// operator writes: it lists a namespace there before it makes a grant in
// it, and drops it after the grant is deleted, so none is left unlisted.
const agentFinalizer = "bridgejob.ibm.com/agent-grants"

// agentGrants are the other namespaces where the agent may have grants.
func agentGrants(bc *BridgeCluster) []string {
	if bc.Status.Agent == nil {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(bc.Status.Agent.Namespaces), func(ns string) bool { return ns == bc.Namespace })
}

// noteGrants makes status.agent.namespaces the cluster's own and
// namespaces, with agentFinalizer while there are others; bc becomes the
// updated object.
func (r *reconciler) noteGrants(ctx context.Context, bc *BridgeCluster, namespaces []string) error {
	var want []string
	for _, ns := range namespaces {
		if ns != bc.Namespace && !slices.Contains(want, ns) {
			want = append(want, ns)
		}
	}
	has := slices.Contains(bc.Finalizers, agentFinalizer)
	if len(want) > 0 && !has {
		if err := r.setAgentFinalizer(ctx, bc, true); err != nil {
			return err
		}
	}
	if !slices.Equal(agentGrants(bc), want) {
		next := bc.DeepCopyObject().(*BridgeCluster)
		next.APIVersion, next.Kind = GroupVersion.String(), "BridgeCluster"
		if next.Status.Agent == nil {
			next.Status.Agent = &AgentStatus{}
		}
		next.Status.Agent.Namespaces = append([]string{bc.Namespace}, want...)
		out := &BridgeCluster{}
		if err := r.c.Update(ctx, BridgeClusters, bc.Namespace, bc.Name, next, out, "status"); err != nil {
			return err
		}
		*bc = *out
	}
	if len(want) == 0 && has {
		return r.setAgentFinalizer(ctx, bc, false)
	}
	return nil
}

func (r *reconciler) setAgentFinalizer(ctx context.Context, bc *BridgeCluster, on bool) error {
	next := bc.DeepCopyObject().(*BridgeCluster)
	next.APIVersion, next.Kind = GroupVersion.String(), "BridgeCluster"
	next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == agentFinalizer })
	if on {
		next.Finalizers = append(next.Finalizers, agentFinalizer)
	}
	out := &BridgeCluster{}
	if err := r.c.Update(ctx, BridgeClusters, bc.Namespace, bc.Name, next, out); err != nil {
		return err
	}
	*bc = *out
	return nil
}

// finalizeCluster deletes a deleted BridgeCluster's agent grants in other
// namespaces, then lets it go (its own namespace's objects go with it).
func (r *reconciler) finalizeCluster(ctx context.Context, bc *BridgeCluster) error {
	if !slices.Contains(bc.Finalizers, agentFinalizer) {
		return nil
	}
	for _, ns := range agentGrants(bc) {
		if err := r.removeAgentGrant(ctx, bc, ns); err != nil {
			return err
		}
	}
	r.forget(bc)
	err := r.noteGrants(ctx, bc, nil)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// clusterEvent records an Event on the BridgeCluster.
func (r *reconciler) clusterEvent(ctx context.Context, bc *BridgeCluster, typ, reason, msg string) {
	r.eventOn(ctx, kube.ObjectReference{APIVersion: GroupVersion.String(), Kind: "BridgeCluster", Namespace: bc.Namespace,
		Name: bc.Name, UID: string(bc.UID), ResourceVersion: bc.ResourceVersion}, typ, reason, msg)
}

// enqueueCluster queues the BridgeCluster that controls an agent's
// Deployment (its readiness is the cluster's status).
func (r *reconciler) enqueueCluster(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if o := metav1.GetControllerOf(m); o != nil && o.Kind == "BridgeCluster" && o.APIVersion == GroupVersion.String() {
		r.cqueue.Add(m.GetNamespace() + "/" + o.Name)
	}
}

// agentConditions carries each condition's lastTransitionTime over while
// its status stays, and warns (an Event) when the agent is newly refused
// or a namespace newly did not consent.
func (r *reconciler) agentConditions(ctx context.Context, bc *BridgeCluster, conds []Condition) []Condition {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	for i := range conds {
		c := &conds[i]
		c.ObservedGeneration, c.LastTransitionTime = bc.Generation, now
		var old *Condition
		for j := range bc.Status.Conditions {
			if bc.Status.Conditions[j].Type == c.Type {
				old = &bc.Status.Conditions[j]
			}
		}
		if old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		warn := (c.Type == CondAgentReady && c.Status == "False" && c.Reason != "NotReady" && c.Reason != "Disabled") ||
			(c.Type == CondAgentNamespacesRefused && c.Status == "True")
		if warn && (old == nil || old.Message != c.Message) {
			r.clusterEvent(ctx, bc, "Warning", c.Reason, c.Message)
		}
	}
	return conds
}
