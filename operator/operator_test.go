package operator

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/internal/testbin"
	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// env is one test's namespace on the real apiserver, with the CRD
// installed and clients for the test's own reads and writes.
type env struct {
	t    *testing.T
	cfg  *rest.Config
	kc   kubernetes.Interface
	c    *kube.Client
	ns   string
	bin  string
	logs *bytes.Buffer // the played pods' stderr
	out  *bytes.Buffer // and stdout
	// opCfg is the operator's configuration (default: the admin's).
	opCfg *rest.Config
	// state is the pods' state directory: the local backend keeps its jobs
	// there, so invoke and cleanup must share it (as pods share the machine).
	state string
	// opts adjusts the operator's Options before it starts.
	opts func(*Options)
}

var crdOnce sync.Once

func newEnv(t *testing.T) *env {
	t.Helper()
	cfg := testkube.Config(t)
	kc := testkube.ClientFor(t, cfg)
	crdOnce.Do(func() {
		testkube.ApplyCRD(t, cfg, "../deploy/operator/crd.yaml")
		testkube.ApplyCRD(t, cfg, "../deploy/operator/crd-bridgecluster.yaml")
	})
	c, err := newClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, cfg: cfg, opCfg: cfg, kc: kc, c: c, ns: testkube.Namespace(t, kc), bin: testbin.Path(t, ".."), logs: &bytes.Buffer{}, out: &bytes.Buffer{}, state: t.TempDir()}
	// Runs before the namespace's removal: a BridgeJob left with our
	// finalizer (its operator stopped) would keep the namespace.
	t.Cleanup(e.dropFinalizers)
	return e
}

func (e *env) dropFinalizers() {
	ctx := context.Background()
	list := &BridgeJobList{}
	if err := e.c.REST().Get().AbsPath(BridgeJobs.Path(e.ns)).Do(ctx).Into(list); err != nil {
		return
	}
	for _, bj := range list.Items {
		bj.Finalizers = nil
		_ = e.c.Update(ctx, BridgeJobs, e.ns, bj.Name, &bj, &BridgeJob{})
	}
}

// operator starts an operator for the namespace; stop ends it gracefully
// and waits for it.
func (e *env) operator(identity string) (stop func()) {
	e.t.Helper()
	return e.operatorWith(identity, 20*time.Second)
}

func (e *env) operatorWith(identity string, deleteTimeout time.Duration) (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		o := Options{Config: e.opCfg, Namespace: e.ns, JobImage: testImage,
			Backends: []string{"local", "slurm", "lsf", "ray", "quantum"}, SecretOptIn: SecretOptInLabel, AllowLocal: true,
			Workers: 2, Resync: 30 * time.Second, DeleteTimeout: deleteTimeout,
			LeaderElection: true, LeaseNamespace: e.ns, Identity: identity}
		if e.opts != nil {
			e.opts(&o)
		}
		done <- Run(ctx, o)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.t.Errorf("operator %s: %v", identity, err)
				}
			case <-time.After(30 * time.Second):
				e.t.Errorf("operator %s did not stop within 30s of its context's end", identity)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// testImage is the operator's own image in these tests.
const testImage = "example.org/bridge-runner:test"

// testPullPolicy is the operator's pull policy for testImage in tests that
// set it (IBM's samples ask for Always).
const testPullPolicy = "IfNotPresent"

// secret creates a Secret that opted in to BridgeJobs.
func (e *env) secret(name string) {
	e.t.Helper()
	e.secretIn(e.ns, name, map[string]string{SecretOptInLabel: "true"})
}

// testOrigins are the places this package's BridgeJobs and BridgeClusters
// name, which the tests' Secrets are bound to (record.OriginsKey).
const testOrigins = "https://slurm.example.org:6820 https://slurm-a.example.org:6820 https://slurm-b.example.org:6820 " +
	"https://slurm-c.example.org:6820 https://a.example.org:6820 https://b.example.org:6820 ssh://login-b.example.org:22"

func (e *env) secretIn(ns, name string, labels map[string]string) {
	e.t.Helper()
	e.secretWith(ns, name, labels, map[string]string{"token": "not-for-logs", record.OriginsKey: testOrigins})
}

func (e *env) secretWith(ns, name string, labels, data map[string]string) {
	e.t.Helper()
	_, err := e.kc.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, StringData: data}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

// localJob is a BridgeJob that runs script on this machine.
func (e *env) localJob(name, script string) *BridgeJob {
	bj := &BridgeJob{}
	bj.APIVersion, bj.Kind = GroupVersion.String(), "BridgeJob"
	bj.Name, bj.Namespace = name, e.ns
	bj.Spec = BridgeJobSpec{Backend: "local", ResourceSecret: "creds", UpdateInterval: 1,
		JobData: JobData{JobScript: script, ScriptLocation: "inline"}}
	return bj
}

