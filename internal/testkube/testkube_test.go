package testkube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestAdminWritesUserIsForbidden(t *testing.T) {
	admin := Client(t)
	ns := Namespace(t, admin)

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "state"},
		Data:       map[string]string{"phase": "Running"},
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creating a ConfigMap: %v", err)
	}
	got, err := admin.CoreV1().ConfigMaps(ns).Get(ctx(t), "state", metav1.GetOptions{})
	if err != nil || got.Data["phase"] != "Running" {
		t.Fatalf("admin reading the ConfigMap back: %v, %+v", err, got)
	}

	user := ClientFor(t, UserConfig(t))
	_, err = user.CoreV1().Secrets(ns).List(ctx(t), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("user %s listing secrets: want Forbidden, got %v", UserName, err)
	}
	if !strings.Contains(err.Error(), UserName) {
		t.Errorf("Forbidden error does not name the user %q: %v", UserName, err)
	}
}

func TestServiceAccountConfig(t *testing.T) {
	admin := Client(t)
	ns := Namespace(t, admin)
	sa := ClientFor(t, ServiceAccountConfig(t, admin, ns, "runner"))

	review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx(t),
		&authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	if want := "system:serviceaccount:" + ns + ":runner"; review.Status.UserInfo.Username != want {
		t.Fatalf("authenticated as %q, want %q", review.Status.UserInfo.Username, want)
	}
	if _, err := sa.CoreV1().ConfigMaps(ns).List(ctx(t), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("ServiceAccount without a Role listing ConfigMaps: want Forbidden, got %v", err)
	}

	// Grant it ConfigMap access: the RBAC authorizer must pick that up.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "cm"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx(t), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cm"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "runner", Namespace: ns}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx(t), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = sa.CoreV1().ConfigMaps(ns).List(ctx(t), metav1.ListOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("ServiceAccount with a RoleBinding listing ConfigMaps: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Watches without a resourceVersion and informers must work promptly against
// etcd 3.4 (this is what --feature-gates=WatchList=false in kube-up.sh is for).
func TestWatchAndInformer(t *testing.T) {
	admin := Client(t)
	ns := Namespace(t, admin)
	cms := admin.CoreV1().ConfigMaps(ns)

	w, err := cms.Watch(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch without resourceVersion: %v", err)
	}
	defer w.Stop()

	f := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithNamespace(ns))
	added := make(chan string, 10)
	inf := f.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { added <- obj.(*corev1.ConfigMap).Name },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	if !cache.WaitForCacheSync(ctx(t).Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	start := time.Now()
	if _, err := cms.Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(5 * time.Second)
	for gotWatch, gotInformer := false, false; !gotWatch || !gotInformer; {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Error {
				t.Fatalf("watch error event: %v", apierrors.FromObject(ev.Object))
			}
			gotWatch = gotWatch || (ev.Type == watch.Added && ev.Object.(*corev1.ConfigMap).Name == "w")
		case name := <-added:
			gotInformer = gotInformer || name == "w"
		case <-timeout:
			t.Fatalf("no ADDED event within 5s (watch %v, informer %v)", gotWatch, gotInformer)
		}
	}
	t.Logf("watch and informer saw the ConfigMap after %v", time.Since(start))
}

// Namespace's cleanup must really remove the namespace and its objects, even
// though no namespace controller runs.
func TestNamespaceCleanup(t *testing.T) {
	admin := Client(t)
	var ns string
	t.Run("inner", func(t *testing.T) {
		ns = Namespace(t, admin)
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx(t),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "leftover"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := admin.CoreV1().Namespaces().Get(ctx(t), ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s after cleanup: want NotFound, got %v", ns, err)
	}
	all, err := admin.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx(t),
		metav1.ListOptions{FieldSelector: "metadata.namespace=" + ns})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 0 {
		t.Fatalf("%d ConfigMaps of deleted namespace %s are left in storage", len(all.Items), ns)
	}
}

// stopTest is panicked by fakeTB to end the call like runtime.Goexit would.
type stopTest struct{}

type fakeTB struct {
	testing.TB
	skipped, fatal string
}

func (f *fakeTB) Helper()          {}
func (f *fakeTB) Skip(args ...any) { f.skipped = fmt.Sprint(args...); panic(stopTest{}) }
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.fatal = fmt.Sprintf(format, a...)
	panic(stopTest{})
}

func runFake(fn func(testing.TB)) (f *fakeTB) {
	f = &fakeTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopTest); !ok {
				panic(r)
			}
		}
	}()
	fn(f)
	return f
}

// Without the env variable: skip on a developer machine, fail in CI. Needs no server.
func TestMissingEnv(t *testing.T) {
	t.Setenv(EnvKubeconfig, "")
	t.Setenv(EnvKubeconfigUser, "")

	t.Setenv("CI", "")
	f := runFake(func(tb testing.TB) { Config(tb) })
	if f.skipped == "" || f.fatal != "" || !strings.Contains(f.skipped, "hack/kube-up.sh") {
		t.Errorf("without CI: want a skip naming hack/kube-up.sh, got skip %q, fatal %q", f.skipped, f.fatal)
	}

	t.Setenv("CI", "true")
	f = runFake(func(tb testing.TB) { UserConfig(tb) })
	if f.fatal == "" || f.skipped != "" || !strings.Contains(f.fatal, "hack/kube-up.sh") {
		t.Errorf("with CI=true: want a failure naming hack/kube-up.sh, got skip %q, fatal %q", f.skipped, f.fatal)
	}
}
