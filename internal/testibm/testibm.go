// Package testibm runs bridge-runner the way IBM's Bridge Operator runs its
// pod images, for the tests that prove bridge-runner a drop-in: the record
// is a ConfigMap shaped like IBM's, applied to the real kube-apiserver
// (internal/testkube), and invoke runs with IBM's pod contract: no
// arguments, JOBNAME and NAMESPACE in the environment, the credentials
// Secret mounted as a directory with IBM's key names. The assertions are
// what IBM's operator reads of the record.
package testibm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// OperatorTimeLayout is how IBM's operator parses status.submitTime and
// status.endTime.
const OperatorTimeLayout = "2006-01-02T15:04:05Z"

// OperatorOwner is the controller reference IBM's operator puts on the
// ConfigMap it creates for the BridgeJob named job.
func OperatorOwner(job string) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: "bridgejob.ibm.com/v1alpha1", Kind: "BridgeJob", Name: job,
		UID: types.UID("00000000-0000-4000-8000-" + strings.Repeat("0", 12)), Controller: &yes, BlockOwnerDeletion: &yes}
}

// Pod is one invoke run as IBM's pod would be run.
type Pod struct {
	Client    kubernetes.Interface
	Namespace string
	ConfigMap string

	cmd  *exec.Cmd
	out  *testutil.SyncBuffer
	done chan struct{}
	code int
}

// Start applies cm in a new namespace and starts `binary invoke` with
// JOBNAME=job, NAMESPACE and a kubeconfig (in a pod: the service account),
// plus env (e.g. BRIDGE_CREDENTIALS_DIR, where the Secret is mounted).
func Start(t *testing.T, binary string, cm *corev1.ConfigMap, job string, env ...string) *Pod {
	t.Helper()
	c := testkube.Client(t)
	ns := testkube.Namespace(t, c)
	cm = cm.DeepCopy()
	cm.Namespace = ns
	if _, err := c.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("applying the IBM-shaped ConfigMap: %v", err)
	}
	p := &Pod{Client: c, Namespace: ns, ConfigMap: cm.Name, out: &testutil.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binary, "invoke")
	p.cmd.Env = append(cleanEnv(), "JOBNAME="+job, "NAMESPACE="+ns, "KUBECONFIG="+kubeconfig(t),
		"XDG_STATE_HOME="+t.TempDir())
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Wait waits for invoke to exit and returns its exit code and output.
func (p *Pod) Wait(t *testing.T, timeout time.Duration) (int, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("invoke did not end within %s:\n%s", timeout, p.out.String())
	}
	return p.code, p.out.String()
}

// Output is invoke's stderr and stdout so far.
func (p *Pod) Output() string { return p.out.String() }

// Data returns the ConfigMap's data now.
func (p *Pod) Data(t *testing.T) map[string]string {
	t.Helper()
	cm, err := p.Client.CoreV1().ConfigMaps(p.Namespace).Get(context.Background(), p.ConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data
}

// AssertOperatorReads checks the record as IBM's operator reads it: the
// final status.jobStatus word it looks for, status.submitTime and
// status.endTime in its time layout, and a status.message.
func AssertOperatorReads(t *testing.T, d map[string]string, status string) {
	t.Helper()
	if d["status.jobStatus"] != status {
		t.Errorf("status.jobStatus = %q, IBM's operator looks for %q", d["status.jobStatus"], status)
	}
	for _, k := range []string{"status.submitTime", "status.endTime"} {
		if _, err := time.Parse(OperatorTimeLayout, d[k]); err != nil {
			t.Errorf("%s = %q: IBM's operator cannot parse it: %v", k, d[k], err)
		}
	}
	if d["status.message"] == "" {
		t.Errorf("status.message is empty")
	}
}

// CredentialsDir writes a mounted Secret: one file per key.
func CredentialsDir(t *testing.T, kv map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range kv {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cleanEnv is this process's environment without bridge-runner's settings.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "BRIDGE_") && !strings.HasPrefix(name, "BRIDGE_TEST_"),
			name == "JOBNAME", name == "NAMESPACE", name == "KUBECONFIG", strings.HasPrefix(name, "ARGO_"):
			continue
		}
		out = append(out, kv)
	}
	return out
}

// kubeconfig writes the test API server's admin configuration as a file.
func kubeconfig(t *testing.T) string {
	cfg := testkube.Config(t)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}