func (e *env) create(bj *BridgeJob) *BridgeJob {
	e.t.Helper()
	out := &BridgeJob{}
	if err := e.c.Create(context.Background(), BridgeJobs, e.ns, bj, out); err != nil {
		e.t.Fatalf("creating BridgeJob %s: %v", bj.Name, err)
	}
	return out
}

func (e *env) get(name string) (*BridgeJob, error) {
	bj := &BridgeJob{}
	return bj, e.c.Get(context.Background(), BridgeJobs, e.ns, name, bj)
}

// waitFor polls cond until it holds or 60 s pass.
func (e *env) waitFor(what string, cond func() (bool, error)) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
}

func (e *env) waitState(name, state string) *BridgeJob {
	e.t.Helper()
	var bj *BridgeJob
	e.waitFor(name+" in state "+state, func() (bool, error) {
		var err error
		bj, err = e.get(name)
		return err == nil && bj.Status.State == state, err
	})
	return bj
}

func (e *env) children(name string) (*kube.ConfigMap, *kube.Job) {
	e.t.Helper()
	var cm *kube.ConfigMap
	var kj *kube.Job
	e.waitFor("the record and the Job of "+name, func() (bool, error) {
		cm, kj = &kube.ConfigMap{}, &kube.Job{}
		if err := e.c.Get(context.Background(), kube.ConfigMaps, e.ns, record.ConfigMapName(name), cm); err != nil {
			return false, err
		}
		err := e.c.Get(context.Background(), kube.Jobs, e.ns, JobName(name), kj)
		return err == nil, err
	})
	return cm, kj
}

// invoke plays the Job's pod, which no kubelet runs here: the real binary
// with the Job's own arguments, against the real apiserver.
func (e *env) invoke(kj *kube.Job) *exec.Cmd {
	e.t.Helper()
	args := slices.Clone(kj.Spec.Template.Spec.Containers[0].Args)
	for i := range args { // the pod's mount, here a directory of the test
		if args[i] == credentialsDir {
			args[i] = e.t.TempDir()
		}
	}
	args = append(args, "--kubeconfig", e.podKubeconfig(kj.Spec.Template.Spec.ServiceAccountName), "--namespace", e.ns,
		"--state-dir", e.state)
	if args[0] == "invoke" {
		args = append(args, "--termination-log", filepath.Join(e.t.TempDir(), "termination-log"))
	}
	cmd := exec.Command(e.bin, args...)
	cmd.Stderr, cmd.Stdout = e.logs, e.out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

// podKubeconfig is a kubeconfig of the pod's ServiceAccount, as the pod
// would have its token: what the played pod may do is what the real one may.
func (e *env) podKubeconfig(sa string) string {
	e.t.Helper()
	cfg := testkube.ServiceAccountConfig(e.t, e.kc, e.ns, sa)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test", Namespace: e.ns}
	kc.CurrentContext = "test"
	p := filepath.Join(e.t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(60 * time.Second):
		t.Fatal("invoke did not end within 60s")
		return -1
	}
}

func condition(bj *BridgeJob, typ string) Condition {
	for _, c := range bj.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return Condition{}
}

// TestCreateToDone: a BridgeJob gets a record holding its description and
// a Job that runs invoke with the credentials mounted; the job's end is
// mirrored into status.
func TestCreateToDone(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.operator("a")
	created := e.create(e.localJob("hello", "echo hello from the operator"))
	cm, kj := e.children("hello")

	if got := cm.Data["jobdata.jobScript"]; got != "echo hello from the operator" {
		t.Errorf("record's jobdata.jobScript = %q", got)
	}
	if got := cm.Data["backend"]; got != "local" {
		t.Errorf("record's backend = %q", got)
	}
	for name, refs := range map[string][]metav1.OwnerReference{"record": cm.OwnerReferences, "Job": kj.OwnerReferences} {
		if len(refs) != 1 || refs[0].UID != created.UID || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%s's owner references = %+v, want the BridgeJob as controller", name, refs)
		}
	}
	pod := kj.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != testImage || c.Args[0] != "invoke" || !slices.Contains(c.Args, "hello") {
		t.Errorf("Job's container: image %q args %q", c.Image, c.Args)
	}
	// Its Role names the record alone: no cluster's watcher.
	if !slices.Contains(c.Args, "--watcher=false") {
		t.Errorf("Job's container args %q, want --watcher=false", c.Args)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != "creds" ||
		len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/credentials" {
		t.Errorf("Job's credentials: volumes %+v mounts %+v", pod.Volumes, c.VolumeMounts)
	}
	if pod.ServiceAccountName != AccessName("hello") || pod.RestartPolicy != "Never" {
		t.Errorf("Job's pod: serviceAccountName %q restartPolicy %q", pod.ServiceAccountName, pod.RestartPolicy)
	}
	if bj, _ := e.get("hello"); bj.Status.State != "PENDING" && bj.Status.State != "" {
		t.Errorf("before invoke ran, state = %q", bj.Status.State)
	}

	if code := exitCode(t, e.invoke(kj)); code != 0 {
		t.Fatalf("invoke exited %d; stderr:\n%s", code, e.logs)
	}
	bj := e.waitState("hello", "DONE")
	if bj.Status.JobStatus != "DONE" || bj.Status.JobID == "" || bj.Status.StartTime == "" || bj.Status.CompletionTime == "" {
		t.Errorf("status = %+v", bj.Status)
	}
	if bj.Status.ObservedGeneration != bj.Generation {
		t.Errorf("observedGeneration %d, generation %d", bj.Status.ObservedGeneration, bj.Generation)
	}
	if c := condition(bj, CondFinished); c.Status != "True" || c.Reason != "Done" {
		t.Errorf("Finished condition = %+v", c)
	}
	if c := condition(bj, CondSubmitted); c.Status != "True" {
		t.Errorf("Submitted condition = %+v", c)
	}
	if !slices.Contains(bj.Finalizers, Finalizer) {
		t.Errorf("finalizers = %v", bj.Finalizers)
	}
	if strings.Contains(e.logs.String(), "not-for-logs") {
		t.Error("a credential reached the logs")
	}
}

