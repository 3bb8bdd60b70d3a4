package record

import (
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// recordSuffixes are what the stores append to a job name: the ConfigMap
// name, and the file store's record, its lock and its temporary file.
const (
	cmSuffix       = "-bridge-cm"
	longFileSuffix = cmSuffix + ".json.lock"
	// nameMax is the longest file name Linux file systems take (NAME_MAX).
	nameMax = 255
)

// MaxJobNameLen is the longest job name that works in both stores: the
// ConfigMap name <job>-bridge-cm is at most 253 characters, and the state
// file's lock <job>-bridge-cm.json.lock at most 255.
const MaxJobNameLen = min(validation.DNS1123SubdomainMaxLength-len(cmSuffix), nameMax-len(longFileSuffix))

// ValidateJobName refuses a job name that would fail in either store, so
// that whatever is accepted works with a ConfigMap and with a file.
func ValidateJobName(name string) error {
	if name == "" {
		return NewFault(FaultJobName, "job-name", "is empty; pass --job-name (or set JOBNAME)")
	}
	if len(name) > MaxJobNameLen {
		return NewFault(FaultJobName, "job-name", "is %d characters long; use at most %d (the record is the ConfigMap <job-name>%s, or the file <job-name>%s)",
			len(name), MaxJobNameLen, cmSuffix, longFileSuffix)
	}
	// The name itself too: it also names the job on the remote system and
	// in labels, where "job-" would be an odd name.
	if len(validation.IsDNS1123Subdomain(name)) > 0 || len(validation.IsDNS1123Subdomain(name+cmSuffix)) > 0 {
		return NewFault(FaultJobName, "job-name", "%q is not a valid name: use lower-case letters, digits, '-' and '.', "+
			"starting and ending with a letter or digit, and with a letter or digit on both sides of every '.' "+
			"(the ConfigMap <job-name>%s must be a valid Kubernetes name)", name, cmSuffix)
	}
	return nil
}

// ValidateNamespace refuses a namespace name the API server cannot have.
func ValidateNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return NewFault(FaultNamespace, "namespace", "%q is not a valid namespace name (%s); pass --namespace (or NAMESPACE) naming an existing namespace",
			ns, strings.Join(errs, "; "))
	}
	return nil
}

// checkAddresses checks the description's URLs.
func checkAddresses(d *Description) error {
	if err := checkResourceURL("resourceURL", d.ResourceURL); err != nil {
		return err
	}
	return CheckS3Endpoint(d.S3.Endpoint)
}

// sshLogin reports whether raw is an ssh:// URL whose user info is a login
// name only, without a password.
func sshLogin(raw string) bool {
	rest, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(raw)), "ssh://")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	user, _, _ := strings.Cut(rest, "@")
	return ok && !strings.Contains(user, ":")
}

// checkResourceURL refuses what no backend can use safely: user info (a
// password in a ConfigMap, where anyone who may read ConfigMaps reads it)
// and a port out of range. The value is never echoed when it has user info.
// An ssh:// URL's login name (ssh://user@host) is no secret and stays.
func checkResourceURL(field, raw string) error {
	if raw == "" {
		return nil
	}
	if hasUserInfo(raw) && !sshLogin(raw) {
		return NewFault(FaultURL, field, "carries user info (user:password@); remove it, and put the credentials "+
			"in the Secret mounted as --credentials-dir")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil // each backend explains its own URL format
	}
	if u.Host != "" || u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "ssh" {
		if err := checkHost(field, u.Hostname()); err != nil {
			return err
		}
	}
	return checkPort(field, raw, u.Port(), false)
}

// maxHostLen is the longest DNS name (RFC 1035).
const maxHostLen = 253

// checkHost refuses a host no resolver or server can have, so that it is
// exit 2 naming the field, not a retried "no such host" ending in 75: an
// empty host (http://:8080 dials this machine), a name longer than DNS
// allows, and one beginning with '-' (no host name does; to ssh or any
// command it reads as an option). Only the start of a long name is echoed.
func checkHost(field, host string) error {
	switch {
	case host == "":
		return NewFault(FaultURL, field, "has no host name; give the server's address, e.g. https://slurm.example.org:6820")
	case len(host) > maxHostLen:
		return NewFault(FaultURL, field, "has a host name of %d characters (%.40q...); a host name has at most %d: fix the address", len(host), host, maxHostLen)
	case strings.HasPrefix(host, "-"):
		return NewFault(FaultURL, field, "has the host name %.64q, which begins with '-'; no host name does: fix the address", host)
	}
	return nil
}

// CheckS3Endpoint checks s3.endpoint (host or host:port, no scheme) the way
// checkResourceURL checks resourceURL; an empty port ("host:") is refused,
// because the client would quietly dial port 80.
func CheckS3Endpoint(ep string) error {
	if ep == "" {
		return nil
	}
	if hasUserInfo(ep) {
		return NewFault(FaultURL, "s3.endpoint", "carries user info (user:password@); give host:port only, and put the keys "+
			"in the Secret mounted as --s3-credentials-dir")
	}
	if strings.Contains(ep, "://") || strings.Contains(ep, "/") {
		return nil // NewS3Store explains the format
	}
	if !strings.Contains(ep, ":") || (strings.HasPrefix(ep, "[") && strings.HasSuffix(ep, "]")) {
		return checkHost("s3.endpoint", strings.Trim(ep, "[]")) // a host alone: the scheme's port
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return NewFault(FaultURL, "s3.endpoint", "is %.300q (%v); give host:port, e.g. minio:9000", ep, err)
	}
	if err := checkHost("s3.endpoint", host); err != nil {
		return err
	}
	return checkPort("s3.endpoint", ep, port, true)
}

// checkPort refuses a port that is not 1..65535; an empty one only when
// required (a URL's scheme implies one).
func checkPort(field, raw, port string, required bool) error {
	if port == "" {
		if required {
			return NewFault(FaultURL, field, "%q has no port after the ':'; give host:port, e.g. minio:9000", raw)
		}
		return nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return NewFault(FaultURL, field, "%q has port %q, which is not a port number (1 to 65535); fix the port", raw, port)
	}
	return nil
}

// CheckDuration refuses a duration flag outside [lo, hi]: a negative,
// overflowing or absurd value is a typo that no retry mends.
func CheckDuration(flag string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return NewFault(FaultDuration, "--"+flag, "is %s; give a duration from %s to %s", d, lo, hi)
	}
	return nil
}

// secondsDuration converts seconds to a duration, refusing NaN, infinities
// and values that do not fit (time.Duration would wrap to -2562047h).
func secondsDuration(field, raw string, secs float64) (time.Duration, error) {
	if math.IsNaN(secs) || math.IsInf(secs, 0) || math.Abs(secs) > float64(math.MaxInt64/int64(time.Second)) {
		return 0, NewFault(FaultDuration, field, "is %q, not a usable number of seconds; give seconds (20) or a duration (1m30s)", raw)
	}
	return time.Duration(secs * float64(time.Second)), nil
}
