package operator

import (
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/record"
)

// operatorOnly are the BridgeJob spec fields that are no part of the job
// description: they shape the pod (image, pull policy) or ask the operator
// to cancel (kill, which becomes the record's kill flag), or name
// BridgeClusters (clusters, which become the record's targets).
var operatorOnly = map[string]bool{"image": true, "imagepullpolicy": true, "kill": true, "clusters": true}

// crdSpecLeaves reads deploy/operator/crd.yaml's spec schema: each leaf
// property's dotted path and type.
func crdSpecLeaves(t *testing.T) map[string]string {
	t.Helper()
	leaves := map[string]string{}
	crdSpec(t).leaves("", leaves)
	return leaves
}

// crdSpec is the schema of spec in deploy/operator/crd.yaml's first version.
func crdSpec(t *testing.T) schemaNode {
	t.Helper()
	raw, err := os.ReadFile("../deploy/operator/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]schemaNode `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) == 0 {
		t.Fatal("crd.yaml has no version")
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
}

type schemaNode struct {
	Type       string                `json:"type"`
	Enum       []string              `json:"enum"`
	Properties map[string]schemaNode `json:"properties"`
}

func (n schemaNode) leaves(prefix string, out map[string]string) {
	for k, c := range n.Properties {
		if c.Type == "object" {
			c.leaves(prefix+k+".", out)
		} else {
			out[prefix+k] = c.Type
		}
	}
}

// crdType is the OpenAPI type of a field of the given KFP type.
func crdType(f record.Field) string {
	switch f.Type() {
	case record.TypeInteger:
		return "integer"
	case record.TypeBoolean:
		return "boolean"
	}
	return "string"
}

// TestBridgeJobCarriesEveryField: every field of the job description has a
// path in the BridgeJob CRD (with its type), the BridgeJob Go type reads it,
// and RecordSpec carries its value to the record; and the CRD has no spec
// field that is neither in the table nor the operator's own.
func TestBridgeJobCarriesEveryField(t *testing.T) {
	leaves := crdSpecLeaves(t)
	given := map[string]any{}
	for _, f := range record.Fields {
		if f.CRD == "" {
			t.Errorf("%s has no BridgeJob path (crd tag)", f.Key)
			continue
		}
		if typ, ok := leaves[f.CRD]; !ok {
			t.Errorf("deploy/operator/crd.yaml has no spec.%s (the record's %s)", f.CRD, f.Key)
		} else if typ != crdType(f) {
			t.Errorf("crd.yaml's spec.%s is %s, want %s", f.CRD, typ, crdType(f))
		}
		setPath(given, f.CRD, sampleValue(f))
	}
	for path := range leaves {
		if _, ok := fieldByCRD(path); !ok && !operatorOnly[path] {
			t.Errorf("crd.yaml's spec.%s is no field of the job description", path)
		}
	}
	raw, _ := json.Marshal(given)
	var spec BridgeJobSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	got := RecordSpec(&BridgeJob{Spec: spec})
	for _, f := range record.Fields {
		if want := stringOf(sampleValue(f)); f.Get(&got) != want {
			t.Errorf("spec.%s = %q reached the record's %s as %q: BridgeJobSpec lacks it or RecordSpec drops it", f.CRD, want, f.Key, f.Get(&got))
		}
		if p := fieldPath(f.Key); p != "spec."+f.CRD {
			t.Errorf("an error about %s names %s, want spec.%s", f.Key, p, f.CRD)
		}
	}
}

func fieldByCRD(path string) (record.Field, bool) {
	for _, f := range record.Fields {
		if f.CRD == path {
			return f, true
		}
	}
	return record.Field{}, false
}

// sampleValue is a value for f unlike its default, as JSON has it.
func sampleValue(f record.Field) any {
	switch f.Type() {
	case record.TypeInteger:
		return 7
	case record.TypeBoolean:
		return f.Default != "true"
	}
	return "v-" + strings.ReplaceAll(f.CRD, ".", "-")
}

func stringOf(v any) string {
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}

func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// TestIBMSpellingsAreTheCRDsOrSamples: IBM's lower-case BridgeJob paths are
// also IBM spellings of the record's keys (a record IBM's operator wrote
// from a BridgeJob uses them), except the fields IBM's resource lacks.
func TestIBMSpellingsAreTheCRDsOrSamples(t *testing.T) {
	ibmLacks := map[string]bool{"backend": true, "s3.region": true, "s3upload.createBucket": true,
		"resourceURL": true, "resourcesecret": true, "jobproperties": true, "s3upload.bucket": true, "s3upload.files": true}
	aliases, _ := record.IBMKeys()
	var missing []string
	for _, f := range record.Fields {
		if ibmLacks[f.Key] || f.CRD == f.Key {
			continue
		}
		if aliases[f.CRD] != f.Key {
			missing = append(missing, f.CRD+"="+f.Key)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("BridgeJob paths that are not read as IBM spellings of their keys: %v", missing)
	}
}

// TestCRDDescriptions: every property of both CRDs' schemas, at any depth
// (array items included), has a description, so `kubectl explain` says
// what each field is; metadata's is the API server's (it refuses one).
func TestCRDDescriptions(t *testing.T) {
	for _, file := range []string{"../deploy/operator/crd.yaml", "../deploy/operator/crd-bridgecluster.yaml"} {
		var crd struct {
			Spec struct {
				Versions []struct {
					Name   string `json:"name"`
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		if len(crd.Spec.Versions) == 0 {
			t.Fatalf("%s has no version", file)
		}
		n := 0
		for _, v := range crd.Spec.Versions {
			n += undescribed(t, file, v.Name, v.Schema.OpenAPIV3Schema)
		}
		if n < 10 {
			t.Errorf("%s: only %d properties walked; the walk misses the schema", file, n)
		}
	}
}

// undescribed reports each property under node without a description and
// returns how many properties it walked.
func undescribed(t *testing.T, file, path string, node map[string]any) int {
	t.Helper()
	n := 0
	props, _ := node["properties"].(map[string]any)
	for name, p := range props {
		p, _ := p.(map[string]any)
		n++
		if d, _ := p["description"].(string); strings.TrimSpace(d) == "" && path+"."+name != "v1alpha1.metadata" {
			t.Errorf("%s: %s.%s has no description", file, path, name)
		}
		n += undescribed(t, file, path+"."+name, p)
	}
	if items, ok := node["items"].(map[string]any); ok {
		n += undescribed(t, file, path+"[]", items)
	}
	return n
}
