package record_test

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/record"
)

// The drift test: the job description is one table (record.Fields), and a
// field that exists in one surface and not in another fails here, whichever
// side has it. The tests beside each surface (components, workflows,
// operator, the README's) check each one's details: defaults, types, flags,
// how a value reaches the record.

// tableKeys is the table's fields by ConfigMap key: their input name.
func tableKeys() map[string]string {
	m := map[string]string{}
	for _, f := range record.Fields {
		m[f.Key] = f.InputName()
	}
	return m
}

// kfpKeys reads a KFP component's inputs that say they are a ConfigMap key
// ("[ConfigMap key X]" in their description), and all its input names.
func kfpKeys(t *testing.T, file string) (keys map[string]string, names []string) {
	t.Helper()
	var c struct {
		Inputs []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"inputs"`
	}
	readYAML(t, "../components/"+file, &c)
	keyRE := regexp.MustCompile(`\[ConfigMap key ([^\]]+)\]`)
	keys = map[string]string{}
	for _, in := range c.Inputs {
		names = append(names, in.Name)
		if m := keyRE.FindStringSubmatch(in.Description); m != nil {
			keys[m[1]] = in.Name
		}
	}
	sort.Strings(names)
	return keys, names
}

// argoParams reads the input parameter names of a template of the
// WorkflowTemplate in workflows/templates/bridge-runner.yaml.
func argoParams(t *testing.T, template string) []string {
	t.Helper()
	var wt struct {
		Spec struct {
			Templates []struct {
				Name   string `json:"name"`
				Inputs struct {
					Parameters []struct {
						Name string `json:"name"`
					} `json:"parameters"`
				} `json:"inputs"`
			} `json:"templates"`
		} `json:"spec"`
	}
	readYAML(t, "../workflows/templates/bridge-runner.yaml", &wt)
	for _, tm := range wt.Spec.Templates {
		if tm.Name == template {
			var names []string
			for _, p := range tm.Inputs.Parameters {
				names = append(names, p.Name)
			}
			sort.Strings(names)
			return names
		}
	}
	t.Fatalf("bridge-runner.yaml has no template %s", template)
	return nil
}

// readmeKeys reads the keys of the contract's job description table
// (docs/reference/contract.md, moved there from the README).
func readmeKeys(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../docs/reference/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "| ConfigMap key | flag |")
	if start < 0 {
		t.Fatal("docs/reference/contract.md has no job description table")
	}
	rowRE := regexp.MustCompile("^\\| `([^`]+)` \\| `--([^`]+)` \\|")
	keys := map[string]string{}
	for _, line := range strings.Split(text[start:], "\n")[2:] {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			break
		}
		keys[m[1]] = strings.ReplaceAll(m[2], "-", "_")
	}
	return keys
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// sameKeys reports every key one side has and the other lacks, or names
// differently.
func sameKeys(t *testing.T, surface string, got, want map[string]string) {
	t.Helper()
	for k, name := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s lacks the field %s (%s)", surface, k, name)
		} else if g != name {
			t.Errorf("%s names the field %s %s, the table %s", surface, k, g, name)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s has the field %s, which the table (record.Fields) lacks", surface, k)
		}
	}
}

// argoOnly are the Argo parameters that set the step's pod (its Secrets and
// grace period); KFP sets those with kfp-kubernetes, not as inputs.
var argoOnly = map[string]bool{"credentials_secret": true, "s3_credentials_secret": true, "termination_grace_period_seconds": true}

func TestEverySurfaceHasTheTablesFields(t *testing.T) {
	want := tableKeys()
	for _, file := range []string{"create-configmap.yaml", "bridge-job.yaml"} {
		keys, names := kfpKeys(t, file)
		sameKeys(t, "components/"+file, keys, want)
		argo := map[string]string{"create-configmap.yaml": "create-configmap", "bridge-job.yaml": "bridge-job"}[file]
		params := slices.DeleteFunc(argoParams(t, argo), func(p string) bool { return argoOnly[p] })
		if !slices.Equal(params, names) {
			t.Errorf("the Argo template %s's parameters %v are not the KFP component %s's inputs %v", argo, params, file, names)
		}
	}
	sameKeys(t, "the contract's job description table (docs/reference/contract.md)", readmeKeys(t), want)
	aliases, _ := record.IBMKeys()
	for ibm, ours := range aliases {
		if _, ok := want[ours]; !ok {
			t.Errorf("IBM's %s is read as %s, which the table lacks", ibm, ours)
		}
	}
	crd := map[string]bool{}
	for _, f := range record.Fields {
		if f.CRD == "" || crd[f.CRD] {
			t.Errorf("%s has no BridgeJob path of its own (crd %q)", f.Key, f.CRD)
		}
		crd[f.CRD] = true
	}
}