// TestBadSpec: a missing Secret and a bad field each give FAILED, a message
// naming the field, and a Warning Event; nothing is created.
func TestBadSpec(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.operator("a")
	noSecret := e.localJob("no-secret", "true")
	noSecret.Spec.ResourceSecret = "missing"
	e.create(noSecret)
	badProps := e.localJob("bad-props", "true")
	badProps.Spec.JobProperties = "not json"
	e.create(badProps)
	badS3 := e.localJob("bad-s3", "true")
	badS3.Spec.S3Upload = &Upload{Bucket: "out"}
	e.create(badS3)

	for name, field := range map[string]string{"no-secret": "spec.resourcesecret", "bad-props": "spec.jobproperties", "bad-s3": "spec.s3storage.endpoint"} {
		bj := e.waitState(name, "FAILED")
		if !strings.HasPrefix(bj.Status.Message, field+":") {
			t.Errorf("%s: message %q does not name %s", name, bj.Status.Message, field)
		}
		if c := condition(bj, CondAccepted); c.Status != "False" || c.Reason != "InvalidSpec" {
			t.Errorf("%s: Accepted condition = %+v", name, c)
		}
		e.waitFor("a Warning Event on "+name, func() (bool, error) {
			evs, err := e.kc.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				return false, err
			}
			for _, ev := range evs.Items {
				if ev.Type == "Warning" && ev.Reason == "InvalidSpec" && strings.Contains(ev.Message, field) {
					return true, nil
				}
			}
			return false, nil
		})
	}
	cms, _ := e.kc.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelName})
	jobs, _ := e.kc.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{})
	if len(cms.Items) != 0 || len(jobs.Items) != 0 {
		t.Errorf("a bad spec created %d ConfigMaps and %d Jobs", len(cms.Items), len(jobs.Items))
	}
}

// TestKill: spec.kill sets kill in the record; the running invoke cancels
// the job and the BridgeJob ends KILLED (KILL, IBM's word, in jobstatus).
func TestKill(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.operator("a")
	e.create(e.localJob("long", "sleep 120"))
	_, kj := e.children("long")
	inv := e.invoke(kj)
	bj := e.waitState("long", "RUNNING")
	bj.Spec.Kill = true
	if err := e.c.Update(context.Background(), BridgeJobs, e.ns, "long", bj, &BridgeJob{}); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, inv); code != 3 {
		t.Fatalf("invoke exited %d, want 3 (KILLED); stderr:\n%s", code, e.logs)
	}
	bj = e.waitState("long", "KILLED")
	if bj.Status.JobStatus != "KILL" {
		t.Errorf("jobstatus = %q, want IBM's KILL", bj.Status.JobStatus)
	}
	cm := &kube.ConfigMap{}
	if err := e.c.Get(context.Background(), kube.ConfigMaps, e.ns, record.ConfigMapName("long"), cm); err != nil || cm.Data[record.KeyKill] != "true" {
		t.Errorf("record's kill = %q (%v)", cm.Data[record.KeyKill], err)
	}
}

