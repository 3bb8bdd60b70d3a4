// Package testkube connects tests to the real kube-apiserver (+ etcd) that
// hack/kube-up.sh runs on 127.0.0.1.
//
// Run once per machine (or per CI job):
//
//	bash hack/kube-up.sh && source /tmp/bridge-runner-kube/env
//
// which exports BRIDGE_TEST_KUBECONFIG (an admin in group system:masters) and
// BRIDGE_TEST_KUBECONFIG_USER (user "bridge-tester" without any RBAC grant).
// When a variable is missing, tests that need the server are skipped on a
// developer machine but FAIL when CI is set: CI must never silently skip them.
//
// The server has no controller-manager, so there is no default ServiceAccount,
// no namespace controller and no garbage collector; Namespace and
// ServiceAccountConfig make up for what the tests need.
package testkube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// EnvKubeconfig names the admin kubeconfig written by hack/kube-up.sh.
	EnvKubeconfig = "BRIDGE_TEST_KUBECONFIG"
	// EnvKubeconfigUser names the kubeconfig of the unprivileged user "bridge-tester".
	EnvKubeconfigUser = "BRIDGE_TEST_KUBECONFIG_USER"

	// UserName is the user that UserConfig authenticates as.
	UserName = "bridge-tester"

	// NamespaceLabel marks every namespace made by Namespace, to find leftovers.
	NamespaceLabel = "bridge-runner.test/owned"

	hint = "start the test apiserver with `bash hack/kube-up.sh` and `source /tmp/bridge-runner-kube/env` " +
		"(or the env file it prints)"
)

// Config returns the admin (system:masters) rest.Config of the test apiserver.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	return load(t, EnvKubeconfig)
}

// UserConfig returns a rest.Config that authenticates as the user "bridge-tester",
// which is only in group system:authenticated and has no RBAC grant: use it to
// check that something is Forbidden, or grant it a Role first.
func UserConfig(t testing.TB) *rest.Config {
	t.Helper()
	return load(t, EnvKubeconfigUser)
}

// Client returns an admin clientset for the test apiserver.
func Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	return ClientFor(t, Config(t))
}

// ClientFor returns a clientset for cfg, failing the test on error.
func ClientFor(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("testkube: building a clientset for %s: %v", cfg.Host, err)
	}
	return c
}

// reachable caches, per kubeconfig path, the result of a one-time probe of the
// server so that a stale env file (server stopped) gives one clear message
// instead of connection errors deep inside each test.
var (
	probeMu  sync.Mutex
	probeErr = map[string]error{} // kubeconfig path -> result of the probe
)

func load(t testing.TB, envVar string) *rest.Config {
	t.Helper()
	path := os.Getenv(envVar)
	if path == "" {
		msg := fmt.Sprintf("testkube: %s is not set: this test needs a real kube-apiserver; %s", envVar, hint)
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (failing instead of skipping because CI is set)", msg)
		}
		t.Skip(msg)
	}
	// From here on the variable is set, so anything wrong is a real failure.
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("testkube: loading %s=%s: %v; %s", envVar, path, err, hint)
	}
	// The defaults (QPS 5, burst 10) throttle busy tests for no benefit here.
	cfg.QPS, cfg.Burst = 200, 400
	cfg.UserAgent = "bridge-runner-testkube"

	probeMu.Lock()
	err, done := probeErr[path]
	if !done {
		err = probe(cfg)
		probeErr[path] = err
	}
	probeMu.Unlock()
	if err != nil {
		t.Fatalf("testkube: the apiserver of %s=%s is not reachable: %v; is it still running? %s",
			envVar, path, err, hint)
	}
	return cfg
}

