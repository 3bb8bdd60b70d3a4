package operator

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/bridge-runner/bridge-runner/backends"
)

// The operator acts only in namespaces whose admins granted it: its
// cluster-wide grants watch (BridgeJobs, BridgeClusters, their records and
// Jobs) and report (status, Events); what it does to a namespace (create
// records, Jobs, the pods' ServiceAccounts and Roles, read Secrets) is the
// ClusterRole bridge-runner-operator-namespace, which a namespace's admin
// binds there with a RoleBinding (deploy/operator/namespace-grant.yaml).

// grantRetry is how often a BridgeJob of a namespace that has not granted
// the operator is tried again: nothing announces a new RoleBinding.
const grantRetry = 20 * time.Second

// CondGrantMissing is the reason of the Accepted condition of a BridgeJob
// whose namespace has not granted the operator what it needs.
const CondGrantMissing = "GrantMissing"

// forbidden names the grant an API server refused: the verb, the resource
// (with its group) and the namespace, parsed from the authorizer's
// documented message ("User ... cannot VERB resource RES in API group GRP
// in the namespace NS"), each checked to be a Kubernetes word before it is
// used; nothing else of the answer is kept.
type forbidden struct{ verb, resource, namespace string }

var (
	forbiddenShape = regexp.MustCompile(`cannot ([a-z]+) resource "([a-z0-9.-]+(?:/[a-z0-9.-]+)?)" in API group "([a-z0-9.-]*)"(?: in the namespace "([a-z0-9-]+)")?`)
)

func parseForbidden(err error, ns string) forbidden {
	f := forbidden{verb: "use", resource: "a resource", namespace: ns}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return f
	}
	if d := st.Status().Details; d != nil && forbiddenWord.MatchString(d.Kind) {
		f.resource = d.Kind
	}
	m := forbiddenShape.FindStringSubmatch(st.Status().Message)
	if m == nil {
		return f
	}
	f.verb, f.resource = m[1], m[2]
	if m[3] != "" { // kubectl's spelling: bridgejobs.bridgejob.ibm.com/status
		res, sub, _ := strings.Cut(m[2], "/")
		f.resource = res + "." + m[3]
		if sub != "" {
			f.resource += "/" + sub
		}
	}
	if m[4] != "" {
		f.namespace = m[4]
	}
	return f
}

var forbiddenWord = regexp.MustCompile(`^[a-z0-9.-]{1,63}$`)

// grantMissing tells a BridgeJob's author (its status: Accepted False,
// GrantMissing) and its namespace (a Warning Event, once per change) which
// grant the operator lacks and how the namespace's admin gives it, instead
// of retrying in silence. The BridgeJob stays as it was otherwise: it goes
// on once the grant is there.
func (r *reconciler) grantMissing(ctx context.Context, key string, err error) {
	obj, ok, _ := r.jobs.GetStore().GetByKey(key)
	if !ok {
		return
	}
	bj := obj.(*BridgeJob).DeepCopyObject().(*BridgeJob)
	f := parseForbidden(err, bj.Namespace)
	opNS := r.o.LeaseNamespace
	if opNS == "" {
		opNS = "bridge-runner-system"
	}
	msg := fmt.Sprintf("the operator may not %s %s in namespace %s: the namespace has not granted it what BridgeJobs need; "+
		"its admin grants it with `kubectl create rolebinding bridge-runner-operator -n %s --clusterrole=bridge-runner-operator-namespace "+
		"--serviceaccount=%s:bridge-runner-operator` (the operator's ServiceAccount)", f.verb, f.resource, f.namespace, bj.Namespace, opNS)
	s := bj.Status
	s.Conditions = append([]Condition(nil), s.Conditions...)
	if s.State == "" {
		s.State, s.JobStatus = string(backends.Pending), r.word(backends.Pending)
		s.Conditions = []Condition{{Type: CondAccepted}, cond(CondSubmitted, false, "", "NotSubmitted"), cond(CondFinished, false, "", "Pending")}
	}
	s.Message, s.ObservedGeneration = msg, bj.Generation
	for i := range s.Conditions {
		if s.Conditions[i].Type == CondAccepted {
			s.Conditions[i] = Condition{Type: CondAccepted, Status: "False", Reason: CondGrantMissing, Message: msg}
		}
	}
	changed := bj.Status.Message != msg
	if err := r.mirror(ctx, bj, s); err != nil {
		r.log.Warn("writing a BridgeJob's status failed", "bridgejob", key, "err", err)
	}
	if changed {
		r.event(ctx, bj, "Warning", CondGrantMissing, msg)
	}
}