// TestDeleteMidRun: deleting a running BridgeJob cancels its job through
// the finalizer, then removes the record and the Job (the operator deletes
// them itself: this apiserver has no garbage collector) and the BridgeJob.
func TestDeleteMidRun(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.operator("a")
	e.create(e.localJob("doomed", "sleep 120"))
	_, kj := e.children("doomed")
	inv := e.invoke(kj)
	e.waitState("doomed", "RUNNING")
	if err := e.c.Delete(context.Background(), BridgeJobs, e.ns, "doomed", ""); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, inv); code != 3 {
		t.Fatalf("invoke exited %d, want 3 (KILLED); stderr:\n%s", code, e.logs)
	}
	e.waitFor("the BridgeJob and its children to go", func() (bool, error) {
		_, err1 := e.get("doomed")
		err2 := e.c.Get(context.Background(), kube.ConfigMaps, e.ns, record.ConfigMapName("doomed"), &kube.ConfigMap{})
		err3 := e.c.Get(context.Background(), kube.Jobs, e.ns, JobName("doomed"), &kube.Job{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3), errors.Join(err1, err2, err3)
	})
}

// TestDeleteAfterInvokeDied: the invoke pod died without cancelling (here
// SIGKILL), so nobody obeys kill=true; after DeleteTimeout the operator
// starts a cleanup Job, whose `bridge-runner cleanup` cancels the remote job
// with the credentials and deletes the record; then the BridgeJob goes.
func TestDeleteAfterInvokeDied(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.operatorWith("a", 2*time.Second)
	e.create(e.localJob("orphan", "sleep 120"))
	_, kj := e.children("orphan")
	inv := e.invoke(kj)
	e.waitState("orphan", "RUNNING")
	_ = inv.Process.Kill()
	_ = inv.Wait()
	if err := e.c.Delete(context.Background(), BridgeJobs, e.ns, "orphan", ""); err != nil {
		t.Fatal(err)
	}
	cj := &kube.Job{}
	e.waitFor("the cleanup Job", func() (bool, error) {
		err := e.c.Get(context.Background(), kube.Jobs, e.ns, CleanupName("orphan"), cj)
		return err == nil, err
	})
	c := cj.Spec.Template.Spec.Containers[0]
	if c.Args[0] != "cleanup" || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/credentials" {
		t.Errorf("cleanup Job's container: args %q mounts %+v", c.Args, c.VolumeMounts)
	}
	cl := e.invoke(cj)
	if code := exitCode(t, cl); code != 0 {
		t.Fatalf("cleanup exited %d; stderr:\n%s", code, e.logs)
	}
	e.waitFor("the BridgeJob and its children to go", func() (bool, error) {
		_, err1 := e.get("orphan")
		err2 := e.c.Get(context.Background(), kube.ConfigMaps, e.ns, record.ConfigMapName("orphan"), &kube.ConfigMap{})
		err3 := e.c.Get(context.Background(), kube.Jobs, e.ns, JobName("orphan"), &kube.Job{})
		err4 := e.c.Get(context.Background(), kube.Jobs, e.ns, CleanupName("orphan"), &kube.Job{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3) && apierrors.IsNotFound(err4),
			errors.Join(err1, err2, err3, err4)
	})
	if !strings.Contains(e.out.String(), `"cancelled":true`) {
		t.Errorf("cleanup did not cancel the job; stdout:\n%s\nstderr:\n%s", e.out, e.logs)
	}
}

