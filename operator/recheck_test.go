package operator

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/record"
)

// TestRefusedForASecretLooksAgain: a BridgeJob refused because its Secret
// had not opted in, or was not bound to the job's URL, proceeds within
// seconds of the Secret's owner fixing it, with the BridgeJob untouched and
// the resync far away (the operator does not watch Secrets: it looks again
// on a back-off of at most recheckMax).
func TestRefusedForASecretLooksAgain(t *testing.T) {
	e := newEnv(t)
	e.secretIn(e.ns, "later", nil)
	e.secretWith(e.ns, "unbound", map[string]string{SecretOptInLabel: "true"}, map[string]string{"token": "not-for-logs"})
	e.opts = func(o *Options) { o.Resync = 10 * time.Minute }
	e.operator("a")
	labelled := e.slurmJob("labelled-later")
	labelled.Spec.ResourceSecret = "later"
	e.create(labelled)
	bound := e.slurmJob("bound-later")
	bound.Spec.ResourceSecret = "unbound"
	e.create(bound)
	e.refused("labelled-later", "spec.resourcesecret", SecretOptInLabel+"=true")
	e.refused("bound-later", "spec.resourcesecret", record.OriginsKey)

	ctx := context.Background()
	secrets := e.kc.CoreV1().Secrets(e.ns)
	fixed := time.Now()
	s, err := secrets.Get(ctx, "later", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels = map[string]string{SecretOptInLabel: "true"}
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s, err = secrets.Get(ctx, "unbound", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Data[record.OriginsKey] = []byte(testOrigins)
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"labelled-later", "bound-later"} {
		e.children(name)
		t.Logf("%s proceeded %v after its Secret was fixed", name, time.Since(fixed).Round(time.Millisecond))
		// A generous ceiling: the back-off's ceiling and a loaded machine.
		if took := time.Since(fixed); took > recheckMax+15*time.Second {
			t.Errorf("%s proceeded %v after its Secret was fixed, want within %v", name, took, recheckMax+15*time.Second)
		}
		bj := e.waitState(name, "PENDING")
		if c := condition(bj, CondAccepted); c.Status != "True" {
			t.Errorf("%s: Accepted condition = %+v after the Secret was fixed", name, c)
		}
	}
}