func probe(cfg *rest.Config) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = 10 * time.Second
	d, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return err
	}
	_, err = d.ServerVersion()
	return err
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace named after the test with a random suffix
// and removes it, with everything in it, in t.Cleanup.
//
// Without a namespace controller a deleted namespace would stay Terminating
// forever and its objects would linger in etcd, so the cleanup deletes every
// namespaced resource collection itself and then finalizes the namespace.
func Namespace(t testing.TB, c kubernetes.Interface) string {
	t.Helper()
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "bt-" + base + "-",
		Labels:       map[string]string{NamespaceLabel: "true"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testkube: creating a namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := DeleteNamespace(ctx, c, name); err != nil {
			t.Errorf("testkube: deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// DeleteNamespace deletes every namespaced object of name (each resource type
// that supports deletecollection), then the namespace itself, and removes its
// "kubernetes" finalizer, which only kube-controller-manager would otherwise
// do. Objects that carry finalizers of their own are left to those finalizers.
// A namespace that does not exist is not an error.
func DeleteNamespace(ctx context.Context, c kubernetes.Interface, name string) error {
	if _, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if err := purgeNamespace(ctx, c, name); err != nil {
		return err
	}
	err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	ns, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if len(ns.Spec.Finalizers) > 0 {
		ns.Spec.Finalizers = nil
		_, err = c.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("finalizing: %w", err)
		}
	}
	return nil
}

// purgeNamespace issues DELETE on every namespaced collection the server offers
// (what the namespace controller would do), through the discovery REST client
// so that it needs nothing beyond a kubernetes.Interface.
func purgeNamespace(ctx context.Context, c kubernetes.Interface, ns string) error {
	d := c.Discovery()
	rc := d.RESTClient()
	if rc == nil { // e.g. a fake clientset: nothing to purge
		return nil
	}
	lists, err := d.ServerPreferredNamespacedResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("discovering namespaced resources: %w", err)
	}
	zero := int64(0)
	background := metav1.DeletePropagationBackground // everything goes anyway; avoids a warning for Jobs
	body, _ := json.Marshal(metav1.DeleteOptions{
		TypeMeta:           metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"},
		GracePeriodSeconds: &zero, // nothing runs pods here; do not wait for a kubelet
		PropagationPolicy:  &background,
	})
	var errs []string
	for _, l := range lists {
		prefix := "/apis/" + l.GroupVersion
		if l.GroupVersion == "v1" {
			prefix = "/api/v1"
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerb(r.Verbs, "deletecollection") {
				continue
			}
			err := rc.Delete().AbsPath(prefix, "namespaces", ns, r.Name).
				SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
				errs = append(errs, fmt.Sprintf("%s %s: %v", l.GroupVersion, r.Name, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("deleting the contents: %s", strings.Join(errs, "; "))
	}
	return nil
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

// ServiceAccountConfig creates the ServiceAccount saName in namespace (if it is
// missing) and returns a rest.Config for the same server and CA as Config that
// authenticates as it ("system:serviceaccount:<namespace>:<saName>") with a
// token from the TokenRequest API, valid for one hour. The ServiceAccount has
// no permissions until the test binds a Role to it.
func ServiceAccountConfig(t testing.TB, c kubernetes.Interface, namespace, saName string) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sas := c.CoreV1().ServiceAccounts(namespace)
	_, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: saName}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("testkube: creating ServiceAccount %s/%s: %v", namespace, saName, err)
	}
	expiry := int64(3600)
	tr, err := sas.CreateToken(ctx, saName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testkube: requesting a token for ServiceAccount %s/%s: %v", namespace, saName, err)
	}
	// AnonymousClientConfig keeps host and TLS trust but drops the admin's credentials.
	cfg := rest.AnonymousClientConfig(Config(t))
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// ServiceAccountWithRules makes a Role of rules, binds it to the
// ServiceAccount name in namespace (all three named name) and returns a
// rest.Config that authenticates as that ServiceAccount (see
// ServiceAccountConfig).
func ServiceAccountWithRules(t testing.TB, c kubernetes.Interface, namespace, name string, rules ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testkube: creating Role %s/%s: %v", namespace, name, err)
	}
	_, err := c.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testkube: binding Role %s/%s: %v", namespace, name, err)
	}
	return ServiceAccountConfig(t, c, namespace, name)
}
