// Package kube is bridge-runner's one Kubernetes client, which the record's
// ConfigMap store, invoke (to tell a disruption of its pod from a stop of
// the step) and the operator share: client-go's REST client with a scheme
// of the few kinds they use. The generated clientset would link every API
// group, which was most of the binary and of its memory. Errors are
// client-go's (apierrors); requests are counted at the transport.
package kube

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// Group versions of the kinds the client knows.
var (
	CoreV1  = schema.GroupVersion{Version: "v1"}
	BatchV1 = schema.GroupVersion{Group: "batch", Version: "v1"}
	CoordV1 = schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}
	RBACV1  = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	ArgoV1  = schema.GroupVersion{Group: "argoproj.io", Version: "v1alpha1"}
)

// Resource is a resource type: its group version and plural name, as its
// REST path says it.
type Resource struct {
	GV     schema.GroupVersion
	Plural string
}

// The resources bridge-runner and its operator use, named once.
var (
	ConfigMaps      = Resource{CoreV1, "configmaps"}
	Pods            = Resource{CoreV1, "pods"}
	Secrets         = Resource{CoreV1, "secrets"}
	Events          = Resource{CoreV1, "events"}
	ServiceAccounts = Resource{CoreV1, "serviceaccounts"}
	Jobs            = Resource{BatchV1, "jobs"}
	Leases          = Resource{CoordV1, "leases"}
	Roles           = Resource{RBACV1, "roles"}
	RoleBindings    = Resource{RBACV1, "rolebindings"}
	Workflows       = Resource{ArgoV1, "workflows"}
)

// Path is the collection path of r in namespace ns ("" for all namespaces).
func (r Resource) Path(ns string) string {
	p := "/apis/" + r.GV.Group + "/" + r.GV.Version
	if r.GV.Group == "" {
		p = "/api/" + r.GV.Version
	}
	if ns != "" {
		p += "/namespaces/" + ns
	}
	return p + "/" + r.Plural
}

// Kinds registers kinds of another package (the operator's BridgeJob) in
// a client's scheme.
type Kinds func(*runtime.Scheme)

func newScheme(extra []Kinds) *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, CoreV1) // Status, WatchEvent, list options
	for kind, obj := range map[schema.GroupVersionKind]runtime.Object{
		CoreV1.WithKind("ConfigMap"):      &ConfigMap{},
		CoreV1.WithKind("ConfigMapList"):  &ConfigMapList{},
		CoreV1.WithKind("Pod"):            &Pod{},
		CoreV1.WithKind("Event"):          &Event{},
		CoreV1.WithKind("ServiceAccount"): &ServiceAccount{},
		BatchV1.WithKind("Job"):           &Job{},
		BatchV1.WithKind("JobList"):       &JobList{},
		CoordV1.WithKind("Lease"):         &Lease{},
		RBACV1.WithKind("Role"):           &Role{},
		RBACV1.WithKind("RoleBinding"):    &RoleBinding{},
		ArgoV1.WithKind("Workflow"):       &Workflow{},
	} {
		s.AddKnownTypeWithName(kind, obj)
	}
	for _, k := range extra {
		k(s)
	}
	return s
}

// Client reaches the Kubernetes API for the kinds of its scheme.
type Client struct {
	rest     *rest.RESTClient
	scheme   *runtime.Scheme
	requests atomic.Int64
	// byVerb counts the requests by verbs (see verbOf), for the figures
	// that say where a run's Kubernetes requests went.
	byVerb [len(verbs)]atomic.Int64
	// answered, when set (before the first request), sees every answer.
	answered func(*http.Request, *http.Response, error)
}

// OnAnswer has f see every answer (the operator's metrics count them by
// class). Call it before the first request.
func (c *Client) OnAnswer(f func(*http.Request, *http.Response, error)) { c.answered = f }

// New returns a client for cfg (which it does not change), knowing the
// built-in kinds and extra ones.
func New(cfg *rest.Config, extra ...Kinds) (*Client, error) {
	c := &Client{scheme: newScheme(extra)}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(c.scheme).WithoutConversion()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.requests.Add(1)
			c.byVerb[verbOf(r)].Add(1)
			resp, err := rt.RoundTrip(r)
			if c.answered != nil {
				c.answered(r, resp, err)
			}
			return resp, err
		})
	})
	hc, err := httpClient(cfg)
	if err != nil {
		return nil, err
	}
	rc, err := rest.UnversionedRESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	c.rest = rc
	return c, nil
}

