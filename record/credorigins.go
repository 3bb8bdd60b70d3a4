package record

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// OriginsKey is the key of a credentials Secret in which its owner lists
// the origins (scheme://host:port, separated by spaces, commas or new
// lines) its credentials may be sent to. Being data of the Secret, it is a
// file of the mounted directory too: invoke checks it before its first
// request, without any Kubernetes read, and the operator before it makes a
// pod. Whoever writes a job description (a record, a BridgeJob) chooses
// URLs; only the Secret's owner chooses where its Secret may go.
const OriginsKey = "bridge-runner.origins"

// Binding is the origins a Secret's owner bound it to, each canonical
// (CanonicalOrigin). A nil Binding is a Secret without OriginsKey.
type Binding []string

// ParseBinding reads OriginsKey's text; an entry that is not an origin is
// an error naming the key and the entry's position (an owner's typo must
// not widen or silently narrow the binding).
func ParseBinding(text string) (Binding, error) {
	fields := strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	b := Binding{}
	for i, f := range fields {
		o, ok := CanonicalOrigin(f)
		u, _ := url.Parse(f)
		if !ok || u == nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, backends.Invalid(OriginsKey, "entry %d is not an origin; list origins as scheme://host:port "+
				"(e.g. https://slurm.example.org:6820 ssh://login.example.org:22), separated by spaces, commas or new lines", i+1)
		}
		b = append(b, o)
	}
	if len(b) == 0 {
		return nil, backends.Invalid(OriginsKey, "is empty; list the origins (scheme://host:port) the Secret may be sent to, or remove the key")
	}
	sort.Strings(b)
	return b, nil
}

// Allows: the binding lists raw's origin.
func (b Binding) Allows(raw string) bool {
	o, ok := CanonicalOrigin(raw)
	if !ok {
		return false
	}
	for _, e := range b {
		if e == o {
			return true
		}
	}
	return false
}

// defaultPorts make https://h and https://h:443 one origin.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ssh": "22"}

// CanonicalOrigin is what a binding compares: scheme://host:port,
// lower-case, with the scheme's default port filled in and no login (a
// Secret is bound to a system, not to an account on it). ok is false for
// anything without a scheme and a host.
func CanonicalOrigin(raw string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Hostname() == "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = defaultPorts[scheme]
	}
	host := strings.ToLower(u.Hostname())
	if port == "" {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return scheme + "://" + host, true
	}
	return scheme + "://" + net.JoinHostPort(host, port), true
}

// S3URL is the URL the S3 keys are sent to: the endpoint (host:port) with
// the scheme s3.secure chooses.
func S3URL(endpoint string, secure bool) string {
	if secure {
		return "https://" + strings.TrimSpace(endpoint)
	}
	return "http://" + strings.TrimSpace(endpoint)
}

// Send is one URL a job's credentials directory would be sent to, and the
// record field that names the URL.
type Send struct {
	Place string // "targets[i]", or "" for the job's one place
	Field string
	Dir   string // the directory as the description names it ("" the step's own)
	URL   string
}

// CredentialSends lists every URL the description's places send their
// credentials to: each place's resourceURL and every URL its
// jobproperties give a backend to authenticate at (credentialURLProperty).
// The S3 endpoint's keys come from their own directory (see S3URL).
func CredentialSends(d *Description) []Send {
	if len(d.Targets) == 0 {
		return placeSends("", d.CredentialsDir, d.ResourceURL, d.Properties)
	}
	var out []Send
	for i, t := range d.Targets {
		out = append(out, placeSends(fmt.Sprintf("targets[%d]", i), t.Credentials, t.ResourceURL, t.JobProperties)...)
	}
	return out
}

func placeSends(place, dir, resourceURL string, props json.RawMessage) []Send {
	prefix := place
	if prefix != "" {
		prefix += "."
	}
	var out []Send
	if strings.TrimSpace(resourceURL) != "" {
		out = append(out, Send{place, prefix + "resourceURL", dir, resourceURL})
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(props, &m) // checked by Parse
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v string
		if credentialURLProperty(k) && json.Unmarshal(m[k], &v) == nil && strings.TrimSpace(v) != "" {
			out = append(out, Send{place, prefix + "jobproperties." + k, dir, v})
		}
	}
	return out
}

// credentialURLProperty: a jobproperties key that names a URL a backend
// sends the credentials to (quantum's iam_url, iamURL, iam_endpoint): any
// top-level key whose name says URL or endpoint. The rule is by name so
// that the next backend's token_url is covered without a list to update
// (TestCredentialURLPropertiesAreChecked walks the backends for them).
func credentialURLProperty(key string) bool {
	k := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(key))
	return strings.Contains(k, "url") || strings.Contains(k, "endpoint")
}

// CredentialURLProperty is credentialURLProperty, for the tests that hold
// the backends to it.
func CredentialURLProperty(key string) bool { return credentialURLProperty(key) }

// podIdentityDirs hold a pod's own identity: its ServiceAccount token
// (kubernetes.io/serviceaccount) and the projected tokens of cloud
// providers. No target's credentials may be read from there: the token
// would go to the target's URL. /proc is there too: /proc/self/root/... is
// every path of the pod again.
var podIdentityDirs = []string{"/var/run/secrets", "/run/secrets", "/proc"}

// IdentityDir: dir (absolute, clean) is or is inside a directory of the
// pod's own identity.
func IdentityDir(dir string) bool {
	dir = path.Clean(dir)
	for _, p := range podIdentityDirs {
		if dir == p || strings.HasPrefix(dir, p+"/") {
			return true
		}
	}
	return false
}
