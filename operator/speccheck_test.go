package operator

import (
	"testing"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/quantum"
	"github.com/bridge-runner/bridge-runner/record"
)

// TestRefusedBeforeAPod: what the pod would refuse from the description
// alone (exit 2), the operator refuses before it makes anything, naming
// the field, with the backend's own check (quantum.CheckSpec): IBM's
// Quantum samples as IBM wrote them (a custom program inline; a program
// named remotely), which IBM Quantum no longer runs. A primitive job, and
// one whose texts are in S3 (the pod's to read), get their Job.
func TestRefusedBeforeAPod(t *testing.T) {
	e := newEnv(t)
	const url = "https://us-east.quantum-computing.cloud.ibm.com/"
	e.secretWith(e.ns, "q-creds", map[string]string{SecretOptInLabel: "true"},
		map[string]string{"username": "crn:v1:x", "password": "not-for-logs", record.OriginsKey: url + " http://s3.example.org:9000"})
	e.opts = func(o *Options) { o.SpecChecks = map[string]func(backends.Job) error{quantum.Name: quantum.CheckSpec} }
	e.operator("a")
	job := func(name, script, location, props string) {
		bj := e.localJob(name, script)
		bj.Spec.Backend, bj.Spec.ResourceURL, bj.Spec.ResourceSecret, bj.Spec.JobProperties = "", url, "q-creds", props
		bj.Spec.Image, bj.Spec.ImagePullPolicy = "quay.io/ibmdpdev/quantum-pod:v0.0.1", "Always"
		bj.Spec.JobData.ScriptLocation, bj.Spec.JobData.ScriptExtraLocation = location, "inline"
		bj.Spec.JobData.JobParameters = `{"params": {"iterations": 5}}`
		if location == "s3" {
			f := false
			bj.Spec.S3Storage = &S3{S3Secret: "q-creds", Endpoint: "s3.example.org:9000", Secure: &f}
		}
		e.create(bj)
	}
	job("custom-program", "import numpy as np\n\ndef main(backend, user_messenger, **kwargs):\n    return 1\n", "inline", "")
	job("remote-program", "hello-world", "remote", "")
	job("primitive", "OPENQASM 3.0;\nqubit[1] q;\nbit[1] c;\nh q[0];\nc[0] = measure q[0];\n", "inline", `{"program_id": "sampler", "backend": "ibm_torino"}`)
	job("in-s3", "bucket:program.py", "s3", "")

	e.refused("custom-program", "spec.jobdata.jobscript", "custom programs")
	e.refused("remote-program", "spec.jobdata.jobscript", "is not a primitive")
	for _, name := range []string{"primitive", "in-s3"} {
		if bj, _ := e.get(name); bj.Status.State == "FAILED" {
			t.Fatalf("%s refused: %s", name, bj.Status.Message)
		}
		if cm, _ := e.children(name); cm.Data["backend"] != "quantum" {
			t.Errorf("%s: record's backend %q, want quantum", name, cm.Data["backend"])
		}
	}
}