// TestRestartMidRun: two replicas, one leads; the leader stops mid-run
// and the other takes over: no second record or Job, the same remote job,
// and the end is mirrored by the new leader.
func TestRestartMidRun(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	stopA := e.operator("a")
	e.waitFor("replica a to lead", func() (bool, error) {
		l := &kube.Lease{}
		err := e.c.Get(context.Background(), kube.Leases, e.ns, "bridge-runner-operator", l)
		return err == nil && l.Spec.HolderIdentity == "a", err
	})
	e.operator("b")
	e.create(e.localJob("survivor", "sleep 4"))
	cm1, kj1 := e.children("survivor")
	inv := e.invoke(kj1)
	running := e.waitState("survivor", "RUNNING")
	stopA()
	l := &kube.Lease{}
	e.waitFor("replica b to lead", func() (bool, error) {
		err := e.c.Get(context.Background(), kube.Leases, e.ns, "bridge-runner-operator", l)
		return err == nil && l.Spec.HolderIdentity == "b", err
	})
	if code := exitCode(t, inv); code != 0 {
		t.Fatalf("invoke exited %d; stderr:\n%s", code, e.logs)
	}
	done := e.waitState("survivor", "DONE")
	if done.Status.JobID != running.Status.JobID {
		t.Errorf("job id %q after the restart, %q before", done.Status.JobID, running.Status.JobID)
	}
	cm2, kj2 := e.children("survivor")
	if cm2.UID != cm1.UID || kj2.UID != kj1.UID {
		t.Errorf("children were recreated: record %s -> %s, Job %s -> %s", cm1.UID, cm2.UID, kj1.UID, kj2.UID)
	}
	cms, _ := e.kc.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelName})
	jobs, _ := e.kc.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{})
	if len(cms.Items) != 1 || len(jobs.Items) != 1 {
		t.Errorf("%d records and %d Jobs, want 1 each", len(cms.Items), len(jobs.Items))
	}
	if l.Spec.LeaseTransitions < 2 {
		t.Errorf("lease transitions = %d, want 2 (a, then b)", l.Spec.LeaseTransitions)
	}
	if n := strings.Count(e.logs.String(), "msg=submitted "); n != 1 {
		t.Errorf("invoke logged %d submits, want 1", n)
	}
}

// TestLeastPrivilege: the operator does its whole job with exactly the
// grants of deploy/operator/rbac.yaml (both ClusterRoles bound in the
// namespace, the leader election Role): a bad spec, a job to DONE, and a
// deletion.
func TestLeastPrivilege(t *testing.T) {
	e := newEnv(t)
	e.secret("creds")
	e.grantOperatorRBAC(true, "../deploy/operator/rbac.yaml")
	e.opCfg = testkube.ServiceAccountConfig(t, e.kc, e.ns, "bridge-runner-operator")
	e.operator("least")

	bad := e.localJob("bad", "true")
	bad.Spec.ResourceSecret = "missing"
	e.create(bad)
	if bj := e.waitState("bad", "FAILED"); !strings.HasPrefix(bj.Status.Message, "spec.resourcesecret:") {
		t.Errorf("message %q", bj.Status.Message)
	}
	e.create(e.localJob("good", "echo least privilege"))
	_, kj := e.children("good")
	if code := exitCode(t, e.invoke(kj)); code != 0 {
		t.Fatalf("invoke exited %d; stderr:\n%s", code, e.logs)
	}
	e.waitState("good", "DONE")
	if err := e.c.Delete(context.Background(), BridgeJobs, e.ns, "good", ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the BridgeJob and its children to go", func() (bool, error) {
		_, err1 := e.get("good")
		err2 := e.c.Get(context.Background(), kube.ConfigMaps, e.ns, record.ConfigMapName("good"), &kube.ConfigMap{})
		err3 := e.c.Get(context.Background(), kube.Jobs, e.ns, JobName("good"), &kube.Job{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3), errors.Join(err1, err2, err3)
	})
}

// grantOperatorRBAC creates the Roles of files and, with clusterRoles,
// their ClusterRole (under a name of this test's, bound in the namespace
// only), and binds each to the ServiceAccount bridge-runner-operator.
func (e *env) grantOperatorRBAC(clusterRoles bool, files ...string) {
	e.t.Helper()
	ctx := context.Background()
	sa := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bridge-runner-operator", Namespace: e.ns}}
	for _, f := range files {
		for _, doc := range testutil.YAMLDocs(e.t, f) {
			var obj struct {
				Kind     string              `json:"kind"`
				Metadata metav1.ObjectMeta   `json:"metadata"`
				Rules    []rbacv1.PolicyRule `json:"rules"`
			}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				e.t.Fatal(err)
			}
			switch obj.Kind {
			case "ClusterRole":
				if !clusterRoles {
					continue
				}
				name := e.clusterRole(obj.Metadata.Name, obj.Rules)
				e.bind(obj.Metadata.Name, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}, sa)
			case "Role":
				r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: obj.Metadata.Name}, Rules: obj.Rules}
				if _, err := e.kc.RbacV1().Roles(e.ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
					e.t.Fatal(err)
				}
				e.bind(r.Name, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: r.Name}, sa)
			}
		}
	}
}

// clusterRole creates a ClusterRole of rules under a name of this test's
// (name prefixed with the namespace), removed after the test.
func (e *env) clusterRole(name string, rules []rbacv1.PolicyRule) string {
	e.t.Helper()
	name = "bt-" + e.ns + "-" + name
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := e.kc.RbacV1().ClusterRoles().Create(context.Background(), cr, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.kc.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func (e *env) bind(name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
	e.t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects}
	if _, err := e.kc.RbacV1().RoleBindings(e.ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
