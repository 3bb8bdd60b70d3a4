package operator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// cluster creates a BridgeCluster of the test's namespace.
func (e *env) cluster(name, url, secret, props string) {
	e.t.Helper()
	bc := &BridgeCluster{Spec: BridgeClusterSpec{Backend: "slurm", ResourceURL: url, ResourceSecret: secret, JobProperties: props}}
	bc.APIVersion, bc.Kind = GroupVersion.String(), "BridgeCluster"
	bc.Name, bc.Namespace = name, e.ns
	if err := e.c.Create(context.Background(), BridgeClusters, e.ns, bc, &BridgeCluster{}); err != nil {
		e.t.Fatalf("creating BridgeCluster %s: %v", name, err)
	}
}

// disableAgent sets the BridgeCluster's spec.agent.enabled to false.
func (e *env) disableAgent(name string) {
	e.t.Helper()
	bc := &BridgeCluster{}
	if err := e.c.Get(context.Background(), BridgeClusters, e.ns, name, bc); err != nil {
		e.t.Fatal(err)
	}
	off := false
	bc.Spec.Agent = &AgentSpec{Enabled: &off}
	if err := e.c.Update(context.Background(), BridgeClusters, e.ns, name, bc, &BridgeCluster{}); err != nil {
		e.t.Fatal(err)
	}
}

// clusterJob is a BridgeJob that may run on the clusters named.
func (e *env) clusterJob(name string, clusters ...string) *BridgeJob {
	bj := &BridgeJob{}
	bj.APIVersion, bj.Kind = GroupVersion.String(), "BridgeJob"
	bj.Name, bj.Namespace = name, e.ns
	bj.Spec = BridgeJobSpec{Clusters: clusters, UpdateInterval: 1,
		JobData: JobData{JobScript: "#!/bin/bash\nhostname", ScriptLocation: "inline"}}
	return bj
}

// TestClustersBecomeTargets: a BridgeJob listing two BridgeClusters gets a
// record whose targets are the clusters (each with its credentials at
// /targets/<name>) and a pod with each cluster's Secret mounted there.
func TestClustersBecomeTargets(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.secret("creds-b")
	e.cluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", `{"partition":"debug"}`)
	e.cluster("hpc-b", "https://slurm-b.example.org:6820", "creds-b", "")
	e.disableAgent("hpc-b")
	e.operator("a")
	e.create(e.clusterJob("placed", "hpc-a", "hpc-b"))
	cm, kj := e.children("placed")

	var ts []record.Target
	if err := json.Unmarshal([]byte(cm.Data["targets"]), &ts); err != nil {
		t.Fatalf("the record's targets %q: %v", cm.Data["targets"], err)
	}
	if len(ts) != 2 || ts[0].Name != "hpc-a" || ts[1].Name != "hpc-b" {
		t.Fatalf("targets %+v, want hpc-a and hpc-b", ts)
	}
	// hpc-a has its agent (the default): placement reads its load there;
	// hpc-b's is off: the step probes it.
	for i, want := range []struct{ url, props, cluster string }{{"https://slurm-a.example.org:6820", `{"partition":"debug"}`, "hpc-a"}, {"https://slurm-b.example.org:6820", "", ""}} {
		if ts[i].Backend != "slurm" || ts[i].ResourceURL != want.url || ts[i].Credentials != "/targets/"+ts[i].Name || string(ts[i].JobProperties) != want.props || ts[i].Cluster != want.cluster {
			t.Errorf("target %d = %+v (jobproperties %s)", i, ts[i], ts[i].JobProperties)
		}
	}
	if d, err := record.SpecFromData(cm.Data).Parse(); err != nil || len(d.Targets) != 2 {
		t.Errorf("the record's description: %v", err)
	}
	if cm.Data["backend"] != "slurm" {
		t.Errorf("the record's backend is %q, want the clusters' slurm", cm.Data["backend"])
	}
	mounts := map[string]string{}
	vols := map[string]string{}
	for _, v := range kj.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			vols[v.Name] = v.Secret.SecretName
		}
	}
	for _, m := range kj.Spec.Template.Spec.Containers[0].VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("the mount %s is writable", m.MountPath)
		}
		mounts[m.MountPath] = vols[m.Name]
	}
	if len(mounts) != 2 || mounts["/targets/hpc-a"] != "creds-a" || mounts["/targets/hpc-b"] != "creds-b" {
		t.Errorf("the pod mounts %v, want creds-a at /targets/hpc-a and creds-b at /targets/hpc-b only", mounts)
	}
}

