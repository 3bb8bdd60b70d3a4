package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// env is what the suite needs from hack/e2e.sh (cluster-up, slurm-up and
// s3-up env files, and the image it loaded). Under CI=true a missing piece
// fails the suite; elsewhere the suite skips.
type env struct {
	kubeconfig string
	nodeIP     string
	image      string
	repo       string // the repository root (for kubectl apply -k workflows)
	kubectl    string

	slurmURL     string // host side, for checks (127.0.0.1)
	slurmPodURL  string // what pods use: the node's own address
	slurmUser    string
	slurmToken   string
	s3Endpoint   string // host:port on the node's own address
	s3AccessKey  string
	s3SecretKey  string
	iptablesPods string // the pod CIDR, for the outage test
	slurmWorkDir string // where the jobs run (writable by the Slurm job user)

	// A real Ray whose Jobs API listens on the node's own address (token
	// auth); optional for the suite, needed by the Ray tests (needRay).
	rayURL   string
	rayToken string

	kube *kubernetes.Clientset
	dyn  dynamic.Interface
	s3   *minio.Client
	ns   string
}

var (
	theEnv     *env
	theEnvErr  error
	theEnvOnce sync.Once
)

var workflowsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}

// suiteCleanups undo, after all tests, what tests set up once for all of
// them (the operator). Appended to only inside a sync.Once.
var suiteCleanups []func()

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(suiteCleanups) - 1; i >= 0; i-- {
		suiteCleanups[i]()
	}
	os.Exit(code)
}

// setup returns the shared environment, creating the test namespace with the
// shipped WorkflowTemplates and RBAC (kubectl apply -k workflows), the
// credentials Secrets and an S3 bucket once.
func setup(t *testing.T) *env {
	t.Helper()
	theEnvOnce.Do(func() { theEnv, theEnvErr = newEnv() })
	if theEnvErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("e2e environment not available (CI=true, so this fails instead of skipping): %v", theEnvErr)
		}
		t.Skipf("e2e environment not available (run bash hack/e2e.sh): %v", theEnvErr)
	}
	return theEnv
}

func newEnv() (*env, error) {
	e := &env{
		kubeconfig:   os.Getenv("BRIDGE_E2E_KUBECONFIG"),
		nodeIP:       os.Getenv("BRIDGE_E2E_NODE_IP"),
		image:        os.Getenv("BRIDGE_E2E_IMAGE"),
		repo:         os.Getenv("BRIDGE_E2E_REPO"),
		slurmURL:     os.Getenv("BRIDGE_TEST_SLURM_URL"),
		slurmPodURL:  os.Getenv("BRIDGE_TEST_SLURM_LISTEN_URL"),
		slurmUser:    os.Getenv("BRIDGE_TEST_SLURM_USER"),
		slurmToken:   os.Getenv("BRIDGE_TEST_SLURM_TOKEN"),
		s3Endpoint:   os.Getenv("BRIDGE_TEST_S3_ENDPOINT"),
		s3AccessKey:  os.Getenv("BRIDGE_TEST_S3_ACCESS_KEY"),
		s3SecretKey:  os.Getenv("BRIDGE_TEST_S3_SECRET_KEY"),
		iptablesPods: os.Getenv("BRIDGE_E2E_POD_CIDR"),
		slurmWorkDir: os.Getenv("BRIDGE_E2E_SLURM_WORKDIR"),
		rayURL:       os.Getenv("BRIDGE_E2E_RAY_URL"),
	}
	if dir := os.Getenv("BRIDGE_E2E_RAY_CREDS_DIR"); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "token"))
		if err != nil {
			return nil, fmt.Errorf("the e2e Ray's token: %w", err)
		}
		e.rayToken = strings.TrimSpace(string(b))
	}
	var missing []string
	for k, v := range map[string]string{
		"BRIDGE_E2E_KUBECONFIG": e.kubeconfig, "BRIDGE_E2E_NODE_IP": e.nodeIP, "BRIDGE_E2E_IMAGE": e.image,
		"BRIDGE_TEST_SLURM_URL": e.slurmURL, "BRIDGE_TEST_SLURM_LISTEN_URL": e.slurmPodURL,
		"BRIDGE_TEST_SLURM_USER": e.slurmUser, "BRIDGE_TEST_SLURM_TOKEN": e.slurmToken,
		"BRIDGE_TEST_S3_ENDPOINT": e.s3Endpoint, "BRIDGE_TEST_S3_ACCESS_KEY": e.s3AccessKey,
		"BRIDGE_TEST_S3_SECRET_KEY": e.s3SecretKey,
	} {
		if v == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("not set: %s", strings.Join(missing, ", "))
	}
	if e.repo == "" {
		wd, _ := os.Getwd()
		e.repo = filepath.Dir(wd)
	}
	if e.slurmWorkDir == "" {
		e.slurmWorkDir = "/tmp"
	}
	if e.iptablesPods == "" {
		e.iptablesPods = "10.244.77.0/24"
	}
	var err error
	if e.kubectl, err = exec.LookPath("kubectl"); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		return nil, err
	}
	if e.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if e.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if e.s3, err = minio.New(e.s3Endpoint, &minio.Options{Creds: credentials.NewStaticV4(e.s3AccessKey, e.s3SecretKey, ""), Secure: false}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := e.kube.Discovery().ServerVersion(); err != nil {
		return nil, fmt.Errorf("the cluster does not answer: %w", err)
	}
	e.ns = "bridge-e2e-" + randHex(3)
	if err := e.prepareNamespace(ctx, e.ns); err != nil {
		return nil, err
	}
	return e, nil
}

