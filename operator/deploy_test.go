package operator

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// manifest is what the test reads of the objects kustomize builds.
type manifest struct {
	Kind     string
	Metadata struct {
		Name      string
		Namespace string
		Labels    map[string]string
	}
	Spec struct {
		Selector any
		Ports    []struct {
			Name       string
			Port       int
			TargetPort any `json:"targetPort"`
		}
		Template struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				Containers []struct {
					Args  []string
					Ports []struct {
						Name          string
						ContainerPort int `json:"containerPort"`
					}
					LivenessProbe  *probeSpec `json:"livenessProbe"`
					ReadinessProbe *probeSpec `json:"readinessProbe"`
				}
			}
		}
		Endpoints           []struct{ Port, Path string }
		PodMetricsEndpoints []struct{ Port, Path string } `json:"podMetricsEndpoints"`
		NamespaceSelector   struct{ Any bool }            `json:"namespaceSelector"`
	}
}

type probeSpec struct {
	HTTPGet struct {
		Path string
		Port any
	} `json:"httpGet"`
}

// buildWithMonitors builds deploy/operator with the ServiceMonitor
// component as a user's overlay would; it returns the objects by kind.
func buildWithMonitors(t *testing.T) map[string]manifest {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kubectl is not on PATH (failing instead of skipping because CI is set)")
		}
		t.Skip("kubectl is not on PATH")
	}
	// kustomize takes relative paths only: an overlay beside deploy/.
	root, _ := filepath.Abs("..")
	dir, err := os.MkdirTemp(filepath.Join(root, "deploy"), "overlay-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../operator]\ncomponents: [../operator-servicemonitor]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	byKind := map[string]manifest{}
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var m manifest
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		if m.Kind == "Deployment" || m.Kind == "Service" || m.Kind == "ServiceMonitor" || m.Kind == "PodMonitor" {
			byKind[m.Kind] = m
		}
	}
	return byKind
}

// TestDeployScrapesTheAgents: the component's PodMonitor selects the pods
// of the agents the operator starts (agentDeployment's labels, in any
// namespace: each runs in its BridgeCluster's) at the port their /metrics
// is on; without it the dashboard's agent panels stay empty.
func TestDeployScrapesTheAgents(t *testing.T) {
	pm, ok := buildWithMonitors(t)["PodMonitor"]
	if !ok {
		t.Fatal("deploy/operator-servicemonitor has no PodMonitor for the agents")
	}
	r := &reconciler{o: Options{JobImage: testImage}}
	bc := &BridgeCluster{Spec: BridgeClusterSpec{ResourceURL: "https://slurm.example.org", ResourceSecret: "creds"}}
	bc.Name, bc.Namespace = "hpc-a", "team-a"
	pod := r.agentDeployment(bc, "slurm", 2*time.Second, []string{"team-a"}).Spec.Template
	sel, _ := pm.Spec.Selector.(map[string]any)["matchLabels"].(map[string]any)
	if len(sel) == 0 || !subset(sel, pod.Metadata.Labels) {
		t.Errorf("the PodMonitor selects %v, the agents' pods have %v", sel, pod.Metadata.Labels)
	}
	if !pm.Spec.NamespaceSelector.Any {
		t.Errorf("the PodMonitor looks in %+v, not in every namespace (agents run in their BridgeCluster's)", pm.Spec.NamespaceSelector)
	}
	ports := pod.Spec.Containers[0].Ports
	i := slices.IndexFunc(ports, func(p ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == agentMetricsPort })
	e := pm.Spec.PodMetricsEndpoints
	if i < 0 || len(e) != 1 || e[0].Port != "metrics" || e[0].Path != "/metrics" {
		t.Errorf("the PodMonitor scrapes %+v; the agent serves /metrics on %+v", e, ports)
	}
}

// TestDeployServesProbesAndMetrics builds deploy/operator with the
// ServiceMonitor component as a user's overlay would, and checks that the
// pieces meet: the probes and the Service reach the port the operator's
// --metrics-bind-address serves, the Service selects the operator's pods,
// and the ServiceMonitor selects the Service in its namespace.
func TestDeployServesProbesAndMetrics(t *testing.T) {
	byKind := buildWithMonitors(t)
	dep, svc, sm := byKind["Deployment"], byKind["Service"], byKind["ServiceMonitor"]
	c := dep.Spec.Template.Spec.Containers[0]
	bind := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			bind = v
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || ":"+strconv.Itoa(c.Ports[0].ContainerPort) != bind {
		t.Errorf("container port %+v does not match --metrics-bind-address=%s", c.Ports, bind)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Port != "metrics" {
		t.Errorf("liveness probe %+v", c.LivenessProbe)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port != "metrics" {
		t.Errorf("readiness probe %+v", c.ReadinessProbe)
	}
	if sel, _ := svc.Spec.Selector.(map[string]any); !subset(sel, dep.Spec.Template.Metadata.Labels) || len(sel) == 0 {
		t.Errorf("the Service selects %v, the pods have %v", sel, dep.Spec.Template.Metadata.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].TargetPort != "metrics" {
		t.Errorf("Service ports %+v", svc.Spec.Ports)
	}
	smSel, _ := sm.Spec.Selector.(map[string]any)["matchLabels"].(map[string]any)
	if len(smSel) == 0 || !subset(smSel, svc.Metadata.Labels) || sm.Metadata.Namespace != svc.Metadata.Namespace {
		t.Errorf("the ServiceMonitor (%s, %v) does not select the Service (%s, %v)", sm.Metadata.Namespace, smSel, svc.Metadata.Namespace, svc.Metadata.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}
	if !slices.Contains(c.Args, "operator") {
		t.Errorf("the container runs %v", c.Args)
	}
}

func subset(sel map[string]any, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
