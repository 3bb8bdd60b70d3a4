package record

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// Backend selection. IBM's records have no backend key (each of IBM's pod
// images served one system), so a migrating user's record names its system
// only through its resourceURL. The order, first match wins:
//
//  1. the record's backend key;
//  2. the backend given to invoke (--backend or BRIDGE_BACKEND);
//  3. local, when there is no resourceURL;
//  4. what the resourceURL unambiguously says: a path /slurm/v0.0.NN/ is
//     slurmrestd, a path /platform/ is LSF Application Center, an IBM
//     Quantum host is quantum, and a server that answers GET /api/version
//     with a ray_version is a Ray dashboard;
//  5. otherwise exit 2, naming the choices.
//
// A job with a resourceURL never runs locally: local with a URL is refused.

var (
	slurmPathRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|/)slurm/v0\.0\.\d+(/|$)`) })
	platformPathRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|/)platform(/|$)`) })
)

// quantumHosts are IBM Quantum's API hosts (and their regional variants).
var quantumHosts = []string{"quantum.cloud.ibm.com", "quantum-computing.cloud.ibm.com", "quantum-computing.ibm.com", "quantum.ibm.com"}

// SelectBackend returns the backend for a job and why it was chosen.
// recorded is the record's backend key, given the one from the command
// line or environment; names are the registered backends; hc reaches the
// URL for the Ray probe (nil: a default client).
func SelectBackend(ctx context.Context, recorded, given, rawURL string, names []string, hc *http.Client) (name, why string, err error) {
	recorded, given, rawURL = strings.TrimSpace(recorded), strings.TrimSpace(given), strings.TrimSpace(rawURL)
	choices := strings.Join(remoteNames(names), ", ")
	switch {
	case recorded != "":
		name, why = recorded, "the record's backend key"
	case given != "":
		name, why = given, "--backend (or BRIDGE_BACKEND)"
	case rawURL == "":
		name, why = LocalBackend, "no resourceURL: the job runs on this machine"
	default:
		if name, why = inferBackend(ctx, rawURL, hc); name == "" {
			return "", "", backends.Invalid("backend", "is not set and resourceURL %q does not say which system it is (%s); set backend in the record to one of %s, or pass --backend (BRIDGE_BACKEND)",
				rawURL, why, choices)
		}
	}
	if !slices.Contains(names, name) {
		return "", "", backends.Invalid("backend", "unknown backend %q (from %s); use one of: %s", name, why, strings.Join(names, ", "))
	}
	if name == LocalBackend && rawURL != "" {
		return "", "", backends.Invalid("backend", "is local (from %s), which would run the job on this machine, but resourceURL %q names a remote system; set backend to the system at that URL: one of %s",
			why, rawURL, choices)
	}
	return name, why, nil
}

func remoteNames(names []string) []string {
	var out []string
	for _, n := range names {
		if n != LocalBackend {
			out = append(out, n)
		}
	}
	return out
}

// inferBackend names the system at rawURL, or returns "" and why not.
func inferBackend(ctx context.Context, rawURL string, hc *http.Client) (string, string) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", "it is not an http(s) URL"
	}
	var found []string
	var why []string
	if slurmPathRE().MatchString(u.Path) {
		found, why = append(found, "slurm"), append(why, "its path has slurmrestd's /slurm/v0.0.NN/")
	}
	if platformPathRE().MatchString(u.Path) {
		found, why = append(found, "lsf"), append(why, "its path has LSF Application Center's /platform/")
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range quantumHosts {
		if host == h || strings.HasSuffix(host, "."+h) {
			found, why = append(found, "quantum"), append(why, "its host is IBM Quantum's "+h)
			break
		}
	}
	switch len(found) {
	case 1:
		return found[0], "resourceURL: " + why[0]
	case 0:
	default:
		return "", "it matches " + strings.Join(found, " and ")
	}
	switch v, status := rayVersion(ctx, u, hc); {
	case v == rayTokenAuth:
		return "ray", "resourceURL answers GET /api/version as a Ray dashboard with token authentication does (401, a missing token)"
	case v != "":
		return "ray", "resourceURL answers GET /api/version as a Ray " + v + " dashboard"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "", fmt.Sprintf("GET /api/version answered %d without saying what it is (the probe sends no credentials; a Ray dashboard behind a login would answer so: then set backend: ray)", status)
	}
	return "", "no /slurm/v0.0.NN/ or /platform/ path, no IBM Quantum host, no Ray dashboard answering /api/version"
}

// rayTokenAuth stands for a Ray dashboard that wants a token: Ray's
// aiohttp middleware answers 401 text/plain "Unauthorized: Missing
// authentication token" (Ray 2.60 with RAY_AUTH_MODE=token).
const rayTokenAuth = "token-auth"

// rayVersion asks a Ray dashboard for its version; "" if it is not one,
// rayTokenAuth if it is one that wants a token; and the HTTP status.
func rayVersion(ctx context.Context, u *url.URL, hc *http.Client) (string, int) {
	if hc == nil {
		hc = httpx.DefaultClient()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	probe := strings.TrimRight(u.String(), "/") + "/api/version"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe, nil)
	if err != nil {
		return "", 0
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", 0
	}
	defer resp.Body.Close()
	var v struct {
		RayVersion string `json:"ray_version"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusUnauthorized && strings.HasPrefix(string(body), "Unauthorized: Missing authentication token") {
		return rayTokenAuth, resp.StatusCode
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v) != nil {
		return "", resp.StatusCode
	}
	return v.RayVersion, resp.StatusCode
}