// TestMissingCluster: a BridgeJob listing a BridgeCluster that does not
// exist, or one whose Secret may not be used, is refused naming the entry
// and gets nothing; once the cluster appears, the BridgeJob is taken. One
// that names clusters and a resourceURL is refused.
func TestMissingCluster(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.cluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", "")
	e.cluster("hpc-nosecret", "https://slurm-c.example.org:6820", "missing", "")
	// The resync far away: the cluster's appearance alone (its watch) and
	// the Secret's (a recheck) let the BridgeJobs proceed.
	e.opts = func(o *Options) { o.Resync = 10 * time.Minute }
	e.operator("a")
	e.create(e.clusterJob("missing", "hpc-a", "hpc-b"))
	e.create(e.clusterJob("nosecret", "hpc-nosecret"))
	both := e.clusterJob("both", "hpc-a")
	both.Spec.ResourceURL = "https://slurm-a.example.org:6820"
	e.create(both)

	for name, want := range map[string][]string{
		"missing":  {"spec.clusters[1]:", "the BridgeCluster hpc-b does not exist"},
		"nosecret": {"spec.clusters[0] (the BridgeCluster hpc-nosecret's spec.resourceSecret):", `the Secret "missing"`},
		"both":     {"spec.clusters:", "spec.resourceURL"},
	} {
		bj := e.waitState(name, "FAILED")
		if !strings.HasPrefix(bj.Status.Message, want[0]) || !strings.Contains(bj.Status.Message, want[1]) {
			t.Errorf("%s: message %q, want %q ... %q", name, bj.Status.Message, want[0], want[1])
		}
		if c := condition(bj, CondAccepted); c.Status != "False" || c.Reason != "InvalidSpec" {
			t.Errorf("%s: Accepted condition = %+v", name, c)
		}
	}
	cms, _ := e.kc.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelName})
	jobs, _ := e.kc.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{})
	if len(cms.Items) != 0 || len(jobs.Items) != 0 {
		t.Errorf("refused BridgeJobs created %d ConfigMaps and %d Jobs", len(cms.Items), len(jobs.Items))
	}
	e.secret("creds-b")
	e.cluster("hpc-b", "https://slurm-b.example.org:6820", "creds-b", "")
	e.children("missing")
	e.secret("missing")
	e.children("nosecret")
}