// prepareNamespace creates namespace ns with what a user installs there:
// the shipped WorkflowTemplates and RBAC (kubectl apply -k workflows) and
// the credentials Secrets, each bound to its origins and opted in to
// BridgeJobs.
func (e *env) prepareNamespace(ctx context.Context, ns string) error {
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The shipped templates and RBAC, the way the README installs them.
	if out, err := exec.CommandContext(ctx, e.kubectl, "--kubeconfig", e.kubeconfig, "apply", "-k",
		filepath.Join(e.repo, "workflows"), "-n", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply -k workflows: %v: %s", err, out)
	}
	// Each bound to the origins it serves (README, Security).
	secrets := map[string]map[string]string{
		"slurm-credentials":     {"username": e.slurmUser + "\n", "token": e.slurmToken + "\n", originsKey: origins(e.slurmPodURL, e.slurmURL)},
		"bridge-s3-credentials": {"accesskey": e.s3AccessKey + "\n", "secretkey": e.s3SecretKey + "\n", originsKey: origins("http://"+e.s3Endpoint, "https://"+e.s3Endpoint)},
	}
	if e.rayURL != "" {
		secrets["ray-credentials"] = map[string]string{"token": e.rayToken + "\n", originsKey: origins(e.rayURL)}
	}
	for name, data := range secrets {
		// Opted in to BridgeJobs (the operator's tenancy model; README, Security).
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bridge-runner.io/allow-bridgejobs": "true"}}, StringData: data}
		if _, err := e.kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	// The default ServiceAccount appears when the controller-manager gets to it;
	// bridge-runner's is applied above. Wait for its token-less existence.
	if err := poll(ctx, time.Second, func() (bool, error) {
		_, err := e.kube.CoreV1().ServiceAccounts(ns).Get(ctx, "bridge-runner", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("ServiceAccount bridge-runner: %w", err)
	}
	return nil
}

// needRay fails the test under CI=true (skips it elsewhere) when the suite
// has no Ray that pods reach.
func (e *env) needRay(t *testing.T) {
	t.Helper()
	msg := ""
	switch {
	case e.rayURL == "":
		msg = "no Ray for the e2e suite: BRIDGE_E2E_RAY_URL is not set (hack/e2e.sh starts one)"
	case e.rayToken == "":
		msg = "the e2e Ray has no token: BRIDGE_E2E_RAY_CREDS_DIR is not set or its token file is empty"
	case strings.Contains(e.rayURL, "//127.") || strings.Contains(e.rayURL, "//localhost"):
		msg = "BRIDGE_E2E_RAY_URL=" + e.rayURL + " is a loopback address, which pods cannot reach; start Ray with BRIDGE_RAY_LISTEN=<node address>"
	default:
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true, so this fails instead of skipping)", msg)
	}
	t.Skip(msg)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// poll calls f every interval until it returns true or an error, or ctx ends.
func poll(ctx context.Context, interval time.Duration, f func() (bool, error)) error {
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// bucket creates a fresh bucket and returns its name.
func (e *env) bucket(t *testing.T) string {
	t.Helper()
	name := "e2e-" + strings.ToLower(randHex(4))
	if err := e.s3.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	return name
}

func (e *env) putObject(t *testing.T, bucket, key, content string) {
	t.Helper()
	_, err := e.s3.PutObject(context.Background(), bucket, key, strings.NewReader(content), int64(len(content)), minio.PutObjectOptions{})
	if err != nil {
		t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
}

func (e *env) getObject(t *testing.T, bucket, key string) string {
	t.Helper()
	o, err := e.s3.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return string(b)
}

// slurmJob is what the suite reads of a Slurm job (slurmrestd v0.0.38).
type slurmJob struct {
	JobID    int64  `json:"job_id"`
	Name     string `json:"name"`
	Comment  string `json:"comment"`
	JobState string `json:"job_state"`
	// Partition, and for a task of an array its array's job id (0 for a
	// job that is no array's).
	Partition  string `json:"partition"`
	ArrayJobID int64  `json:"array_job_id"`
	// Unix seconds, 0 for not yet (v0.0.38's plain numbers).
	SubmitTime int64 `json:"submit_time"`
	StartTime  int64 `json:"start_time"`
	EndTime    int64 `json:"end_time"`
}

// slurmJobs lists the jobs slurmctld knows (finished ones stay for MinJobAge).
func (e *env) slurmJobs(t *testing.T) []slurmJob {
	t.Helper()
	jobs, err := e.listSlurmJobs()
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func (e *env) listSlurmJobs() ([]slurmJob, error) {
	req, _ := http.NewRequest(http.MethodGet, e.slurmURL+"/slurm/v0.0.38/jobs", nil)
	req.Header.Set("X-SLURM-USER-NAME", e.slurmUser)
	req.Header.Set("X-SLURM-USER-TOKEN", e.slurmToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("slurmrestd: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("slurmrestd: %s: %s", resp.Status, body)
	}
	var jr struct {
		Jobs []slurmJob `json:"jobs"`
	}
	if err := json.Unmarshal(body, &jr); err != nil {
		return nil, fmt.Errorf("slurmrestd: %v", err)
	}
	return jr.Jobs, nil
}

// slurmLog keeps every job slurmctld listed while a long test ran, each as
// last seen: slurmctld forgets a finished job after MinJobAge (300 s), so
// a test longer than that reads its early jobs from here.
type slurmLog struct {
	mu   sync.Mutex
	jobs map[int64]slurmJob
	stop func()
	done chan struct{}
}

// logSlurmJobs lists Slurm's jobs every 10 s until the test ends (or
// stop), and once more at stop.
func (e *env) logSlurmJobs(t *testing.T) *slurmLog {
	ctx, cancel := context.WithCancel(context.Background())
	l := &slurmLog{jobs: map[int64]slurmJob{}, stop: cancel, done: make(chan struct{})}
	take := func() {
		if jobs, err := e.listSlurmJobs(); err == nil {
			l.mu.Lock()
			for _, j := range jobs {
				l.jobs[j.JobID] = j
			}
			l.mu.Unlock()
		}
	}
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			take()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
		}
		take()
	}()
	t.Cleanup(func() { l.end() })
	return l
}

// end stops the log after one last listing; it returns every job seen.
func (l *slurmLog) end() []slurmJob {
	l.stop()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]slurmJob, 0, len(l.jobs))
	for _, j := range l.jobs {
		out = append(out, j)
	}
	return out
}

// slurmJob returns the job with the given id.
func (e *env) slurmJob(t *testing.T, id string) slurmJob {
	t.Helper()
	for _, j := range e.slurmJobs(t) {
		if fmt.Sprint(j.JobID) == id {
			return j
		}
	}
	t.Fatalf("Slurm knows no job %s", id)
	return slurmJob{}
}

// jobsWithKey returns the Slurm jobs (stage-out jobs left out) stamped with key.
func (e *env) jobsWithKey(t *testing.T, key string) []slurmJob {
	t.Helper()
	var out []slurmJob
	for _, j := range e.slurmJobs(t) {
		if j.Comment == key && !strings.HasPrefix(j.Name, "stageout-") {
			out = append(out, j)
		}
	}
	return out
}

// kubectl runs the cluster's kubectl and returns its combined output.
// originsKey is the key of a Secret that lists where it may be sent
// (record.OriginsKey of the main module).
const originsKey = "bridge-runner.origins"

// origins is a binding (originsKey) of the URLs' origins: scheme://host:port.
func origins(urls ...string) string {
	var out []string
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Host != "" {
			out = append(out, u.Scheme+"://"+u.Host)
		}
	}
	return strings.Join(out, " ")
}

func (e *env) kubectlOut(args ...string) string {
	out, err := exec.Command(e.kubectl, append([]string{"--kubeconfig", e.kubeconfig, "-n", e.ns}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s\n(kubectl %s: %v)", out, strings.Join(args, " "), err)
	}
	return string(out)
}

// dumpOnFailure logs the Workflow or Job, its pods and their logs if t failed.
func (e *env) dumpOnFailure(t *testing.T, kind, name string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "--- %s %s:\n%s\n", kind, name, e.kubectlOut("get", kind, name, "-o", "yaml"))
		fmt.Fprintf(&b, "--- pods:\n%s\n", e.kubectlOut("get", "pods", "-o", "wide"))
		fmt.Fprintf(&b, "--- configmaps:\n%s\n", e.kubectlOut("get", "configmaps", "-o", "yaml"))
		pods, err := e.kube.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				if !strings.HasPrefix(p.Name, name) {
					continue
				}
				for _, c := range p.Spec.Containers {
					fmt.Fprintf(&b, "--- logs %s/%s:\n%s\n", p.Name, c.Name, e.kubectlOut("logs", p.Name, "-c", c.Name, "--tail", "60"))
				}
			}
		}
		t.Log(b.String())
	})
}

// configMap returns the job record, or nil if it does not exist.
func (e *env) configMap(t *testing.T, job string) *corev1.ConfigMap {
	t.Helper()
	cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(context.Background(), job+"-bridge-cm", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get configmap: %v", err)
	}
	return cm
}

// waitRunning waits until the job's record says RUNNING with an id, and returns
// the record's data.
func (e *env) waitRunning(t *testing.T, job string, timeout time.Duration) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var data map[string]string
	err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		cm := e.configMap(t, job)
		if cm == nil {
			return false, nil
		}
		data = cm.Data
		return cm.Data["id"] != "" && cm.Data["status.jobStatus"] == "RUNNING", nil
	})
	if err != nil {
		t.Fatalf("the job %s did not reach RUNNING within %s (record: %v)", job, timeout, data)
	}
	return data
}

// unstructuredWorkflow builds a Workflow of the shipped WorkflowTemplate bridge-job.
func unstructuredWorkflow(name string, params map[string]string) *unstructured.Unstructured {
	var ps []any
	for k, v := range params {
		ps = append(ps, map[string]any{"name": k, "value": v})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"workflowTemplateRef": map[string]any{"name": "bridge-job"},
			"arguments":           map[string]any{"parameters": ps},
		},
	}}
}
