package record

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/bridge-runner/bridge-runner/backends"
)

// Fault classes: permanent faults that no retry can mend. An error of one
// of these classes wraps backends.ErrInvalid, so invoke stops at once and
// exits 2 (a retry would fail the same way), even when a backend also marked
// it transient. cmd/bridge-runner's fault table turns classes into exit
// codes and the README's fault table says what to do about each.
const (
	FaultForbidden   = "kubernetes-forbidden" // RBAC refused a request
	FaultNamespace   = "namespace"            // invalid or missing namespace
	FaultJobName     = "job-name"             // unusable as a ConfigMap or file name
	FaultStateDir    = "state-dir"            // state dir, record or lock not a writable directory
	FaultURL         = "url"                  // user info in a URL, bad port
	FaultTLS         = "tls"                  // certificate verification failed
	FaultDuration    = "duration"             // negative, NaN or absurd duration
	FaultCredentials = "credentials"          // credential file unreadable or too big
	FaultRecordID    = "record-id"            // the record's id is not the job it submitted
)

// Fault is a permanent fault: it names the setting at fault (Field) and the
// fix (in Msg). Err, when set, is the underlying cause, kept for errors.As.
type Fault struct {
	Class string
	Field string
	Msg   string
	Err   error
}

func (f *Fault) Error() string { return f.Field + ": " + f.Msg }

// Unwrap gives a backends.FieldError (which wraps backends.ErrInvalid), so
// that a Fault is an invalid-input error like any other, and the cause.
func (f *Fault) Unwrap() []error {
	fe := &backends.FieldError{Field: f.Field, Msg: f.Msg}
	if f.Err == nil {
		return []error{fe}
	}
	return []error{fe, f.Err}
}

func NewFault(class, field, format string, args ...any) *Fault {
	return &Fault{Class: class, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// FaultClass returns the class of the first Fault in err's chain, or "".
func FaultClass(err error) string {
	var f *Fault
	if errors.As(err, &f) {
		return f.Class
	}
	return ""
}

// Permanent reports whether no retry can mend err: it wraps
// backends.ErrInvalid. That wins over ErrTransient, which a backend puts on
// every transport failure, a TLS verification failure included.
func Permanent(err error) bool { return errors.Is(err, backends.ErrInvalid) }

// forbiddenRE picks the user, verb, resource and namespace out of the API
// server's Forbidden message.
var forbiddenRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`User "([^"]*)" cannot (\S+) resource "([^"]+)"(?: in API group "[^"]*")?(?: in the namespace "([^"]*)")?`)
})

// kubeFault recognizes the Kubernetes API errors that no retry can mend and
// says how to fix them; it returns nil for any other error.
func kubeFault(err error) error {
	if tf := TLSFault("kubeconfig", "the Kubernetes API server", err); tf != nil {
		return tf
	}
	switch {
	case apierrors.IsForbidden(err):
		msg := err.Error()
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			if m := forbiddenRE().FindStringSubmatch(st.Status().Message); m != nil {
				where := ""
				if m[4] != "" {
					where = " in namespace " + m[4]
				}
				return &Fault{Class: FaultForbidden, Field: "rbac", Err: err, Msg: fmt.Sprintf(
					"Kubernetes forbids %s to %s %s%s; the Role in workflows/rbac must be bound to the pod's ServiceAccount "+
						"(kubectl apply -k workflows/rbac -n <namespace>, and serviceAccountName: bridge-runner in the step)",
					m[1], m[2], m[3], where)}
			}
			msg = st.Status().Message
		}
		return &Fault{Class: FaultForbidden, Field: "rbac", Err: err, Msg: fmt.Sprintf(
			"Kubernetes forbids the request (%s); the Role in workflows/rbac must be bound to the pod's ServiceAccount", msg)}
	case apierrors.IsNotFound(err) && notFoundKind(err) == "namespaces":
		return &Fault{Class: FaultNamespace, Field: "namespace", Err: err, Msg: fmt.Sprintf(
			"%v; pass --namespace (or NAMESPACE) naming an existing namespace", err)}
	}
	return nil
}

func notFoundKind(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		return st.Status().Details.Kind
	}
	return ""
}

// fileFault classifies a state file error: a path that cannot be a writable
// directory (or file in one) is permanent; a full disk is transient (space
// may come back); anything else is returned as it is.
func fileFault(path string, err error) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	switch errno {
	case syscall.ENOTDIR, syscall.EISDIR, syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENAMETOOLONG, syscall.ELOOP:
		return &Fault{Class: FaultStateDir, Field: "state-dir", Err: err, Msg: fmt.Sprintf(
			"%s: %v; --state-dir must be a writable directory (holding the record %s and its .lock file)",
			path, errno, "<job-name>-bridge-cm.json")}
	case syscall.ENOSPC, syscall.EDQUOT:
		return backends.Transient(fmt.Errorf("%s: %w (the disk is full; a retry goes on once space is freed)", path, err))
	}
	return err
}

// TLSFault recognizes a failed certificate verification in err and names
// the certificate problem; nil if err is no such failure. field is the
// setting to fix, who the server.
func TLSFault(field, who string, err error) error {
	var (
		cve *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
	)
	var problem string
	switch {
	case errors.As(err, &he):
		problem = "its certificate does not name the host: " + he.Error()
	case errors.As(err, &ua):
		problem = "its certificate is signed by an authority this pod does not trust: " + ua.Error()
	case errors.As(err, &ci) && ci.Reason == x509.Expired:
		problem = "its certificate has expired or is not yet valid: " + ci.Error()
	case errors.As(err, &ci):
		problem = "its certificate is not valid: " + ci.Error()
	case errors.As(err, &cve):
		problem = "its certificate failed verification: " + cve.Error()
	default:
		return nil
	}
	return &Fault{Class: FaultTLS, Field: field, Err: err, Msg: fmt.Sprintf(
		"TLS verification of %s failed: %s; give the CA that signed it with --ca-file, fix the server's certificate, "+
			"or (insecure) pass --insecure-skip-tls-verify", who, problem)}
}

// hasUserInfo reports whether a URL (or a host:port) carries user info
// (user:password@), without parsing it: a URL that does not parse must still
// be refused without being echoed.
func hasUserInfo(raw string) bool {
	rest := raw
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return strings.Contains(rest, "@")
}

// KubeErr marks Kubernetes API errors that a retry may cure as transient:
// throttling, timeouts, server errors and a connection that failed.
func KubeErr(err error) error {
	if err == nil {
		return nil
	}
	if f := kubeFault(err); f != nil {
		return f
	}
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) ||
		isNetErr(err) {
		return backends.Transient(err)
	}
	return err
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Unreachable reports whether err is a connection that was refused, reset
// or timed out: a fault of the moment, not of the address. A name that
// does not resolve stays permanent (a typo, as a rule).
func Unreachable(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTimeout || dns.IsTemporary
	}
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		(errors.As(err, &ne) && ne.Timeout())
}