// TestClusterStatusFromPlacement: the placement invoke records in a
// BridgeJob's record (status.placement) becomes its clusters' status: the
// one that did not answer unreachable, the chosen one with its figures and
// the BridgeJob placed there. The operator runs with the grants of
// deploy/operator/rbac.yaml only.
func TestClusterStatusFromPlacement(t *testing.T) {
	e := newEnv(t)
	e.secret("creds-a")
	e.secret("creds-b")
	e.cluster("hpc-a", "https://slurm-a.example.org:6820", "creds-a", "")
	e.cluster("hpc-b", "ssh://alice@login-b.example.org:22", "creds-b", "")
	e.grantOperatorRBAC(true, "../deploy/operator/rbac.yaml")
	e.opCfg = testkube.ServiceAccountConfig(t, e.kc, e.ns, "bridge-runner-operator")
	e.operator("a")
	e.create(e.clusterJob("placed", "hpc-a", "hpc-b"))
	cm, _ := e.children("placed")
	e.waitFor("hpc-a's status to say no probe yet", func() (bool, error) {
		bc, err := e.bridgeCluster("hpc-a")
		return err == nil && bc.Status.Host == "slurm-a.example.org:6820" && bc.Status.Reachable == nil &&
			strings.Contains(bc.Status.Message, "no placement"), err
	})

	n := func(v int) *int { return &v }
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	p := record.Placed{Target: "hpc-b", Backend: "slurm", Policy: record.PolicyEarliestStart, At: at, Probes: []record.Probe{
		{Target: "hpc-a", Skipped: "did not answer within 10s"},
		{Target: "hpc-b", Queue: "batch", FreeCPUs: n(4), TotalCPUs: n(8), PendingJobs: n(1), RunningJobs: n(2)},
	}}
	raw, _ := json.Marshal(p)
	cm.Data[record.KeyPlacement] = string(raw)
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	if err := e.c.Update(context.Background(), kube.ConfigMaps, e.ns, cm.Name, cm, &kube.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	// What re-attach and cleanup read: the job at the placed cluster, with
	// that cluster's credentials directory.
	if d, err := record.DescribeRecord(cm.Data); err != nil || d.Target != "hpc-b" || d.CredentialsDir != "/targets/hpc-b" ||
		d.ResourceURL != "ssh://alice@login-b.example.org:22" {
		t.Errorf("the placed record describes %+v (%v)", d, err)
	}

	var a, b *BridgeCluster
	e.waitFor("both clusters' status from the placement", func() (bool, error) {
		var err1, err2 error
		a, err1 = e.bridgeCluster("hpc-a")
		b, err2 = e.bridgeCluster("hpc-b")
		return err1 == nil && err2 == nil && a.Status.LastProbe != nil && b.Status.LastProbe != nil, err1
	})
	if a.Status.Reachable == nil || *a.Status.Reachable || a.Status.FreeCPUs != nil || a.Status.LastPlacedJob != "" ||
		!strings.Contains(a.Status.Message, "did not answer") || !a.Status.LastProbe.Time.Equal(at) {
		t.Errorf("hpc-a's status %+v", a.Status)
	}
	s := b.Status
	if s.Reachable == nil || !*s.Reachable || s.FreeCPUs == nil || *s.FreeCPUs != 4 || s.TotalCPUs == nil || *s.TotalCPUs != 8 ||
		s.PendingJobs == nil || *s.PendingJobs != 1 || s.RunningJobs == nil || *s.RunningJobs != 2 ||
		s.LastPlacedJob != "placed" || !s.LastProbe.Time.Equal(at) || s.Host != "login-b.example.org:22" {
		t.Errorf("hpc-b's status %+v", s)
	}
}

func (e *env) bridgeCluster(name string) (*BridgeCluster, error) {
	bc := &BridgeCluster{}
	return bc, e.c.Get(context.Background(), BridgeClusters, e.ns, name, bc)
}

// TestTargetsTenancy: a BridgeJob's own spec.targets may not name an
// absolute credentials directory (the pod's ServiceAccount token would go
// to the author's URL) nor a local target without --allow-local; targets
// that name their places need no spec.backend or spec.resourceURL.
func TestTargetsTenancy(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.opts = func(o *Options) { o.AllowLocal = false }
	e.operator("a")
	author := e.author()
	job := func(name, targets string) {
		bj := e.localJob(name, "hostname")
		bj.Spec.Backend, bj.Spec.Targets = "", targets
		e.createAs(author, bj)
	}
	job("token", `[{"name":"a","backend":"slurm","resourceURL":"https://a.example.org:6820","credentials":"/var/run/secrets/kubernetes.io/serviceaccount"}]`)
	job("absolute", `[{"name":"a","backend":"slurm","resourceURL":"https://a.example.org:6820","credentials":"/etc/ssl"}]`)
	job("local-target", `[{"name":"a","backend":"slurm","resourceURL":"https://a.example.org:6820"},{"name":"b","backend":"local"}]`)
	job("fine", `[{"name":"a","backend":"slurm","resourceURL":"https://a.example.org:6820"},{"name":"b","backend":"slurm","resourceURL":"https://b.example.org:6820","credentials":"b"}]`)

	e.refused("token", "spec (targets[0].credentials)", "where the pod's own identity (its ServiceAccount token) is mounted")
	e.refused("absolute", "spec.targets", "targets[0].credentials is an absolute directory")
	e.refused("local-target", "spec.targets", "targets[1] is local")
	cm, _ := e.children("fine")
	if d, err := record.SpecFromData(cm.Data).Parse(); err != nil || len(d.Targets) != 2 {
		t.Errorf("the record of fine: %v", err)
	}
}
