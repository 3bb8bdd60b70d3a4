package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/bridge-runner/bridge-runner/internal/testkube"
)

// installShippedRBAC applies workflows/rbac (the files users apply) into ns.
func installShippedRBAC(t *testing.T, c kubernetes.Interface, ns string) {
	ctx := context.Background()
	dir := filepath.Join("..", "..", "workflows", "rbac")
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	var sa corev1.ServiceAccount
	for file, obj := range map[string]any{"role.yaml": &role, "role-binding.yaml": &binding, "service-account.yaml": &sa} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		require.NoError(t, yaml.UnmarshalStrict(b, obj), file)
	}
	_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{})
	require.NoError(t, err)
}

// writeKubeconfig writes cfg (token auth) as a kubeconfig file.
func writeKubeconfig(t *testing.T, cfg *rest.Config, ns string) string {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test", Namespace: ns}
	kc.CurrentContext = "test"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, p))
	return p
}

func runBinary(t *testing.T, args ...string) (int, string) {
	cmd := exec.Command(binary, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return exitOf(cmd.Run()), out.String()
}

// TestShippedRoleIsEnoughAndNoMore runs all three steps with a
// ServiceAccount token bound to the shipped Role, and checks that the same
// identity cannot read Secrets.
func TestShippedRoleIsEnoughAndNoMore(t *testing.T) {
	clearEnv(t)
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	installShippedRBAC(t, admin, ns)
	saCfg := testkube.ServiceAccountConfig(t, admin, ns, "bridge-runner")
	kubeconfig := writeKubeconfig(t, saCfg, ns)
	common := []string{"--kubeconfig", kubeconfig, "--job-name", "rbac"}

	code, out := runBinary(t, append([]string{"create-configmap", "--backend", "local", "--script", "echo via-configmap"}, common...)...)
	require.Equal(t, 0, code, out)
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "rbac-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err, "the record is a real ConfigMap in the kubeconfig's namespace")
	assert.Equal(t, "echo via-configmap", cm.Data["jobdata.jobScript"])

	// The local backend keeps its job records under XDG_STATE_HOME (set by clearEnv).
	code, out = runBinary(t, append([]string{"invoke"}, common...)...)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "via-configmap")
	cm, err = admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "rbac-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "DONE", cm.Data["status.jobStatus"])
	assert.NotEmpty(t, cm.Data["id"])

	code, out = runBinary(t, append([]string{"cleanup"}, common...)...)
	require.Equal(t, 0, code, out)
	_, err = admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "rbac-bridge-cm", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "cleanup deleted the ConfigMap")

	sa := testkube.ClientFor(t, saCfg)
	_, err = admin.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "slurm-creds"}, StringData: map[string]string{"password": "x"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = sa.CoreV1().Secrets(ns).Get(context.Background(), "slurm-creds", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "reading a Secret must be refused, got %v", err)
	_, err = sa.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "listing Secrets must be refused, got %v", err)
	_, err = sa.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the Role is namespaced, got %v", err)

	// After SIGTERM invoke reads its pod and the pod's owner (runner.Disruption):
	// exactly get on pods, Workflows and Jobs, nothing that changes them.
	for _, check := range []struct {
		group, resource, verb string
		allowed               bool
	}{
		{"", "pods", "get", true}, {"argoproj.io", "workflows", "get", true}, {"batch", "jobs", "get", true},
		{"", "pods", "list", false}, {"", "pods", "delete", false}, {"", "pods", "create", false},
		{"argoproj.io", "workflows", "patch", false}, {"batch", "jobs", "update", false},
	} {
		review, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Group: check.group, Resource: check.resource, Verb: check.verb}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, check.allowed, review.Status.Allowed, "%s %s.%s", check.verb, check.resource, check.group)
	}
}

// TestKillPatchOnConfigMap: `kubectl patch cm x --type merge -p
// '{"data":{"kill":"true"}}'` ends a running invoke with exit 3.
func TestKillPatchOnConfigMap(t *testing.T) {
	clearEnv(t)
	admin := testkube.Client(t)
	ns := testkube.Namespace(t, admin)
	kubeconfig := writeKubeconfig(t, testkube.Config(t), ns)
	if testkube.Config(t).BearerToken == "" {
		t.Fatal("the test kubeconfig must use token auth")
	}
	cmd, out := startInvoke(t, nil, "--kubeconfig", kubeconfig, "--job-name", "patch", "--backend", "local", "--script", "exec sleep 60")
	require.Eventually(t, func() bool {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "patch-bridge-cm", metav1.GetOptions{})
		return err == nil && cm.Data["status.jobStatus"] == "RUNNING"
	}, time.Minute, 50*time.Millisecond, "job running: %s", out)
	start := time.Now()
	_, err := admin.CoreV1().ConfigMaps(ns).Patch(context.Background(), "patch-bridge-cm", types.MergePatchType,
		[]byte(`{"data":{"kill":"true"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	code := exitOf(cmd.Wait())
	took := time.Since(start)
	t.Logf("kill=true patched into the ConfigMap to invoke's exit: %s", took)
	assert.Equal(t, ExitKilled, code, out.String())
	assert.Less(t, took, 2*time.Second)
	cm, err := admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "patch-bridge-cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "KILLED", cm.Data["status.jobStatus"])
}
