package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/kube"
	"github.com/bridge-runner/bridge-runner/record"
)

// The tenancy model. Whoever may create a BridgeJob gets a pod the operator
// makes for them, so the operator, not the author, decides what that pod
// is: the operator's own image (or one its admin allows), Secrets of the
// BridgeJob's namespace that opted in (or that the admin lists), no local
// backend unless the admin allows it, and a ServiceAccount of the
// BridgeJob's own that reaches its record and nothing else. A BridgeJob
// names objects only inside its own namespace: every name is checked as a
// Kubernetes name before it is used.

// SecretOptInLabel is the label (value "true") by which a Secret's owner
// lets BridgeJobs of its namespace mount it.
const SecretOptInLabel = "bridge-runner.io/allow-bridgejobs"

// jobImage is the image the BridgeJob's pods run, and the image it named
// that is ignored ("" when none is): spec.image is IBM's field, which named
// one of IBM's per-system images; ours runs every system, so an image
// counts only when the operator's admin allowed it.
func (r *reconciler) jobImage(bj *BridgeJob) (image, ignored string) {
	want := strings.TrimSpace(bj.Spec.Image)
	if want == "" || want == r.o.JobImage {
		return r.o.JobImage, ""
	}
	if imageAllowed(want, r.o.AllowedImages) {
		return want, ""
	}
	return r.o.JobImage, want
}

// imageAllowed: an exact entry, or an entry ending in * as a prefix
// (registry.example.org/bridge-runner:*).
func imageAllowed(image string, allowed []string) bool {
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		if p, ok := strings.CutSuffix(a, "*"); ok && p != "" && strings.HasPrefix(image, p) {
			return true
		}
		if a == image {
			return true
		}
	}
	return false
}

// checkNames refuses a name the spec carries that is not a Kubernetes
// object name: it becomes part of an API path (../../other-ns/...).
func checkNames(bj *BridgeJob) error {
	for _, n := range []struct{ field, name string }{
		{"spec.resourcesecret", bj.Spec.ResourceSecret},
		{"spec.s3storage.s3secret", s3Secret(bj)},
	} {
		if n.name == "" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(n.name); len(errs) > 0 {
			return &fieldError{n.field, fmt.Sprintf("%q is not the name of a Secret (%s); name a Secret of the BridgeJob's own namespace",
				n.name, strings.Join(errs, "; "))}
		}
	}
	return nil
}

// checkSecret: the Secret may be mounted into a BridgeJob's pod, and sent
// where sends go. An admin's entry needs no read (invoke still checks the
// binding it finds in the mounted files); otherwise the Secret is read for
// the opt-in label and its owner's binding (record.OriginsKey), which must
// list the origin of every URL the job sends it to: a BridgeJob's author
// chooses URLs, never where someone else's Secret goes. A missing Secret
// and one that did not opt in get the same answer, so a BridgeJob is no
// oracle for Secret names.
func (r *reconciler) checkSecret(ctx context.Context, ns, field, name string, sends []record.Send) error {
	for _, a := range r.o.AllowedSecrets {
		if a = strings.TrimSpace(a); a == name || a == ns+"/"+name {
			return nil
		}
	}
	refuse := &fieldError{field, fmt.Sprintf("the Secret %q of namespace %s is not one BridgeJobs may use", name, ns)}
	if r.o.SecretOptIn == "" {
		refuse.Msg += "; the operator's admin lists those (--allowed-secrets)"
		return refuse
	}
	refuse.Msg += fmt.Sprintf(": it does not exist or lacks the label %s=true, which its owner adds to let BridgeJobs mount it", r.o.SecretOptIn)
	v, err := r.readSecret(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return secretFault{refuse}
	}
	if err != nil {
		return fmt.Errorf("checking the Secret %s/%s: %w", ns, name, err)
	}
	if v.Metadata.Labels[r.o.SecretOptIn] != "true" {
		return secretFault{refuse}
	}
	if err := checkBound(field, name, v.Data.Origins, sends); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return secretFault{fe} // its owner binds it
		}
		return err
	}
	return nil
}

