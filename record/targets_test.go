package record_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/record"
)

// TestTargetInheritsTheJobsFields: a target takes each of the job's
// backend, resourceURL and jobproperties that it does not give, whatever
// else it gives. examples/placement's second cluster (a URL of its own, no
// backend) was once left without a backend and skipped at every run.
func TestTargetInheritsTheJobsFields(t *testing.T) {
	cases := []struct {
		name              string
		jobBackend        string
		jobURL, target    string
		backend, url, jps string
	}{
		{"own URL, no backend", "slurm", "http://a.example.org:6820",
			`{"name":"b","resourceURL":"http://b.example.org:6820","credentials":"b"}`, "slurm", "http://b.example.org:6820", `{"partition":"batch"}`},
		{"nothing of its own", "slurm", "http://a.example.org:6820",
			`{"name":"a"}`, "slurm", "http://a.example.org:6820", `{"partition":"batch"}`},
		{"own backend, no URL", "slurm", "http://a.example.org:6820",
			`{"name":"a","backend":"lsf"}`, "lsf", "http://a.example.org:6820", `{"partition":"batch"}`},
		{"own everything", "slurm", "http://a.example.org:6820",
			`{"name":"r","backend":"ray","resourceURL":"http://r.example.org:8265","credentials":"r","jobproperties":{"partition":"gpu","x":1}}`,
			"ray", "http://r.example.org:8265", `{"partition":"gpu","x":1}`},
		{"job names no backend: chosen for the URL at placement", "", "http://a.example.org:6820",
			`{"name":"b","resourceURL":"http://b.example.org:6820","credentials":"b"}`, "", "http://b.example.org:6820", `{"partition":"batch"}`},
		{"no backend, no URL anywhere: local", "", "", `{"name":"l"}`, "local", "", `{"partition":"batch"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := record.Spec{Backend: c.jobBackend, ResourceURL: c.jobURL, JobScript: "#!/bin/sh\ntrue\n",
				JobProperties: `{"partition":"batch"}`, Targets: "[" + c.target + "]"}
			d, err := s.Parse()
			require.NoError(t, err)
			require.Len(t, d.Targets, 1)
			got := d.Targets[0]
			assert.Equal(t, c.backend, got.Backend, "backend")
			assert.Equal(t, c.url, got.ResourceURL, "resourceURL")
			assert.JSONEq(t, c.jps, string(got.JobProperties), "jobproperties")

			var raw record.Target
			require.NoError(t, json.Unmarshal([]byte(c.target), &raw))
			assert.Equal(t, got, d.Inherit(raw), "Parse applies the one rule, Inherit")
		})
	}
}

// TestEveryTargetFieldHasAnInheritanceRule: a field added to Target must be
// given its place in the rule (Inherit and the README's sentence) before
// this test passes again.
func TestEveryTargetFieldHasAnInheritanceRule(t *testing.T) {
	rule := map[string]string{
		"Name":          "its own, required",
		"Backend":       "the job's unless given",
		"ResourceURL":   "the job's unless given",
		"Credentials":   "never inherited: the step's serve one origin",
		"JobProperties": "laid over the job's",
		"Cluster":       "the record's unless given (whose agent measures its load)",
		"StartErrors":   "never inherited: what the target's own cluster's estimates were off by",
	}
	typ := reflect.TypeOf(record.Target{})
	for i := range typ.NumField() {
		f := typ.Field(i).Name
		assert.Contains(t, rule, f, "Target.%s has no inheritance rule: decide it in Description.Inherit and the README's placement section, then list it here", f)
	}
	assert.Len(t, rule, typ.NumField(), "a field listed here is gone from Target")
}
