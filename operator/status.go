package operator

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// Condition types on a BridgeJob.
const (
	CondAccepted  = "Accepted"  // the spec is valid and the record exists
	CondSubmitted = "Submitted" // the remote job has an id
	CondFinished  = "Finished"  // the job reached a final state (the reason says which)
)

// observe computes a BridgeJob's status from its record and Job.
func (r *reconciler) observe(bj *BridgeJob, cm *kube.ConfigMap, kj *kube.Job) BridgeJobStatus {
	d := cm.Data
	st := ourState(d[record.KeyJobStatus])
	if st == "" {
		st = backends.Pending
	}
	s := BridgeJobStatus{
		JobID: d[record.KeyID], Message: d[record.KeyMessage],
		StartTime: d[record.KeySubmit], CompletionTime: d[record.KeyEnd],
		ObservedGeneration: bj.Generation, Backend: recordBackend(d),
	}
	if kj != nil && !st.Final() {
		// The pod gave up (temporary faults beyond backoffLimit, or a
		// crash) before the record reached a final state.
		if typ, reason, msg := kj.Finished(); typ == "Failed" {
			st = backends.Failed
			if s.JobID != "" {
				st = backends.Unknown // submitted, but nobody follows it now
			}
			s.Message = fmt.Sprintf("the Job %s failed (%s: %s) before the job reached a final state", kj.Name, reason, msg)
			if why := d[record.KeyMessage]; why != "" {
				// invoke left its reason in the record (a refused
				// partition, a bad credential): that is what to fix.
				s.Message = fmt.Sprintf("%s (the Job %s failed: %s)", why, kj.Name, reason)
			}
		}
	}
	s.State = string(st)
	s.JobStatus = r.word(st)
	s.Conditions = []Condition{
		{Type: CondAccepted, Status: "True", Reason: "RecordCreated", Message: "the record " + cm.Name + " holds the job"},
		cond(CondSubmitted, s.JobID != "", "Submitted", "NotSubmitted"),
		cond(CondFinished, st.Final(), stateReason(st), stateReason(st)),
	}
	if s.JobID != "" {
		s.Conditions[1].Message = "the remote job is " + s.JobID
	}
	if st.Final() {
		s.Conditions[2].Message = s.Message
	}
	return s
}

// recordBackend is the backend the record's job runs on: the one its
// placement chose, else the one the operator chose when it wrote the
// record ("" while a placement has yet to choose).
func recordBackend(d map[string]string) string {
	if p, err := record.ParsePlaced(d[record.KeyPlacement]); err == nil && p != nil && p.Backend != "" {
		return p.Backend
	}
	return d["backend"]
}

// stateReason is a state as a condition's reason, CamelCase as the API
// conventions have reasons (the state table's): Done, Failed, Killed,
// Unknown; Pending, Running, Suspended while not finished.
func stateReason(st backends.State) string {
	if st == "" {
		st = backends.Pending
	}
	if f, ok := record.Facts(st); ok {
		return f.Reason
	}
	s := string(st)
	return s[:1] + strings.ToLower(s[1:])
}

// word is the state as status.jobstatus gives it: IBM's word (KILL for
// KILLED) unless the operator runs with ours.
func (r *reconciler) word(st backends.State) string {
	if r.o.StatusKeys != record.StatusKeysOurs {
		return record.IBMWord(st)
	}
	return string(st)
}

func cond(typ string, ok bool, yes, no string) Condition {
	if ok {
		return Condition{Type: typ, Status: "True", Reason: yes}
	}
	return Condition{Type: typ, Status: "False", Reason: no}
}

// fail marks a BridgeJob FAILED for a reason found before anything was
// created (a bad spec, a missing Secret, a foreign ConfigMap), with an
// Event. It is re-checked at every reconcile: once fixed, the job starts.
func (r *reconciler) fail(ctx context.Context, bj *BridgeJob, reason, msg string) error {
	s := BridgeJobStatus{State: string(backends.Failed), JobStatus: string(backends.Failed), Message: msg,
		ObservedGeneration: bj.Generation, CompletionTime: bj.Status.CompletionTime,
		// Finished too, so that `kubectl wait --for=condition=Finished`
		// ends: nothing will run until the spec is fixed.
		Conditions: []Condition{{Type: CondAccepted, Status: "False", Reason: reason, Message: msg},
			{Type: CondSubmitted, Status: "False", Reason: "NotSubmitted"},
			{Type: CondFinished, Status: "True", Reason: reason, Message: msg}}}
	if s.CompletionTime == "" {
		s.CompletionTime = time.Now().UTC().Format(time.RFC3339)
	}
	changed := bj.Status.Message != msg
	if err := r.mirror(ctx, bj, s); err != nil {
		return err
	}
	if changed {
		r.event(ctx, bj, "Warning", reason, msg)
	}
	return nil
}

