package runner

import (
	"context"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// KubeClient reaches the Kubernetes API for exactly what bridge-runner
// does there: ConfigMaps (the record), and, to tell a disruption of the pod
// from a stop of the step, one Pod, Job or Argo Workflow. It is client-go's
// REST client with a scheme of those few kinds: the generated clientset
// would link every API group, which was most of the binary and of its
// memory. Errors are client-go's (apierrors), requests are counted at the
// transport.
type KubeClient struct {
	rest     *rest.RESTClient
	requests func() int64
}

var (
	coreV1     = schema.GroupVersion{Version: "v1"}
	batchV1    = schema.GroupVersion{Group: "batch", Version: "v1"}
	argoV1     = schema.GroupVersion{Group: "argoproj.io", Version: "v1alpha1"}
	kubeScheme = newKubeScheme()
)

func newKubeScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Status (errors, watch errors), WatchEvent and the list options.
	metav1.AddToGroupVersion(s, coreV1)
	s.AddKnownTypeWithName(coreV1.WithKind("ConfigMap"), &configMap{})
	s.AddKnownTypeWithName(coreV1.WithKind("Pod"), &pod{})
	s.AddKnownTypeWithName(batchV1.WithKind("Job"), &job{})
	s.AddKnownTypeWithName(argoV1.WithKind("Workflow"), &workflow{})
	return s
}

// NewKubeClient returns a client for cfg (which it does not change).
func NewKubeClient(cfg *rest.Config) (*KubeClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(kubeScheme).WithoutConversion()
	var counted http.RoundTripper
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		counted = CountRequests(rt)
		return counted
	})
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &KubeClient{rest: rc, requests: RequestCounter(counted)}, nil
}

// Requests reports how many requests the client has sent.
func (c *KubeClient) Requests() int64 { return c.requests() }

// nsPath is the path of a namespaced resource in gv: /api/v1/namespaces/ns/configmaps.
func nsPath(gv schema.GroupVersion, ns, resource string) string {
	if gv.Group == "" {
		return "/api/" + gv.Version + "/namespaces/" + ns + "/" + resource
	}
	return "/apis/" + gv.Group + "/" + gv.Version + "/namespaces/" + ns + "/" + resource
}

func (c *KubeClient) get(ctx context.Context, path, name string, into runtime.Object) error {
	return c.rest.Get().AbsPath(path, name).Do(ctx).Into(into)
}

func (c *KubeClient) getConfigMap(ctx context.Context, ns, name string) (*configMap, error) {
	cm := &configMap{}
	return cm, c.get(ctx, nsPath(coreV1, ns, "configmaps"), name, cm)
}

func (c *KubeClient) createConfigMap(ctx context.Context, cm *configMap) (*configMap, error) {
	cm.setKind()
	out := &configMap{}
	return out, c.rest.Post().AbsPath(nsPath(coreV1, cm.Namespace, "configmaps")).Body(cm).Do(ctx).Into(out)
}

func (c *KubeClient) updateConfigMap(ctx context.Context, cm *configMap) (*configMap, error) {
	cm.setKind()
	out := &configMap{}
	return out, c.rest.Put().AbsPath(nsPath(coreV1, cm.Namespace, "configmaps"), cm.Name).Body(cm).Do(ctx).Into(out)
}

func (c *KubeClient) deleteConfigMap(ctx context.Context, ns, name string) error {
	return c.rest.Delete().AbsPath(nsPath(coreV1, ns, "configmaps"), name).Do(ctx).Error()
}

// watchConfigMap watches the one ConfigMap name from version rv on.
func (c *KubeClient) watchConfigMap(ctx context.Context, ns, name, rv string) (watch.Interface, error) {
	opts := &metav1.ListOptions{
		FieldSelector:       fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion:     rv,
		AllowWatchBookmarks: true,
		Watch:               true,
	}
	return c.rest.Get().AbsPath(nsPath(coreV1, ns, "configmaps")).
		VersionedParams(opts, metav1.ParameterCodec).Watch(ctx)
}

func (c *KubeClient) getPod(ctx context.Context, ns, name string) (*pod, error) {
	p := &pod{}
	return p, c.get(ctx, nsPath(coreV1, ns, "pods"), name, p)
}

func (c *KubeClient) getJob(ctx context.Context, ns, name string) (*job, error) {
	j := &job{}
	return j, c.get(ctx, nsPath(batchV1, ns, "jobs"), name, j)
}

func (c *KubeClient) getWorkflow(ctx context.Context, ns, name string) (*workflow, error) {
	w := &workflow{}
	return w, c.get(ctx, nsPath(argoV1, ns, "workflows"), name, w)
}