// httpClient builds cfg's HTTP client with httpx's constructor rather than
// client-go's (rest.HTTPClientFor), which follows a redirect to any origin
// and whose bearer-token round tripper adds Authorization on every hop:
// client-go's TLS settings (CA, client certificates, exec plugins) and its
// authentication wrappers over httpx's transport, with httpx's redirect
// policy (same origin only).
func httpClient(cfg *rest.Config) (*http.Client, error) {
	rt := cfg.Transport // a caller's own transport (client-go allows no TLS settings beside it)
	if rt == nil {
		tlsConf, err := rest.TLSConfigFor(cfg)
		if err != nil {
			return nil, err
		}
		tr := httpx.NewKubernetesTransport(httpx.Options{TLS: tlsConf, Proxy: cfg.Proxy, Dial: cfg.Dial})
		tr.DisableCompression = cfg.DisableCompression
		// As client-go finishes its own: NO_PROXY with CIDRs, and HTTP/2
		// with health pings, so that a dead connection under a watch is
		// noticed.
		rt = utilnet.SetTransportDefaults(tr)
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, rt)
	if err != nil {
		return nil, err
	}
	return httpx.NewClient(rt, cfg.Timeout), nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Requests reports how many requests the client has sent.
func (c *Client) Requests() int64 {
	if c == nil {
		return 0
	}
	return c.requests.Load()
}

// verbs are the kinds of request RequestsByVerb tells apart.
var verbs = [...]string{"get", "watch", "create", "update", "delete", "patch", "other"}

func verbOf(r *http.Request) int {
	switch r.Method {
	case http.MethodGet:
		if r.URL.Query().Get("watch") == "true" {
			return 1
		}
		return 0
	case http.MethodPost:
		return 2
	case http.MethodPut:
		return 3
	case http.MethodDelete:
		return 4
	case http.MethodPatch:
		return 5
	}
	return 6
}

// RequestsByVerb says how many of the client's requests were reads (get,
// list), watches, creates, updates, deletes and patches, as "get=3 watch=1 ...",
// leaving out the verbs it did not send.
func (c *Client) RequestsByVerb() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	for i, v := range verbs {
		if n := c.byVerb[i].Load(); n > 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s=%d", v, n)
		}
	}
	return b.String()
}

// withKind sets obj's apiVersion and kind from the scheme when it has none:
// the server wants them in a body.
func (c *Client) withKind(obj runtime.Object) runtime.Object {
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		if gvks, _, err := c.scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		}
	}
	return obj
}

// Get reads the object name of r in ns into out.
func (c *Client) Get(ctx context.Context, r Resource, ns, name string, out runtime.Object) error {
	return c.rest.Get().AbsPath(r.Path(ns), name).Do(ctx).Into(out)
}

// Create creates in (of r, in ns) and reads what the server made into out.
func (c *Client) Create(ctx context.Context, r Resource, ns string, in, out runtime.Object) error {
	return c.rest.Post().AbsPath(r.Path(ns)).Body(c.withKind(in)).Do(ctx).Into(out)
}

// Update replaces the object name (or its subresource sub, e.g. status)
// with in; the server refuses it when in's resourceVersion is stale.
func (c *Client) Update(ctx context.Context, r Resource, ns, name string, in, out runtime.Object, sub ...string) error {
	return c.rest.Put().AbsPath(append([]string{r.Path(ns), name}, sub...)...).Body(c.withKind(in)).Do(ctx).Into(out)
}

// MergePatch applies a JSON merge patch to the object name of r: only the
// fields it names change (a resourceVersion in its metadata makes the
// server refuse it when the object has changed since).
func (c *Client) MergePatch(ctx context.Context, r Resource, ns, name string, patch []byte, out runtime.Object) error {
	return c.rest.Patch(types.MergePatchType).AbsPath(r.Path(ns), name).Body(patch).Do(ctx).Into(out)
}

// Delete removes an object (only the one with uid, when uid is given) and
// lets the garbage collector remove its dependents (a Job's pods) in the
// background.
func (c *Client) Delete(ctx context.Context, r Resource, ns, name string, uid types.UID) error {
	bg := metav1.DeletePropagationBackground
	opts := &metav1.DeleteOptions{PropagationPolicy: &bg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	return c.rest.Delete().AbsPath(r.Path(ns), name).Body(opts).Do(ctx).Error()
}

// DeleteUnchanged removes an object only while it is still at
// resourceVersion rv, as read: a write since (a lease taken meanwhile)
// makes it a conflict and keeps the object.
func (c *Client) DeleteUnchanged(ctx context.Context, r Resource, ns, name, rv string) error {
	opts := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}
	return c.rest.Delete().AbsPath(r.Path(ns), name).Body(opts).Do(ctx).Error()
}

// WatchOne watches the one object name of r from version rv on.
func (c *Client) WatchOne(ctx context.Context, r Resource, ns, name, rv string) (watch.Interface, error) {
	opts := &metav1.ListOptions{
		FieldSelector:       fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion:     rv,
		AllowWatchBookmarks: true,
		Watch:               true,
	}
	return c.rest.Get().AbsPath(r.Path(ns)).VersionedParams(opts, metav1.ParameterCodec).Watch(ctx)
}

// List lists r in ns ("" for all namespaces) as opts say into out.
func (c *Client) List(ctx context.Context, r Resource, ns string, opts *metav1.ListOptions, out runtime.Object) error {
	return c.rest.Get().AbsPath(r.Path(ns)).VersionedParams(opts, metav1.ParameterCodec).Do(ctx).Into(out)
}

// Watch watches r in ns ("" for all namespaces) as opts say (Watch true).
func (c *Client) Watch(ctx context.Context, r Resource, ns string, opts *metav1.ListOptions) (watch.Interface, error) {
	return c.rest.Get().AbsPath(r.Path(ns)).VersionedParams(opts, metav1.ParameterCodec).Watch(ctx)
}

// ListWatch lists and watches r (in ns, or everywhere), with an optional
// label selector, for an informer.
func (c *Client) ListWatch(r Resource, ns, selector string, list func() runtime.Object) *cache.ListWatch {
	p := r.Path(ns)
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

// REST is the underlying REST client, for requests the methods above do not
// make (tests that probe what an identity may do).
func (c *Client) REST() rest.Interface { return c.rest }