// mirror writes status s if it differs from bj's; a condition keeps its
// lastTransitionTime while its status stays.
func (r *reconciler) mirror(ctx context.Context, bj *BridgeJob, s BridgeJobStatus) error {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.ObservedGeneration = bj.Generation
		c.LastTransitionTime = now
		for _, old := range bj.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	if reflect.DeepEqual(kube.JSONCopy(&s), kube.JSONCopy(&bj.Status)) {
		return nil
	}
	prev := bj.Status.State
	bj.Status = s
	bj.APIVersion, bj.Kind = GroupVersion.String(), "BridgeJob"
	if err := r.c.Update(ctx, BridgeJobs, bj.Namespace, bj.Name, bj, &BridgeJob{}, "status"); err != nil {
		return err
	}
	if st := backends.State(s.State); st != backends.State(prev) && st.Final() && s.Conditions[0].Status == "True" {
		typ := "Normal"
		if st != backends.Done {
			typ = "Warning"
		}
		r.event(ctx, bj, typ, string(st), fmt.Sprintf("the job %s ended %s: %s", s.JobID, st, s.Message))
	}
	return nil
}

// event records an Event on bj; a failure to record is only logged.
func (r *reconciler) event(ctx context.Context, bj *BridgeJob, typ, reason, msg string) {
	r.eventOn(ctx, kube.ObjectReference{APIVersion: GroupVersion.String(), Kind: "BridgeJob", Namespace: bj.Namespace,
		Name: bj.Name, UID: string(bj.UID), ResourceVersion: bj.ResourceVersion}, typ, reason, msg)
}

// eventOn records an Event on the object ref (a BridgeJob or a
// BridgeCluster); a failure to record is only logged.
func (r *reconciler) eventOn(ctx context.Context, ref kube.ObjectReference, typ, reason, msg string) {
	now := metav1.NewTime(time.Now())
	e := &kube.Event{Reason: reason, Message: msg, Type: typ, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "bridge-runner-operator", ReportingInstance: r.o.Identity}
	e.APIVersion, e.Kind = "v1", "Event"
	e.Name = fmt.Sprintf("%s.%x", ref.Name, time.Now().UnixNano())
	e.Namespace = ref.Namespace
	e.Source.Component = "bridge-runner-operator"
	e.InvolvedObject = ref
	kind := strings.ToLower(ref.Kind)
	if err := r.c.Create(ctx, kube.Events, ref.Namespace, e, &kube.Event{}); err != nil {
		r.log.Warn("recording an event failed", kind, ref.Namespace+"/"+ref.Name, "reason", reason, "err", err)
	}
	r.log.Info(msg, kind, ref.Namespace+"/"+ref.Name, "reason", reason)
}

// checkStart looks, now and then, at the pods of a Job whose record has no
// job yet, and says in status.message (and once in a Warning) why a pod
// cannot start: an image that cannot be pulled would otherwise leave the
// BridgeJob PENDING without a word. It returns when to look again (0: no
// need). Pods are listed only once the Job is StartCheck old, so a job
// that starts at once costs no request.
func (r *reconciler) checkStart(ctx context.Context, bj *BridgeJob, kj *kube.Job, s *BridgeJobStatus) time.Duration {
	if kj == nil || kj.DeletionTimestamp != nil || s.State != string(backends.Pending) || s.JobID != "" {
		return 0
	}
	if typ, _, _ := kj.Finished(); typ != "" {
		return 0
	}
	wait := r.o.StartCheck
	if age := time.Since(kj.CreationTimestamp.Time); age < wait {
		return wait - age
	}
	pod, image, reason, err := stuckPod(ctx, r.c, kj.Namespace, kj.Name)
	if err != nil {
		r.log.Warn("listing the Job's pods failed", "bridgejob", bj.Namespace+"/"+bj.Name, "err", err)
		return wait
	}
	if reason == "" {
		return wait
	}
	s.Message = fmt.Sprintf("the pod %s cannot start: %s for the image %s; check that the image exists and that the nodes may pull it "+
		"(kubectl describe pod %s -n %s says why)", pod, reason, image, pod, kj.Namespace)
	if bj.Status.Message != s.Message {
		r.event(ctx, bj, "Warning", "PodCannotStart", s.Message)
	}
	return wait
}
