package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// GroupVersion of the BridgeJob resource (IBM's).
var GroupVersion = schema.GroupVersion{Group: "bridgejob.ibm.com", Version: "v1alpha1"}

var (
	coreV1  = schema.GroupVersion{Version: "v1"}
	batchV1 = schema.GroupVersion{Group: "batch", Version: "v1"}
	coordV1 = schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}
	rbacV1  = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	scheme  = newScheme()
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, coreV1) // Status, WatchEvent, list options
	s.AddKnownTypeWithName(GroupVersion.WithKind("BridgeJob"), &BridgeJob{})
	s.AddKnownTypeWithName(GroupVersion.WithKind("BridgeJobList"), &BridgeJobList{})
	s.AddKnownTypeWithName(coreV1.WithKind("ConfigMap"), &configMap{})
	s.AddKnownTypeWithName(coreV1.WithKind("ConfigMapList"), &configMapList{})
	s.AddKnownTypeWithName(coreV1.WithKind("Event"), &event{})
	s.AddKnownTypeWithName(batchV1.WithKind("Job"), &job{})
	s.AddKnownTypeWithName(batchV1.WithKind("JobList"), &jobList{})
	s.AddKnownTypeWithName(coordV1.WithKind("Lease"), &lease{})
	s.AddKnownTypeWithName(coreV1.WithKind("ServiceAccount"), &serviceAccount{})
	s.AddKnownTypeWithName(rbacV1.WithKind("Role"), &role{})
	s.AddKnownTypeWithName(rbacV1.WithKind("RoleBinding"), &roleBinding{})
	return s
}

// client is client-go's REST client over the operator's few kinds.
type client struct {
	rest     *rest.RESTClient
	requests atomic.Int64
	// answered, when set (before the first request), sees every answer.
	answered func(*http.Request, *http.Response, error)
}

func newClient(cfg *rest.Config) (*client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	c := &client{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.requests.Add(1)
			resp, err := rt.RoundTrip(r)
			if c.answered != nil {
				c.answered(r, resp, err)
			}
			return resp, err
		})
	})
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c.rest = rc
	return c, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// path is the collection path of resource in gv, in namespace ns ("" for
// all namespaces).
func path(gv schema.GroupVersion, ns, resource string) string {
	p := "/apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		p = "/api/" + gv.Version
	}
	if ns != "" {
		p += "/namespaces/" + ns
	}
	return p + "/" + resource
}

// listWatch lists and watches resource in gv (in ns, or everywhere), with
// an optional label selector, for an informer.
func (c *client) listWatch(gv schema.GroupVersion, ns, resource, selector string, list func() runtime.Object) *cache.ListWatch {
	p := path(gv, ns, resource)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			out := list()
			return out, c.rest.Get().AbsPath(p).VersionedParams(&o, metav1.ParameterCodec).Do(ctx).Into(out)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector, o.Watch = selector, true
			return c.rest.Get().AbsPath(p).VersionedParams(&o, metav1.ParameterCodec).Watch(ctx)
		},
	}
}

func (c *client) create(ctx context.Context, gv schema.GroupVersion, ns, resource string, in, out runtime.Object) error {
	return c.rest.Post().AbsPath(path(gv, ns, resource)).Body(in).Do(ctx).Into(out)
}

func (c *client) update(ctx context.Context, gv schema.GroupVersion, ns, resource, name string, in, out runtime.Object, sub ...string) error {
	return c.rest.Put().AbsPath(append([]string{path(gv, ns, resource), name}, sub...)...).Body(in).Do(ctx).Into(out)
}

func (c *client) get(ctx context.Context, gv schema.GroupVersion, ns, resource, name string, out runtime.Object) error {
	return c.rest.Get().AbsPath(path(gv, ns, resource), name).Do(ctx).Into(out)
}

// delete removes an object and lets the garbage collector remove its
// dependents (the Job's pods) in the background.
func (c *client) delete(ctx context.Context, gv schema.GroupVersion, ns, resource, name string, uid types.UID) error {
	bg := metav1.DeletePropagationBackground
	opts := &metav1.DeleteOptions{PropagationPolicy: &bg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return c.rest.Delete().AbsPath(path(gv, ns, resource), name).Body(opts).Do(ctx).Error()
}

// secretLabels reads a Secret's labels by its metadata only: the server
// leaves out its data, so the operator never holds a credential.
func (c *client) secretLabels(ctx context.Context, ns, name string) (map[string]string, error) {
	raw, err := c.rest.Get().AbsPath(path(coreV1, ns, "secrets"), name).
		SetHeader("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1").
		Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var m metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("reading the Secret %s/%s's metadata: %w", ns, name, err)
	}
	return m.Labels, nil
}
