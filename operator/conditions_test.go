package operator

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// checkConventions validates bj's conditions as the apiserver validates
// metav1.Condition (type, status, reason's form, lastTransitionTime), and
// wants CamelCase reasons and the current generation observed.
func checkConventions(t *testing.T, bj *BridgeJob) {
	t.Helper()
	var conds []metav1.Condition
	for _, c := range bj.Status.Conditions {
		conds = append(conds, metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason,
			Message: c.Message, ObservedGeneration: c.ObservedGeneration, LastTransitionTime: c.LastTransitionTime})
		if strings.ToUpper(c.Reason) == c.Reason {
			t.Errorf("%s: condition %s's reason %q is not CamelCase", bj.Name, c.Type, c.Reason)
		}
		if c.ObservedGeneration != bj.Generation {
			t.Errorf("%s: condition %s observed generation %d, the BridgeJob's is %d", bj.Name, c.Type, c.ObservedGeneration, bj.Generation)
		}
	}
	if errs := metav1validation.ValidateConditions(conds, field.NewPath("status", "conditions")); len(errs) > 0 {
		t.Errorf("%s: conditions break the API conventions: %v", bj.Name, errs.ToAggregate())
	}
}

// kubectlWait runs kubectl wait on the test's BridgeJob as the admin.
func (e *env) kubectlWait(name, cond, timeout string) (int, string) {
	e.t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") != "" {
			e.t.Fatal("kubectl is not on PATH (failing instead of skipping because CI is set)")
		}
		e.t.Skip("kubectl is not on PATH")
	}
	out, err := exec.Command(kubectl, "--kubeconfig", os.Getenv("BRIDGE_TEST_KUBECONFIG"), "-n", e.ns, "wait",
		"--for=condition="+cond, "bridgejob/"+name, "--timeout="+timeout).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !asExit(err, &ee) {
		e.t.Fatal(err)
	}
	if ee != nil {
		return ee.ExitCode(), string(out)
	}
	return 0, string(out)
}

func asExit(err error, ee **exec.ExitError) bool {
	x, ok := err.(*exec.ExitError)
	*ee = x
	return ok
}

// TestKubectlWaitFinished: `kubectl wait --for=condition=Finished` ends
// when the job ends, and when a spec is refused; the conditions keep the
// API conventions; the operator guide's Argo CD check reads them as Healthy and
// Degraded.
func TestKubectlWaitFinished(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.operator("w")
	e.create(e.localJob("waited", "echo waited"))
	refused := e.localJob("refused", "true")
	refused.Spec.ResourceSecret = "missing"
	e.create(refused)
	_, kj := e.children("waited")

	e.waitState("waited", "PENDING")
	if code, out := e.kubectlWait("waited", "Finished=false", "20s"); code != 0 {
		t.Errorf("kubectl wait Finished=false before invoke: exit %d: %s", code, out)
	}
	if code, out := e.kubectlWait("waited", "Finished", "1s"); code == 0 {
		t.Errorf("kubectl wait Finished before invoke ran succeeded: %s", out)
	}
	cmd := e.invoke(kj)
	if code, out := e.kubectlWait("waited", "Finished", "60s"); code != 0 {
		t.Fatalf("kubectl wait Finished: exit %d: %s\n%s", code, out, e.logs)
	}
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("invoke exited %d", code)
	}
	bj, err := e.get("waited")
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(bj, CondFinished); c.Reason != "Done" || c.Message != bj.Status.Message || bj.Status.State != "DONE" {
		t.Errorf("Finished %+v, state %q, message %q", c, bj.Status.State, bj.Status.Message)
	}
	if c := condition(bj, CondSubmitted); c.Status != "True" || !strings.Contains(c.Message, bj.Status.JobID) {
		t.Errorf("Submitted %+v, job id %q", c, bj.Status.JobID)
	}
	checkConventions(t, bj)
	if h, _ := argoHealth(t, bj); h != "Healthy" {
		t.Errorf("Argo CD health of the DONE BridgeJob: %s", h)
	}

	if code, out := e.kubectlWait("refused", "Finished", "60s"); code != 0 {
		t.Fatalf("kubectl wait Finished on a refused spec: exit %d: %s", code, out)
	}
	bj, err = e.get("refused")
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(bj, CondFinished); c.Reason != "InvalidSpec" || !strings.Contains(c.Message, "spec.resourcesecret") {
		t.Errorf("Finished on a refused spec: %+v", c)
	}
	checkConventions(t, bj)
	if h, msg := argoHealth(t, bj); h != "Degraded" || !strings.Contains(msg, "spec.resourcesecret") {
		t.Errorf("Argo CD health of the refused BridgeJob: %s %q", h, msg)
	}
}

// TestArgoCDHealthEveryState runs the operator guide's check on the status the
// operator computes for each of the seven states.
func TestArgoCDHealthEveryState(t *testing.T) {
	r := &reconciler{o: Options{StatusKeys: record.StatusKeysOurs}}
	want := map[backends.State]string{backends.Pending: "Progressing", backends.Running: "Progressing", backends.Suspended: "Suspended",
		backends.Done: "Healthy", backends.Failed: "Degraded", backends.Killed: "Degraded", backends.Unknown: "Degraded"}
	for _, st := range backends.States {
		bj := &BridgeJob{}
		bj.Name, bj.Generation = "x", 2
		cm := &kube.ConfigMap{Data: map[string]string{record.KeyJobStatus: string(st), record.KeyID: "42", record.KeyMessage: "the end"}}
		cm.Name = "x-bridge-cm"
		bj.Status = r.observe(bj, cm, nil)
		for i := range bj.Status.Conditions {
			bj.Status.Conditions[i].ObservedGeneration = bj.Generation
			bj.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
		checkConventions(t, bj)
		if h, msg := argoHealth(t, bj); h != want[st] {
			t.Errorf("%s: Argo CD health %s (%q), want %s", st, h, msg, want[st])
		}
		bj.Generation = 3 // a spec the operator has not seen yet
		if h, _ := argoHealth(t, bj); h != "Progressing" {
			t.Errorf("%s with a newer generation: %s, want Progressing", st, h)
		}
	}
}

// argoHealth runs the operator guide's Argo CD health check on bj, as Argo CD does:
// the object as JSON turned into Lua tables, in the global obj.
func argoHealth(t *testing.T, bj *BridgeJob) (status, message string) {
	t.Helper()
	b, err := os.ReadFile("../docs/guides/operator-and-bridgeclusters.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "```yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm")
	if start < 0 {
		t.Fatal("the operator guide has no argocd-cm block")
	}
	block := readme[start+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal([]byte(block), &cm); err != nil {
		t.Fatal(err)
	}
	script := cm.Data["resource.customizations.health.bridgejob.ibm.com_BridgeJob"]
	if script == "" {
		t.Fatal("the argocd-cm block has no BridgeJob health check")
	}
	bj.APIVersion, bj.Kind = GroupVersion.String(), "BridgeJob"
	raw, _ := json.Marshal(bj)
	var obj any
	_ = json.Unmarshal(raw, &obj)
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		t.Fatalf("the health check fails: %v", err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health check returned %v", L.Get(-1))
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, x := range v {
			t.RawSetString(k, toLua(L, x))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, x := range v {
			t.Append(toLua(L, x))
		}
		return t
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	}
	return lua.LNil
}