// checkBound: the binding (the Secret's record.OriginsKey) lists the
// origin of every URL in sends.
func checkBound(field, name string, origins []byte, sends []record.Send) error {
	if len(sends) == 0 {
		return nil // nothing is sent anywhere (a local job)
	}
	if origins == nil {
		return &fieldError{field, fmt.Sprintf("the Secret %q has no key %s, in which its owner lists the origins it may be sent to "+
			"(scheme://host:port, e.g. %s); BridgeJobs use only Secrets bound so", name, record.OriginsKey, originOf(sends[0].URL))}
	}
	b, err := record.ParseBinding(string(origins))
	var fe *backends.FieldError
	if errors.As(err, &fe) {
		return &fieldError{field, fmt.Sprintf("the Secret %q's %s %s; its owner fixes it", name, record.OriginsKey, fe.Msg)}
	}
	if err != nil {
		return err
	}
	for _, s := range sends {
		if !b.Allows(s.URL) {
			return &fieldError{field, fmt.Sprintf("the Secret %q is bound to %s (its key %s), not to %s, where the job's %s would send it; "+
				"name a Secret bound to that origin, or ask the Secret's owner to add it", name, strings.Join(b, " "), record.OriginsKey, originOf(s.URL), s.Field)}
		}
	}
	return nil
}

// originOf is a URL's origin for a message: never its login or path.
func originOf(raw string) string {
	if o, ok := record.CanonicalOrigin(raw); ok {
		return o
	}
	return "a URL without scheme and host"
}

// secretView is what the operator reads of a Secret: its labels and its
// owner's binding. The API answers with the whole Secret (RBAC has no
// narrower read than get), but it is decoded into this type, which keeps
// no other value, and the answer's bytes are cleared at once.
type secretView struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Data struct {
		Origins []byte `json:"bridge-runner.origins"`
	} `json:"data"`
}

func (r *reconciler) readSecret(ctx context.Context, ns, name string) (*secretView, error) {
	res := r.c.REST().Get().AbsPath(kube.Secrets.Path(ns), name).Do(ctx)
	raw, _ := res.Raw()
	defer clear(raw)
	// Error, not Raw's error: it decodes the API's Status (a 403 names the
	// grant), where Raw's says "unknown".
	if err := res.Error(); err != nil {
		return nil, err
	}
	var v secretView
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("reading the Secret %s/%s: not a Secret", ns, name)
	}
	return &v, nil
}

// podDir is where a target's credentials directory is in the BridgeJob's
// pod: the step's own (spec.resourcesecret's mount) for "" and ".", a
// subdirectory of it for a relative path.
func podDir(dir string) string {
	switch {
	case record.StepCredentials(dir):
		return credentialsDir
	case path.IsAbs(dir):
		return path.Clean(dir)
	}
	return path.Join(credentialsDir, dir)
}

// sendsFrom are the URLs the description d sends the credentials mounted
// at dir to: each place whose credentials are there, and the S3 endpoint
// for the S3 Secret's mount.
func sendsFrom(d *record.Description, dir string) []record.Send {
	var out []record.Send
	for _, s := range record.CredentialSends(d) {
		if podDir(s.Dir) == dir {
			out = append(out, s)
		}
	}
	if dir == s3CredentialsDir && d.UsesS3() && strings.TrimSpace(d.S3.Endpoint) != "" {
		out = append(out, record.Send{Field: "s3.endpoint", Dir: dir, URL: record.S3URL(d.S3.Endpoint, d.S3.Secure)})
	}
	return out
}

// noProbe is the HTTP client the operator gives SelectBackend: the operator
// sends no request to a URL a BridgeJob's author wrote (invoke recognises a
// Ray dashboard by asking it; the operator by ibmHint instead).
var noProbe = httpx.NewClient(noProbeTransport{}, 0)

type noProbeTransport struct{}

func (noProbeTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("the operator does not probe resourceURLs")
}

// chooseBackend picks the BridgeJob's backend with invoke's own rules
// (record.SelectBackend: spec.backend, else the operator's default, else
// local without a resourceURL, else what the URL says), and refuses local
// unless the admin allowed it: local runs the script in the Job's pod,
// beside the mounted Secret.
func (r *reconciler) chooseBackend(ctx context.Context, bj *BridgeJob) (string, error) {
	name, why, err := r.selectBackend(ctx, bj.Spec.Backend, bj.Spec.ResourceURL, &bj.Spec.Image)
	if err != nil {
		var fe *backends.FieldError
		if errors.As(err, &fe) {
			return "", &fieldError{"spec.backend", fe.Msg}
		}
		return "", &fieldError{"spec.backend", err.Error()}
	}
	if name == record.LocalBackend && !r.o.AllowLocal {
		return "", &fieldError{"spec.backend", fmt.Sprintf("is local (%s), which runs the script inside the Job's pod; "+
			"this operator does not run local jobs (its admin allows them with --allow-local); set spec.resourceURL and spec.backend to a remote system", why)}
	}
	return name, nil
}

