package operator

import (
	"slices"
	"testing"

	"github.com/bridge-runner/bridge-runner/record"
)

// crdPlacementEnum is the enum of spec.placement in deploy/operator/crd.yaml.
func crdPlacementEnum(t *testing.T) []string {
	t.Helper()
	return crdSpec(t).Properties["placement"].Enum
}

// TestCRDPlacementIsEveryPolicy: the BridgeJob CRD admits exactly the
// placement policies invoke knows (record.Policies) and the empty value
// (the default), so a policy added to the record is admitted by the API
// server too (spread was not: a BridgeJob could not ask for it).
func TestCRDPlacementIsEveryPolicy(t *testing.T) {
	got := crdPlacementEnum(t)
	want := append([]string{""}, record.Policies...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("crd.yaml's spec.placement enum is %q, want %q (\"\" and record.Policies)", got, want)
	}
}

// TestBridgeJobSpread: the real API server admits placement: spread, and
// the operator carries it to the record with the array and both targets;
// without spec.array it refuses the BridgeJob as invoke would (exit 2),
// naming spec.placement, and makes nothing.
func TestBridgeJobSpread(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.operator("a")
	const targets = `[{"name":"a","backend":"slurm","resourceURL":"https://a.example.org:6820"},` +
		`{"name":"b","backend":"slurm","resourceURL":"https://b.example.org:6820","credentials":"b"}]`
	job := func(name, array string) {
		bj := e.localJob(name, "#!/bin/bash\necho $BRIDGE_TASK_INDEX")
		bj.Spec.Backend, bj.Spec.Targets, bj.Spec.Placement, bj.Spec.Array = "", targets, record.PolicySpread, array
		e.create(bj)
	}
	job("spread", "0-7")
	job("no-array", "")

	cm, _ := e.children("spread")
	if cm.Data[record.KeyPlacement] != "" {
		t.Errorf("the record's status.placement is %q before any pod ran", cm.Data[record.KeyPlacement])
	}
	d, err := record.SpecFromData(cm.Data).Parse()
	if err != nil {
		t.Fatalf("the record of spread: %v", err)
	}
	if d.Policy != record.PolicySpread || d.Array == nil || d.Array.Count() != 8 || len(d.Targets) != 2 {
		t.Errorf("the record of spread: policy %q, array %v, %d targets; want spread, 8 tasks, 2 targets", d.Policy, d.Array, len(d.Targets))
	}
	e.refused("no-array", "spec.placement", "spread divides an array's tasks among the targets, and this job has no array key")
}
