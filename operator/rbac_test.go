package operator

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// rbacDoc is what the test reads of an RBAC manifest.
type rbacDoc struct {
	Kind     string
	Metadata metav1.ObjectMeta
	Rules    []rbacv1.PolicyRule
	RoleRef  rbacv1.RoleRef `json:"roleRef"`
}

// TestOperatorRBACIsNarrow walks every RBAC object the operator's
// manifests ship (deploy/operator*/): no rule anywhere names a wildcard
// (apiGroups, resources, verbs or resourceNames), and no ClusterRole that a
// ClusterRoleBinding binds (what the operator holds in every namespace)
// grants anything on Secrets. Secrets are read only through a namespace's
// own grant, and the agents get none. The agent's Role (agentRole) is
// held to the same rules and to ConfigMaps only.
func TestOperatorRBACIsNarrow(t *testing.T) {
	files, err := filepath.Glob("../deploy/operator*/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("the operator's manifests: %v %v", files, err)
	}
	roles := map[string][]rbacv1.PolicyRule{}
	var bound []string
	n := 0
	for _, f := range files {
		for _, raw := range testutil.YAMLDocs(t, f) {
			var d rbacDoc
			if err := yaml.Unmarshal(raw, &d); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch d.Kind {
			case "ClusterRole", "Role":
				n += len(d.Rules)
				checkNoWildcard(t, f+": "+d.Kind+" "+d.Metadata.Name, d.Rules)
				if d.Kind == "ClusterRole" {
					roles[d.Metadata.Name] = d.Rules
				}
			case "ClusterRoleBinding":
				bound = append(bound, d.RoleRef.Name)
			}
		}
	}
	if n < 10 || len(bound) == 0 {
		t.Fatalf("walked %d rules and %d ClusterRoleBindings; the walk misses the manifests", n, len(bound))
	}
	for _, name := range bound {
		rules, ok := roles[name]
		if !ok {
			t.Errorf("a ClusterRoleBinding binds %s, which no manifest defines", name)
		}
		for _, r := range rules {
			if slices.Contains(r.Resources, "secrets") || slices.ContainsFunc(r.Resources, func(s string) bool { return strings.HasPrefix(s, "secrets/") }) {
				t.Errorf("the ClusterRole %s, bound cluster-wide, grants %v on %v: Secrets only through a namespace's grant", name, r.Verbs, r.Resources)
			}
		}
	}
	agent := agentRole()
	var conv []rbacv1.PolicyRule
	for _, r := range agent {
		conv = append(conv, rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames, Verbs: r.Verbs})
		if !slices.Equal(r.Resources, []string{"configmaps"}) || !slices.Equal(r.APIGroups, []string{""}) {
			t.Errorf("the agent's Role grants %v of %v; it needs ConfigMaps only", r.Resources, r.APIGroups)
		}
	}
	checkNoWildcard(t, "the agent's Role", conv)
}

func checkNoWildcard(t *testing.T, where string, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
			if slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, "*") }) {
				t.Errorf("%s: the rule %+v uses a wildcard; name each group, resource and verb", where, r)
			}
		}
	}
}