// checkTargets applies the tenancy policy to spec.targets (the operator's
// own targets from spec.clusters need none): a target may run local only
// if the admin allows it (the script would run in the pod), and its
// credentials may be only a subdirectory of spec.resourcesecret's mount,
// never an absolute directory, which would let the author send the pod's
// own files (its ServiceAccount token) to a URL of their choice. Places
// with Secrets of their own are BridgeClusters (spec.clusters).
func (r *reconciler) checkTargets(bj *BridgeJob, d *record.Description) error {
	if len(bj.Spec.Clusters) > 0 {
		return nil
	}
	for i, t := range d.Targets {
		if path.IsAbs(t.Credentials) {
			return &fieldError{"spec.targets", fmt.Sprintf("targets[%d].credentials is an absolute directory; a BridgeJob's target may name only "+
				"a subdirectory of its resourcesecret's mount: list BridgeClusters in spec.clusters to give each place its own Secret", i)}
		}
		if t.Backend == record.LocalBackend && !r.o.AllowLocal {
			return &fieldError{"spec.targets", fmt.Sprintf("targets[%d] is local, which runs the script inside the Job's pod; "+
				"this operator does not run local jobs (its admin allows them with --allow-local)", i)}
		}
	}
	return nil
}

// selectBackend is invoke's choice (record.SelectBackend: the given
// backend, else the operator's default, else what the URL's path or host
// says) without invoke's one request, the Ray probe: where those do not
// say, the operator reads what IBM's users wrote (ibmHint). A BridgeCluster
// has no image (image nil).
func (r *reconciler) selectBackend(ctx context.Context, given, rawURL string, image *string) (name, why string, err error) {
	if strings.TrimSpace(given) == "" && r.o.DefaultBackend == "" && strings.TrimSpace(rawURL) != "" {
		if _, _, err := record.SelectBackend(ctx, "", "", rawURL, r.o.Backends, noProbe); err != nil {
			hint, hwhy := ibmHint(rawURL, ptrOr(image), r.o.Backends)
			if hint == "" {
				from := "or Ray's dashboard port " + rayDashboardPort
				if image != nil {
					from = "Ray's dashboard port " + rayDashboardPort + ", or IBM's per-system image in spec.image (e.g. quay.io/ibmdpdev/ray-pod)"
				}
				return "", "", backends.Invalid("backend", "is not set and resourceURL %q does not say which system it is: the operator sends it no request "+
					"and reads the backend from slurmrestd's /slurm/v0.0.NN/ path, LSF's /platform/ path, an IBM Quantum host, %s; set spec.backend to one of %s",
					rawURL, from, strings.Join(remote(r.o.Backends), ", "))
			}
			name, _, err := record.SelectBackend(ctx, hint, "", rawURL, r.o.Backends, noProbe)
			return name, hwhy, err
		}
	}
	return record.SelectBackend(ctx, given, r.o.DefaultBackend, rawURL, r.o.Backends, noProbe)
}

// rayDashboardPort is the port of Ray's dashboard and Jobs API, which IBM's
// Ray pod asks users to expose and point resourceURL at.
const rayDashboardPort = "8265"

// ibmHint names the backend that IBM's users meant when the URL's path or
// host does not say: IBM's image for the system (each of IBM's pods ran one:
// quay.io/ibmdpdev/ray-pod, slurm-pod, lsf-pod, quantum-pod), else Ray's
// dashboard port in the URL. "" when neither says.
func ibmHint(rawURL, image string, names []string) (name, why string) {
	ref := image[strings.LastIndex(image, "/")+1:]
	if i := strings.IndexAny(ref, ":@"); i >= 0 {
		ref = ref[:i]
	}
	if b, ok := strings.CutSuffix(ref, "-pod"); ok && b != record.LocalBackend && slices.Contains(names, b) {
		return b, "spec.image is IBM's " + b + " pod"
	}
	if u, err := url.Parse(strings.TrimSpace(rawURL)); err == nil && u.Port() == rayDashboardPort && slices.Contains(names, "ray") {
		return "ray", "resourceURL's port is Ray's dashboard port " + rayDashboardPort
	}
	return "", ""
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// remote are the backend names but local.
func remote(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == record.LocalBackend })
}
